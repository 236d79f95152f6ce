package flow_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/workflow"
)

// TestLoadingResumesWhenTheDatabaseReturns starts a registry that never
// loaded while its database is down: once the database is back it loads
// the stored flows within moments, without a refresh (its clock never
// moves), closes Loaded and logs the outage once and its end once. Loading
// only reads, which a locked SQLite file still serves, so only Postgres
// can refuse it.
func TestLoadingResumesWhenTheDatabaseReturns(t *testing.T) {
	t.Parallel()
	d := outagetest.Postgres(t)
	ctx := context.Background()
	clk := clock.NewMock()
	applier, err := flow.New(&flow.Config{Store: d.Store, Registry: workflow.NewRegistry(), Clock: clk})
	require.NoError(t, err)
	_, err = applier.Apply(ctx, quickFlow("quick", "1.0.0"))
	require.NoError(t, err)

	log := outagetest.NewLog()
	woken := make(chan string, 10)
	flows, err := flow.New(&flow.Config{
		Store: d.Store, Registry: workflow.NewRegistry(), Clock: clk, Logger: log.Logger(), RefreshInterval: time.Hour,
		WakeFunc: func(name string) { woken <- name },
	})
	require.NoError(t, err)
	d.Down(t)
	_, err = flows.Load(ctx)
	require.Error(t, err)
	select {
	case <-flows.Loaded():
		t.Fatal("Loaded is closed before a load succeeded")
	default:
	}

	require.NoError(t, flows.Start(ctx))
	t.Cleanup(func() { require.NoError(t, flows.Stop(context.Background())) })
	log.Wait(t, "database unavailable; retrying with backoff", "while", "loading flows")
	log.WaitN(t, 2, "database still unavailable", "while", "loading flows")
	require.False(t, flows.IsFlow("quick"))

	d.Up(t)
	select {
	case <-flows.Loaded():
	case <-time.After(outagetest.WaitTimeout):
		t.Fatalf("the flows were not loaded after the database came back; the log:\n%s", log)
	}
	require.True(t, flows.IsFlow("quick"))
	require.Equal(t, "quick", <-woken)
	log.Wait(t, "database available again", "while", "loading flows")
	require.Equal(t, 1, log.Count("database unavailable; retrying with backoff", "while", "loading flows"))
	require.Zero(t, log.Count("flow: refreshing flows failed"), "no warning per failed load")
}
