package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// TestClaimsResumeWhenTheDatabaseReturns starts a runner while its
// database is down, with an instance due. Its claims fail; once the
// database is back it claims and runs the instance within moments, with
// neither a poll (its clock is fake and never moves) nor a wake-up, and it
// logged the outage once and its end once.
func TestClaimsResumeWhenTheDatabaseReturns(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		ctx := context.Background()
		clk := clock.NewMock()
		clk.Set(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
		ran := make(chan struct{}, 1)
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "a", func(ctx context.Context) (int, error) {
				ran <- struct{}{}
				return 1, nil
			})
		})
		cl, err := client.New(&client.Config{Store: d.Store, Registry: reg, Clock: clk})
		require.NoError(t, err)
		_, err = cl.Create(ctx, "w", dftype.CreateRequest{ID: "due"})
		require.NoError(t, err)

		log := outagetest.NewLog()
		d.Down(t)
		r, err := runner.New(&runner.Config{Store: d.Store, Registry: reg, Clock: clk, Logger: log.Logger(), PollInterval: time.Hour})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, r.Stop(stopCtx))
		})
		log.Wait(t, "database unavailable; retrying with backoff", "while", "claiming tasks")
		// A few more failed rounds, none of them logged above debug.
		log.WaitN(t, 2, "database still unavailable", "while", "claiming tasks")

		d.Up(t)
		select {
		case <-ran:
		case <-time.After(outagetest.WaitTimeout):
			t.Fatalf("the runner did not claim the due instance after the database came back; its log:\n%s", log)
		}
		log.Wait(t, "database available again", "while", "claiming tasks")
		require.Eventually(t, func() bool {
			info, err := cl.Get(ctx, "w", "due")
			return err == nil && info.Status == dftype.StatusComplete
		}, outagetest.WaitTimeout, 10*time.Millisecond)
		require.Equal(t, 1, log.Count("database unavailable; retrying with backoff", "while", "claiming tasks"), "one warning for the outage")
		require.Equal(t, 1, log.Count("database available again", "while", "claiming tasks"))
		require.Zero(t, log.Count("claiming tasks failed"), "no warning per failed claim")
	})
}
