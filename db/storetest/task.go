package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testTask(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("ClaimRespectsDueTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createAt(t, workflowName, "a", b.at(time.Minute))

		require.Empty(t, b.claimAt(t, b.at(time.Minute-time.Microsecond), 10))
		require.Nil(t, b.get(t, "a").StartedAt)

		claimAt := b.at(time.Minute)
		tasks, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner:         "runner-7",
			WorkflowNames: []string{workflowName},
			Max:           10,
			Now:           claimAt,
			LockedUntil:   claimAt.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		claim := tasks[0]
		task := claim.Task
		require.Equal(t, "a", task.InstanceID)
		require.Equal(t, workflowName, task.WorkflowName)
		require.Equal(t, db.TaskStatusProcessing, task.Status)
		require.Equal(t, db.TaskKindRun, task.Kind)
		require.Equal(t, "runner-7", task.LockOwner)
		requireTimePtr(t, claimAt.Add(lease), task.LockedUntil)
		require.Equal(t, int64(1), task.Version)
		require.Equal(t, 1, task.Attempts)
		require.Equal(t, 1, task.RunNumber)
		// Queued and never started: the claim hands back its instance.
		require.NotNil(t, claim.FreshRun, "a run that never started comes with its instance")
		requireFreshRun(t, b, &claim)
		require.Equal(t, dftype.StatusRunning, claim.FreshRun.Status)
		require.Equal(t, task, b.task(t, "a"))

		// Given back and claimed again, it has started: it must be loaded.
		require.NoError(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(task), RunAt: claimAt}))
		again, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: "runner-7", WorkflowNames: []string{workflowName}, Max: 10, Now: claimAt, LockedUntil: claimAt.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, again, 1)
		require.Nil(t, again[0].FreshRun, "a run that started is not fresh")

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusRunning, inst.Status)
		requireTimePtr(t, claimAt, inst.StartedAt)
		requireTime(t, claimAt, inst.UpdatedAt)

		require.Empty(t, b.claimAt(t, claimAt, 10), "a leased task is not claimed again")
	})

	t.Run("ClaimRespectsMax", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"a", "b", "c", "d", "e"} {
			b.create(t, id)
		}
		require.Empty(t, b.claimAt(t, b.now, 0))
		require.Len(t, b.claimAt(t, b.now, 2), 2)
		require.Len(t, b.claimAt(t, b.now, 10), 3)
		require.Empty(t, b.claimAt(t, b.now, 10))
	})

	t.Run("ClaimOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createAt(t, workflowName, "new", b.at(-time.Second))
		b.createAt(t, workflowName, "old", b.at(-3*time.Second))
		b.createAt(t, workflowName, "mid", b.at(-2*time.Second))
		// A resuming kind due later than every run still goes first.
		b.createAt(t, workflowName, "resumed", b.at(-4*time.Second))
		_, err := b.store.InstancePause(b.ctx, b.change("resumed"))
		require.NoError(t, err)
		_, err = b.store.InstanceResume(b.ctx, b.change("resumed"))
		require.NoError(t, err)
		require.Equal(t, db.TaskKindResume, b.task(t, "resumed").Kind)

		require.Equal(t, []string{"resumed"}, taskIDs(b.claimAt(t, b.now, 1)))
		require.Equal(t, []string{"old", "mid"}, taskIDs(b.claimAt(t, b.now, 2)))
		require.Equal(t, []string{"new"}, taskIDs(b.claimAt(t, b.now, 2)))
	})

	t.Run("ClaimReturnsPriorityOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createAt(t, workflowName, "b", b.at(-time.Second))
		b.createAt(t, workflowName, "a", b.at(-2*time.Second))
		b.createAt(t, workflowName, "r", b.at(-3*time.Second))
		_, err := b.store.InstancePause(b.ctx, b.change("r"))
		require.NoError(t, err)
		_, err = b.store.InstanceResume(b.ctx, b.change("r"))
		require.NoError(t, err)
		require.Equal(t, []string{"r", "a", "b"}, taskIDs(b.claimAt(t, b.now, 10)))
	})

	t.Run("ClaimSkipsPausedTerminalAndOtherWorkflows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "paused")
		_, err := b.store.InstancePause(b.ctx, b.change("paused"))
		require.NoError(t, err)
		b.create(t, "terminated")
		_, err = b.store.InstanceTerminate(b.ctx, b.change("terminated"))
		require.NoError(t, err)
		b.createAt(t, otherName, "other", b.now)

		require.Empty(t, b.claimAt(t, b.at(time.Hour), 10))
		require.Nil(t, b.nextRunAt(t))
		require.Equal(t, dftype.StatusPaused, b.get(t, "paused").Status)

		tasks, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, Max: 10, Now: b.now, LockedUntil: b.at(lease),
		})
		require.NoError(t, err)
		require.Empty(t, tasks, "no workflow names, no work")

		tasks, err = b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{"nothing", otherName}, Max: 10, Now: b.now, LockedUntil: b.at(lease),
		})
		require.NoError(t, err)
		require.Equal(t, []string{"other"}, taskIDs(taskList(tasks)))
	})

	t.Run("ClaimReclaimsExpiredLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		first := b.claim(t, "a")
		require.Empty(t, b.claimAt(t, b.at(lease-time.Microsecond), 10), "lease not expired")

		expiry := b.at(lease)
		tasks, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: "runner-2", WorkflowNames: []string{workflowName}, Max: 10, Now: expiry, LockedUntil: expiry.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		second := tasks[0].Task
		require.Equal(t, first.ID, second.ID)
		require.Equal(t, first.Version+1, second.Version)
		require.Equal(t, 2, second.Attempts)
		require.Equal(t, "runner-2", second.LockOwner)
		requireTimePtr(t, expiry.Add(lease), second.LockedUntil)

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusRunning, inst.Status)
		requireTimePtr(t, b.now, inst.StartedAt, "started_at is the first start")

		err = b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(first), LockedUntil: b.at(time.Hour)})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.NoError(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(second), LockedUntil: b.at(time.Hour)}))
	})

	t.Run("ClaimMarksWaitingRunningButKeepsWaitingForPause", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "w")
		task := b.claim(t, "w")
		p := b.checkpoint(task)
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(time.Minute)
		p.NextKind = db.TaskKindWake
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusWaiting, b.get(t, "w").Status)

		task = b.claimIDAt(t, "w", b.at(time.Minute))
		require.Equal(t, db.TaskKindWake, task.Kind)
		inst := b.get(t, "w")
		require.Equal(t, dftype.StatusRunning, inst.Status)
		requireTimePtr(t, b.now, inst.StartedAt)

		_, err = b.store.InstancePause(b.ctx, b.change("w"))
		require.NoError(t, err)
		task = b.claimIDAt(t, "w", b.at(time.Hour))
		inst = b.get(t, "w")
		require.Equal(t, dftype.StatusWaitingForPause, inst.Status, "a reclaimed instance still parks")
		require.True(t, inst.PauseRequested)
	})

	t.Run("Heartbeat", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		require.NoError(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(task), LockedUntil: b.at(time.Hour)}))
		got := b.task(t, "a")
		requireTimePtr(t, b.at(time.Hour), got.LockedUntil)
		require.Equal(t, task.Version, got.Version, "a heartbeat keeps the version")
		require.Empty(t, b.claimAt(t, b.at(time.Hour-time.Second), 10))

		stale := ref(task)
		stale.Version--
		err := b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: stale, LockedUntil: b.at(2 * time.Hour)})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Equal(t, got, b.task(t, "a"), "nothing changed")
	})

	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		stale := ref(task)
		stale.Version++
		err := b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: stale, RunAt: b.now, LastError: "x"})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Equal(t, task, b.task(t, "a"), "nothing changed")

		require.NoError(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(task), RunAt: b.at(time.Minute), LastError: "runner shutting down"}))
		got := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, got.Status)
		requireTime(t, b.at(time.Minute), got.RunAt)
		require.Empty(t, got.LockOwner)
		require.Nil(t, got.LockedUntil)
		require.Equal(t, "runner shutting down", got.LastError)
		require.Equal(t, task.Version, got.Version)
		require.Equal(t, db.TaskKindRun, got.Kind)

		// Released means no longer held: the same version cannot act again.
		require.ErrorIs(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(task), LockedUntil: b.at(time.Hour)}), db.ErrLeaseLost)
		require.ErrorIs(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(task), RunAt: b.now}), db.ErrLeaseLost)
		_, err = b.store.Checkpoint(b.ctx, b.checkpoint(task))
		require.ErrorIs(t, err, db.ErrLeaseLost)

		require.Empty(t, b.claimAt(t, b.at(time.Minute-time.Second), 10))
		again := b.claimIDAt(t, "a", b.at(time.Minute))
		require.Equal(t, task.Version+1, again.Version)
		require.Equal(t, "runner shutting down", again.LastError)
	})

	t.Run("NextRunAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		require.Nil(t, b.nextRunAt(t))
		next, err := b.store.TaskNextRunAt(b.ctx, &db.TaskNextRunAtParams{})
		require.NoError(t, err)
		require.Nil(t, next)

		b.createAt(t, workflowName, "later", b.at(time.Hour))
		b.createAt(t, otherName, "other", b.at(-time.Hour))
		requireTimePtr(t, b.at(time.Hour), b.nextRunAt(t))
		requireTimePtr(t, b.at(-time.Hour), b.nextRunAt(t, workflowName, otherName))

		b.createAt(t, workflowName, "soon", b.at(time.Minute))
		requireTimePtr(t, b.at(time.Minute), b.nextRunAt(t))

		// A claimed task counts from its lease expiry.
		b.claimIDAt(t, "soon", b.at(time.Minute))
		requireTimePtr(t, b.at(time.Minute+lease), b.nextRunAt(t))

		// Paused instances never count.
		_, err = b.store.InstancePause(b.ctx, b.change("later"))
		require.NoError(t, err)
		requireTimePtr(t, b.at(time.Minute+lease), b.nextRunAt(t))
		_, err = b.store.InstanceTerminate(b.ctx, b.change("soon"))
		require.NoError(t, err)
		require.Nil(t, b.nextRunAt(t))
	})
}
