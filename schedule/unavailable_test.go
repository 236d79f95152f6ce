package schedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// TestFiringResumesWhenTheDatabaseReturns starts a scheduler while its
// database is down, with a schedule due: once the database is back the
// due time fires within moments, without a poll (the clock never moves
// again) and once, and the outage is logged once and its end once.
func TestFiringResumesWhenTheDatabaseReturns(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		ctx := context.Background()
		clk := clock.NewMock()
		clk.Set(start)
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "report", func(ctx context.Context, ev workflow.Event[report], step workflow.Step) (string, error) {
			return "", nil
		})
		log := outagetest.NewLog()
		s, err := schedule.New(&schedule.Config{Store: d.Store, Registry: reg, Clock: clk, Logger: log.Logger(), PollInterval: time.Hour})
		require.NoError(t, err)
		_, err = s.Create(ctx, schedule.CreateRequest{ID: "every-5", WorkflowName: "report", Cron: "*/5 * * * *"})
		require.NoError(t, err)
		clk.Add(5 * time.Minute) // 09:05:30: the 09:05 due time has come

		d.Down(t)
		require.NoError(t, s.Start(ctx))
		t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
		log.Wait(t, "database unavailable; retrying with backoff", "while", "firing schedules")
		log.WaitN(t, 2, "database still unavailable", "while", "firing schedules")
		require.Zero(t, log.Count("schedule: started an instance"))

		d.Up(t)
		started := log.Wait(t, "schedule: started an instance", "schedule", "every-5")
		prefix := schedule.InstanceIDPrefix("every-5", start.Add(5*time.Minute).Truncate(time.Minute)) + "-"
		require.True(t, strings.HasPrefix(fmt.Sprint(started.Attrs["instance"]), prefix), "instance %v of the 09:05 firing", started.Attrs["instance"])
		log.Wait(t, "database available again", "while", "firing schedules")
		require.Equal(t, 1, log.Count("database unavailable; retrying with backoff", "while", "firing schedules"))
		require.Zero(t, log.Count("schedule: firing due schedules failed"), "no warning per failed round")
		require.Zero(t, log.Count("schedule: firing failed"), "no error per failed firing")
		require.Equal(t, 1, log.Count("schedule: started an instance"), "the due time fired once")
	})
}

// TestFireDueStopsAtAnUnavailableDatabase locks an SQLite file with two
// schedules due: the first firing fails after its busy timeout and ends
// the call, instead of every due schedule waiting for its own.
func TestFireDueStopsAtAnUnavailableDatabase(t *testing.T) {
	t.Parallel()
	d := outagetest.SQLite(t)
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(start)
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "report", func(ctx context.Context, ev workflow.Event[report], step workflow.Step) (string, error) {
		return "", nil
	})
	s, err := schedule.New(&schedule.Config{Store: d.Store, Registry: reg, Clock: clk, Logger: outagetest.NewLog().Logger()})
	require.NoError(t, err)
	for _, id := range []string{"a", "b"} {
		_, err = s.Create(ctx, schedule.CreateRequest{ID: id, WorkflowName: "report", Cron: "*/5 * * * *"})
		require.NoError(t, err)
	}
	clk.Add(5 * time.Minute)

	d.Down(t)
	_, err = s.FireDue(ctx)
	require.ErrorIs(t, err, db.ErrUnavailable)
	require.Equal(t, 1, strings.Count(err.Error(), `firing schedule "`), "one firing tried: %v", err)

	d.Up(t)
	res, err := s.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, res.Fired)
}
