package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// testStats checks StatsGet: instance counts by workflow and status, ready
// and leased tasks against Now, the outbox backlog, the oldest due
// schedule and the workers online.
func testStats(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		st, err := b.store.StatsGet(b.ctx, &db.StatsGetParams{Now: b.now})
		require.NoError(t, err)
		require.Equal(t, &db.Stats{Instances: []db.StatusCount{}}, st)
	})

	t.Run("Counts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		b.create(t, "b")
		b.create(t, "c")
		b.createAt(t, otherName, "x", b.now)
		b.createHooked(t, "h", b.now)
		// a completes; b is held by a runner; c, h and x stay due.
		a := b.claimAt(t, b.now, 1)
		require.Equal(t, []string{"a"}, taskIDs(a))
		p := b.checkpoint(a[0])
		p.Outcome = db.OutcomeComplete
		p.Output = []byte(`1`)
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, taskIDs(b.claimAt(t, b.now, 1)))

		b.createSchedule(t, "late", -10*time.Minute)
		b.createSchedule(t, "later", -5*time.Minute)
		b.createSchedule(t, "future", time.Hour)

		for _, id := range []string{"w-online", "w-drain", "w-gone"} {
			_, err := b.store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{ID: id, Hostname: "h", PID: 1, MaxConcurrency: 1, Now: b.now})
			require.NoError(t, err)
		}
		_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "w-drain", Now: b.now})
		require.NoError(t, err)
		_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w-gone", Now: b.now})
		require.NoError(t, err)

		st, err := b.store.StatsGet(b.ctx, &db.StatsGetParams{Now: b.now})
		require.NoError(t, err)
		require.ElementsMatch(t, []db.StatusCount{
			{WorkflowName: workflowName, Status: dftype.StatusComplete, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusRunning, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusQueued, Count: 2},
			{WorkflowName: otherName, Status: dftype.StatusQueued, Count: 1},
		}, st.Instances)
		require.Equal(t, int64(3), st.TasksReady, "c, h and x are due")
		require.Equal(t, int64(1), st.TasksLeased, "b is held")
		require.Equal(t, int64(1), st.OutboxBacklog, "h's create was recorded")
		requireTimePtr(t, b.at(-10*time.Minute), st.OldestDueSchedule)
		require.Equal(t, int64(1), st.WorkersOnline, "a draining and an offline worker are not online")

		// An hour earlier nothing was due yet: no ready task, no due
		// schedule; what is held stays held.
		st, err = b.store.StatsGet(b.ctx, &db.StatsGetParams{Now: b.at(-time.Hour)})
		require.NoError(t, err)
		require.Zero(t, st.TasksReady)
		require.Equal(t, int64(1), st.TasksLeased)
		require.Nil(t, st.OldestDueSchedule)
	})

	t.Run("Ended", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"a", "b", "c", "d", "e", "g"} {
			b.create(t, id)
		}
		b.createPlaced(t, db.InstanceCreateParams{ID: "f", Namespace: "acme"})
		tasks := map[string]*db.Task{}
		for _, task := range b.claimAt(t, b.now, 100) {
			tasks[task.InstanceID] = task
		}
		// end ends instance id at d after now with outcome.
		end := func(id string, d time.Duration, outcome db.CheckpointOutcome) {
			t.Helper()
			p := b.checkpoint(tasks[id])
			p.Now, p.Outcome = b.at(d), outcome
			if outcome == db.OutcomeError {
				p.ErrorName, p.ErrorMessage = "E", "boom"
			} else {
				p.Output = []byte(`1`)
			}
			_, err := b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
		}
		end("a", time.Minute, db.OutcomeComplete)
		end("b", 7*time.Minute, db.OutcomeError)
		end("d", 30*time.Minute, db.OutcomeComplete) // after until
		end("g", 3*time.Minute, db.OutcomeComplete)
		for _, tc := range []struct {
			id   string
			d    time.Duration
			ns   string
			stop func(context.Context, *db.InstanceChangeParams) (*db.Instance, error)
		}{
			{"c", 12 * time.Minute, "", b.store.InstanceTerminate},
			{"f", 2 * time.Minute, "acme", b.store.InstanceTerminate},
			{"g", 4 * time.Minute, "", b.store.InstanceRestart}, // running again: not ended
		} {
			p := b.change(tc.id)
			p.Now, p.Namespace = new(b.at(tc.d)), tc.ns
			_, err := tc.stop(b.ctx, p)
			require.NoError(t, err)
		}

		count := func(p db.StatsEndedParams) []db.EndedCount {
			t.Helper()
			p.Since, p.Until, p.Bucket = b.now, b.at(20*time.Minute), 5*time.Minute
			if p.Max == 0 {
				p.Max = 100
			}
			out, err := b.store.StatsEnded(b.ctx, &p)
			require.NoError(t, err)
			return out
		}
		require.ElementsMatch(t, []db.EndedCount{
			{WorkflowName: workflowName, Status: dftype.StatusComplete, Bucket: 0, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusErrored, Bucket: 1, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusTerminated, Bucket: 2, Count: 1},
		}, count(db.StatsEndedParams{Namespace: workflow.DefaultNamespace}))
		require.ElementsMatch(t, []db.EndedCount{
			{WorkflowName: workflowName, Status: dftype.StatusComplete, Bucket: 0, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusTerminated, Bucket: 0, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusErrored, Bucket: 1, Count: 1},
			{WorkflowName: workflowName, Status: dftype.StatusTerminated, Bucket: 2, Count: 1},
		}, count(db.StatsEndedParams{}), "every namespace")
		var total int64
		for _, c := range count(db.StatsEndedParams{Max: 2}) {
			total += c.Count
		}
		require.Equal(t, int64(2), total, "at most Max instances are read")
		require.Empty(t, count(db.StatsEndedParams{Namespace: "nobody"}))

		_, err := b.store.StatsEnded(b.ctx, &db.StatsEndedParams{Since: b.now, Until: b.now, Max: 1})
		require.Error(t, err, "a bucket of zero")
	})
}
