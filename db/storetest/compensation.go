package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testCompensation(t *testing.T, newStore func(t *testing.T) db.Store) {
	compensate := func(b *testBundle, id string) (*db.Instance, error) {
		return b.store.InstanceCompensate(b.ctx, &db.InstanceCompensateParams{InstanceChangeParams: *b.change(id)})
	}
	take := func(t *testing.T, b *testBundle, task *db.Task) bool {
		t.Helper()
		took, err := b.store.CompensationTake(b.ctx, &db.CompensationTakeParams{
			Task: ref(task), WorkflowName: task.WorkflowName, InstanceID: task.InstanceID, RunNumber: task.RunNumber, Now: new(b.now),
		})
		require.NoError(t, err)
		return took
	}
	marker := func(t *testing.T, b *testBundle, id string) *db.Step {
		t.Helper()
		state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
		require.NoError(t, err)
		return state.Steps[db.CompensationMarkerKey]
	}

	t.Run("RunningStopsAtTheNextBoundaryAndIsTakenOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "r")
		task := b.claim(t, "r")
		require.False(t, take(t, b, task), "no request: an ordinary pause is not taken")

		inst, err := compensate(b, "r")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, inst.Status)
		require.True(t, inst.PauseRequested, "the request reaches the runner as a pause request")
		m := marker(t, b, "r")
		require.NotNil(t, m)
		require.Equal(t, db.StepStatusComplete, m.Status)
		require.Zero(t, m.Attempts)

		// The runner's next checkpoint reports the pause request.
		p := b.checkpoint(task)
		p.Outcome = db.OutcomeContinue
		p.Steps = []db.StepWrite{{Key: "a", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`)}}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.True(t, res.PauseRequested)

		stale := *task
		stale.Version--
		require.False(t, take(t, b, &stale), "fenced by the task's version")
		require.True(t, take(t, b, task))
		require.False(t, take(t, b, task), "taken once")
		inst = b.get(t, "r")
		require.Equal(t, dftype.StatusRunning, inst.Status)
		require.False(t, inst.PauseRequested, "the pause request that carried it is cleared")
		require.Equal(t, 1, marker(t, b, "r").Attempts)

		again, err := compensate(b, "r")
		require.NoError(t, err)
		require.False(t, again.PauseRequested, "a second request changes nothing")
	})

	t.Run("WaitingIsQueuedAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "w")
		task := b.claim(t, "w")
		p := b.checkpoint(task)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(time.Hour), db.TaskKindWake
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		inst, err := compensate(b, "w")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, inst.Status)
		require.True(t, inst.PauseRequested)
		next := b.task(t, "w")
		require.Equal(t, db.TaskStatusPending, next.Status)
		require.Equal(t, db.TaskKindResume, next.Kind)
		require.True(t, !next.RunAt.After(b.now), "due now")
		require.Greater(t, next.Version, task.Version, "a runner still holding it is fenced out")
		claimed := b.claim(t, "w")
		require.True(t, take(t, b, claimed))
	})

	// requireQueuedForCompensation checks that a run that stopped (suspend
	// or park) with an untaken compensation request was queued instead of
	// paused, so that no call after the checkpoint is needed: the instance
	// queued with its pause request kept, its task due now as a resume, and
	// the next claim takes the request up.
	requireQueuedForCompensation := func(t *testing.T, b *testBundle, id string, res *db.CheckpointResult) {
		t.Helper()
		require.Equal(t, dftype.StatusQueued, res.Status)
		require.True(t, res.Due, "the runner is told to claim it")
		inst := b.get(t, id)
		require.Equal(t, dftype.StatusQueued, inst.Status, "queued, not paused")
		require.True(t, inst.PauseRequested, "the pause request carries the compensation request to the next run")
		next := b.task(t, id)
		require.Equal(t, db.TaskStatusPending, next.Status)
		require.Equal(t, db.TaskKindResume, next.Kind)
		require.True(t, !next.RunAt.After(b.now), "due now")
		require.Zero(t, marker(t, b, id).Attempts, "not taken yet")
		claimed := b.claim(t, id)
		require.True(t, take(t, b, claimed))
		require.Equal(t, 1, marker(t, b, id).Attempts)
		require.False(t, b.get(t, id).PauseRequested, "taken: the pause request that carried it is cleared")
	}

	t.Run("SuspendWithAnUntakenRequestIsQueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createHooked(t, "s", b.now)
		task := b.claim(t, "s")
		_, err := compensate(b, "s")
		require.NoError(t, err)
		// The run suspends before it sees the request: the pause request
		// would park it, but the request queues it instead.
		res := b.suspend(t, task, true, b.at(time.Hour), db.TaskKindWake)
		require.Contains(t, b.recorded(t), fmt.Sprintf("%s s %v", db.HookReasonResume, b.now.Sub(base)),
			"a resume hook entry, due now")
		requireQueuedForCompensation(t, b, "s", res)
	})

	t.Run("ParkWithAnUntakenRequestIsQueued", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "k")
		task := b.claim(t, "k")
		_, err := b.store.InstancePause(b.ctx, b.change("k"))
		require.NoError(t, err)
		// The runner saw the pause, found no compensation request, and
		// parks; the request comes before the park commits.
		_, err = compensate(b, "k")
		require.NoError(t, err)
		p := b.checkpoint(task)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomePark, b.now, db.TaskKindResume
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		requireQueuedForCompensation(t, b, "k", res)
	})

	t.Run("OrdinaryPausesStillPause", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		pauseAndSuspend := func(t *testing.T, id string, task *db.Task) {
			t.Helper()
			_, err := b.store.InstancePause(b.ctx, b.change(id))
			require.NoError(t, err)
			res := b.suspend(t, task, false, b.at(time.Hour), db.TaskKindWake)
			require.Equal(t, dftype.StatusPaused, res.Status)
			require.False(t, res.Due)
			inst := b.get(t, id)
			require.Equal(t, dftype.StatusPaused, inst.Status)
			require.False(t, inst.PauseRequested)
		}
		// No request at all.
		b.create(t, "o")
		pauseAndSuspend(t, "o", b.claim(t, "o"))
		require.Nil(t, marker(t, b, "o"))

		// A request taken up before: a later pause pauses.
		b.create(t, "d")
		task := b.claim(t, "d")
		_, err := compensate(b, "d")
		require.NoError(t, err)
		require.True(t, take(t, b, task))
		pauseAndSuspend(t, "d", task)
		require.Equal(t, 1, marker(t, b, "d").Attempts)
	})

	t.Run("TerminalAndMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "t")
		_, err := b.store.InstanceTerminate(b.ctx, b.change("t"))
		require.NoError(t, err)
		_, err = compensate(b, "t")
		require.ErrorIs(t, err, db.ErrTerminal)
		require.Nil(t, marker(t, b, "t"), "a refused request records nothing")
		_, err = compensate(b, "missing")
		require.ErrorIs(t, err, db.ErrNotFound)
	})
}
