package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testLifecycle(t *testing.T, newStore func(t *testing.T) db.Store) {
	// running claims the instance's task so the instance is running.
	running := func(t *testing.T, b *testBundle, id string) *db.Task {
		b.create(t, id)
		return b.claim(t, id)
	}
	// waiting suspends a running instance until an hour from now.
	waiting := func(t *testing.T, b *testBundle, id string) *db.Task {
		task := running(t, b, id)
		p := b.checkpoint(task)
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(time.Hour)
		p.NextKind = db.TaskKindWake
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusWaiting, res.Status)
		return task
	}
	complete := func(t *testing.T, b *testBundle, id string) {
		task := running(t, b, id)
		p := b.checkpoint(task)
		p.Outcome = db.OutcomeComplete
		p.Output = json.RawMessage(`"done"`)
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
	}

	t.Run("Pause", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		waiting(t, b, "waiting")
		running(t, b, "running")
		complete(t, b, "done")
		b.create(t, "queued")

		inst, err := b.store.InstancePause(b.ctx, b.change("queued"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusPaused, inst.Status)
		require.False(t, inst.PauseRequested)
		require.Equal(t, inst, b.get(t, "queued"))

		inst, err = b.store.InstancePause(b.ctx, b.change("waiting"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusPaused, inst.Status)
		require.False(t, inst.PauseRequested)

		inst, err = b.store.InstancePause(b.ctx, b.change("running"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusWaitingForPause, inst.Status)
		require.True(t, inst.PauseRequested)

		// Pausing again changes nothing.
		for _, id := range []string{"queued", "running"} {
			before := b.get(t, id)
			p := b.change(id)
			p.Now = new(b.at(time.Minute))
			inst, err = b.store.InstancePause(b.ctx, p)
			require.NoError(t, err)
			require.Equal(t, before, inst)
		}

		_, err = b.store.InstancePause(b.ctx, b.change("done"))
		require.ErrorIs(t, err, db.ErrTerminal)
		_, err = b.store.InstancePause(b.ctx, b.change("missing"))
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("ResumeQueuesPausedInstanceWithNewVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		task := running(t, b, "a")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)

		// The runner parks the instance at a step boundary.
		p := b.checkpoint(task)
		p.Outcome = db.OutcomePark
		p.NextRunAt = b.at(time.Hour)
		p.NextKind = db.TaskKindResume
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusPaused, res.Status)
		require.False(t, res.Due)
		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusPaused, inst.Status)
		require.False(t, inst.PauseRequested)
		parked := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, parked.Status)
		require.Equal(t, db.TaskKindResume, parked.Kind)
		requireTime(t, b.at(time.Hour), parked.RunAt)
		require.Nil(t, parked.LockedUntil)
		require.Empty(t, parked.LockOwner)
		require.Empty(t, b.claimAt(t, b.at(2*time.Hour), 10), "paused instances are never claimed")

		resumeAt := b.at(time.Minute)
		inst, err = b.store.InstanceResume(b.ctx, &db.InstanceChangeParams{WorkflowName: workflowName, ID: "a", Now: new(resumeAt)})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, inst.Status)
		require.False(t, inst.PauseRequested)
		requireTime(t, resumeAt, inst.UpdatedAt)
		resumed := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, resumed.Status)
		require.Equal(t, db.TaskKindResume, resumed.Kind)
		requireTime(t, resumeAt, resumed.RunAt)
		require.Greater(t, resumed.Version, parked.Version)

		// A runner still holding the old version is fenced out.
		_, err = b.store.Checkpoint(b.ctx, b.checkpoint(task))
		require.ErrorIs(t, err, db.ErrLeaseLost)

		again := b.claimIDAt(t, "a", resumeAt)
		require.Equal(t, resumed.Version+1, again.Version)
		require.Equal(t, dftype.StatusRunning, b.get(t, "a").Status)
	})

	t.Run("ResumeOthersIsNoop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		running(t, b, "running")
		waiting(t, b, "waiting")
		complete(t, b, "done")
		b.create(t, "queued")
		for _, id := range []string{"queued", "running", "waiting"} {
			before, task := b.get(t, id), b.task(t, id)
			p := b.change(id)
			p.Now = new(b.at(time.Minute))
			inst, err := b.store.InstanceResume(b.ctx, p)
			require.NoError(t, err)
			require.Equal(t, before, inst, id)
			require.Equal(t, task, b.task(t, id), id)
		}
		before := b.get(t, "done")
		inst, err := b.store.InstanceResume(b.ctx, b.change("done"))
		require.NoError(t, err, "resuming a terminal instance is a no-op too")
		require.Equal(t, before, inst)
		_, err = b.store.InstanceResume(b.ctx, b.change("missing"))
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("Terminate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		task := running(t, b, "a")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)

		at := b.at(time.Minute)
		inst, err := b.store.InstanceTerminate(b.ctx, &db.InstanceChangeParams{WorkflowName: workflowName, ID: "a", Now: new(at)})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusTerminated, inst.Status)
		require.False(t, inst.PauseRequested)
		requireTimePtr(t, at, inst.CompletedAt)
		require.Equal(t, inst, b.get(t, "a"))
		_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a"})
		require.ErrorIs(t, err, db.ErrNotFound)

		// The runner that held it is fenced out everywhere.
		_, err = b.store.Checkpoint(b.ctx, b.checkpoint(task))
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.ErrorIs(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(task), LockedUntil: b.at(time.Hour)}), db.ErrLeaseLost)
		require.ErrorIs(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(task), RunAt: b.now}), db.ErrLeaseLost)

		_, err = b.store.InstanceTerminate(b.ctx, b.change("a"))
		require.ErrorIs(t, err, db.ErrTerminal)
		_, err = b.store.InstanceTerminate(b.ctx, b.change("missing"))
		require.ErrorIs(t, err, db.ErrNotFound)

		b.create(t, "queued")
		inst, err = b.store.InstanceTerminate(b.ctx, b.change("queued"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusTerminated, inst.Status)
		require.Empty(t, b.claimAt(t, b.at(time.Hour), 10))
	})

	t.Run("RestartTerminalInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		task := running(t, b, "a")
		p := b.checkpoint(task)
		p.Outcome = db.OutcomeError
		p.ErrorName = "Boom"
		p.ErrorMessage = "it broke"
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		at := b.at(time.Hour)
		inst, err := b.store.InstanceRestart(b.ctx, &db.InstanceChangeParams{WorkflowName: workflowName, ID: "a", Now: new(at)})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, inst.Status)
		require.Equal(t, 2, inst.RunNumber)
		require.Empty(t, inst.ErrorName)
		require.Empty(t, inst.ErrorMessage)
		require.Nil(t, inst.Output)
		require.Nil(t, inst.StartedAt)
		require.Nil(t, inst.CompletedAt)
		require.False(t, inst.PauseRequested)
		requireJSON(t, `{"id":"a"}`, inst.Params, "params are kept")
		requireTime(t, b.now, inst.CreatedAt)
		require.Equal(t, inst, b.get(t, "a"))

		next := b.task(t, "a")
		require.Equal(t, 2, next.RunNumber)
		require.Equal(t, db.TaskKindRun, next.Kind)
		require.Equal(t, db.TaskStatusPending, next.Status)
		require.Equal(t, 0, next.Attempts)
		requireTime(t, at, next.RunAt)

		claimed := b.claimIDAt(t, "a", at)
		require.Equal(t, 2, claimed.RunNumber)
		require.Greater(t, claimed.Version, task.Version)

		_, err = b.store.InstanceRestart(b.ctx, b.change("missing"))
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("RestartFencesOldRunAndHidesItsEvents", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		old := running(t, b, "a")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		b.send(t, "a", "approve", `{"run":1}`)

		inst, err := b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, inst.Status)
		require.False(t, inst.PauseRequested)
		task := b.task(t, "a")
		require.Greater(t, task.Version, old.Version)
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.Nil(t, task.LockedUntil)

		// The old holder can do nothing any more.
		p := b.checkpoint(old)
		p.Steps = []db.StepWrite{{Key: "late", Type: db.StepTypeDo, Status: db.StepStatusComplete, Result: json.RawMessage(`1`)}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.ErrorIs(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(old), LockedUntil: b.at(time.Hour)}), db.ErrLeaseLost)
		require.Empty(t, b.steps(t, "a", 1))

		// The new run does not see the old run's event.
		task = b.claim(t, "a")
		require.Equal(t, 2, task.RunNumber)
		p = b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait"}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Nil(t, res.Event)
		require.Empty(t, b.events(t, "a", 2))
		all := b.events(t, "a", 0)
		require.Len(t, all, 1)
		require.Equal(t, 1, all[0].RunNumber)
		require.Nil(t, all[0].DeliveredAt)

		// A checkpoint of the new run naming the old run number is fenced too.
		p = b.checkpoint(task)
		p.RunNumber = 1
		_, err = b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost)
	})
}
