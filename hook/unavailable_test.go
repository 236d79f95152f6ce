package hook_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/workflow"
)

// outageSetup is a client that records hook entries on d's store and a
// fake clock that the tests never move past a lease.
func outageSetup(t *testing.T, d *outagetest.DB) (*client.Client, *clock.Mock) {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) { return 1, nil })
	cl, err := client.New(&client.Config{Store: d.Store, Registry: reg, Clock: clk, RecordHooks: true})
	require.NoError(t, err)
	return cl, clk
}

// TestDeliveriesResumeWhenTheDatabaseReturns starts a deliverer while its
// database is down, with an entry recorded: once the database is back it
// delivers the entry within moments, without a poll (its clock never
// moves) or a wake-up, and logs the outage once and its end once.
func TestDeliveriesResumeWhenTheDatabaseReturns(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		ctx := context.Background()
		cl, clk := outageSetup(t, d)
		_, err := cl.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		called := make(chan hook.Enqueued, 10)
		log := outagetest.NewLog()
		dl, err := hook.NewDeliverer(&hook.Config{
			Store: d.Store, Clock: clk, Logger: log.Logger(), PollInterval: time.Hour,
			OnWorkflowEnqueued: func(ctx context.Context, e hook.Enqueued) error { called <- e; return nil },
		})
		require.NoError(t, err)
		d.Down(t)
		require.NoError(t, dl.Start(ctx))
		t.Cleanup(func() { require.NoError(t, dl.Stop(context.Background())) })
		log.Wait(t, "database unavailable; retrying with backoff", "while", "delivering hooks")
		log.WaitN(t, 2, "database still unavailable", "while", "delivering hooks")
		require.Empty(t, called)

		d.Up(t)
		select {
		case e := <-called:
			require.Equal(t, "x", e.InstanceID)
		case <-time.After(outagetest.WaitTimeout):
			t.Fatalf("the entry was not delivered after the database came back; the log:\n%s", log)
		}
		log.Wait(t, "database available again", "while", "delivering hooks")
		require.Equal(t, 1, log.Count("database unavailable; retrying with backoff", "while", "delivering hooks"))
		require.Zero(t, log.Count("delivering hooks failed"), "no warning per failed round")
	})
}

// TestDeliveryRecordedAfterTheDatabaseReturns takes the database away
// while the hook runs, so that recording the delivery fails: the record is
// repeated once the database is back, and the entry is delivered once,
// not again when its lease ends.
func TestDeliveryRecordedAfterTheDatabaseReturns(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		ctx := context.Background()
		cl, clk := outageSetup(t, d)
		_, err := cl.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		inHook, release := make(chan struct{}), make(chan struct{})
		calls := 0
		log := outagetest.NewLog()
		dl, err := hook.NewDeliverer(&hook.Config{
			Store: d.Store, Clock: clk, Logger: log.Logger(), Lease: time.Minute,
			OnWorkflowEnqueued: func(ctx context.Context, e hook.Enqueued) error {
				calls++
				if calls == 1 {
					close(inHook)
					<-release
				}
				return nil
			},
		})
		require.NoError(t, err)
		delivered := make(chan error, 1)
		go func() {
			_, err := dl.DeliverDue(ctx)
			delivered <- err
		}()
		<-inHook
		d.Down(t)
		close(release)
		log.Wait(t, "recording a hook delivery failed; retrying until its lease ends")
		d.Up(t)
		require.NoError(t, <-delivered)
		require.Zero(t, log.Count("recording a hook delivery failed; it is retried when its lease expires"))

		clk.Add(2 * time.Minute) // past the lease
		n, err := dl.DeliverDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the entry was recorded delivered: no claim delivers it again")
		require.Equal(t, 1, calls)
	})
}
