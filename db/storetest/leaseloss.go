package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// testLeaseLosses checks the count of leases lost without a checkpoint
// (db.Task.LeaseLosses): what adds to it and what resets it.
func testLeaseLosses(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("ClaimOfExpiredLeaseCounts", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		first := b.claim(t, "a")
		require.Zero(t, first.LeaseLosses, "a claim of a pending task loses no lease")

		for i := 1; i <= 3; i++ {
			task := b.claimIDAt(t, "a", b.at(time.Duration(i)*lease))
			require.Equal(t, i, task.LeaseLosses, "takeover %d", i)
			require.Equal(t, i, b.task(t, "a").LeaseLosses)
		}

		// Given back (a shutdown): nothing was lost, and the next claim of
		// the pending task counts nothing either.
		held := b.task(t, "a")
		require.NoError(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(held), RunAt: b.at(4 * lease)}))
		again := b.claimIDAt(t, "a", b.at(4*lease))
		require.Equal(t, 3, again.LeaseLosses)

		// Given back because the store kept failing: that counts.
		require.NoError(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{
			Task: ref(again), RunAt: b.at(4 * lease), LastError: "checkpointing: connection reset", CountLeaseLoss: true,
		}))
		released := b.task(t, "a")
		require.Equal(t, 4, released.LeaseLosses)
		require.Equal(t, "checkpointing: connection reset", released.LastError)
		require.Equal(t, db.TaskStatusPending, released.Status)

		// A stale holder's hand-back counts nothing.
		require.ErrorIs(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(again), RunAt: b.now, CountLeaseLoss: true}), db.ErrLeaseLost)
		require.Equal(t, 4, b.task(t, "a").LeaseLosses)
	})

	t.Run("CheckpointWithResetClearsThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		b.claim(t, "a")
		task := b.claimIDAt(t, "a", b.at(lease))
		require.Equal(t, 1, task.LeaseLosses)

		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "s1", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`)}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, 1, b.task(t, "a").LeaseLosses, "a step checkpoint without ResetLeaseLosses leaves them")

		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "s2", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`2`)}}
		p.ResetLeaseLosses = true
		require.False(t, p.Batchable(), "a reset is not for the group commit")
		_, err = b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{p})
		require.ErrorIs(t, err, db.ErrNotBatchable)
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		after := b.task(t, "a")
		require.Zero(t, after.LeaseLosses)
		require.Equal(t, task.Version, after.Version, "the reset leaves the lease as it is")
		require.Equal(t, db.TaskStatusProcessing, after.Status)
		require.Len(t, b.steps(t, "a", 1), 2)

		// A stale holder's reset is fenced out like every other write.
		current := b.claimIDAt(t, "a", b.at(2*lease))
		require.Equal(t, 1, current.LeaseLosses)
		p = b.checkpoint(task)
		p.ResetLeaseLosses = true
		_, err = b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Equal(t, 1, b.task(t, "a").LeaseLosses)
	})

	t.Run("SuspendParkAndRestartClearThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"s", "p", "r"} {
			b.create(t, id)
		}
		tasks := b.claimAt(t, b.now, 10)
		require.Len(t, tasks, 3)
		tasks = b.claimAt(t, b.at(lease), 10)
		require.Len(t, tasks, 3)
		byID := map[string]*db.Task{}
		for _, task := range tasks {
			require.Equal(t, 1, task.LeaseLosses)
			byID[task.InstanceID] = task
		}

		p := b.checkpoint(byID["s"])
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(10*lease), db.TaskKindWake
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Zero(t, b.task(t, "s").LeaseLosses, "a suspend is progress")

		p = b.checkpoint(byID["p"])
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomePark, b.now, db.TaskKindResume
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Zero(t, b.task(t, "p").LeaseLosses, "a park is progress")

		_, err = b.store.InstanceRestart(b.ctx, b.change("r"))
		require.NoError(t, err)
		require.Zero(t, b.task(t, "r").LeaseLosses, "a new run starts from zero")
	})

	t.Run("LeaseOfAWokenTaskReportsThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{
			Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting,
			WaitEventType: "go", WakeAt: new(b.at(24 * time.Hour)), Timeout: 24 * time.Hour,
		}}
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(24*time.Hour), db.TaskKindWake
		p.WaitEventTypes = []string{"go"}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		// Claimed as the wait timed out and given back with a loss counted
		// before the run got to record the timeout: its wait still waits.
		woken := b.claimIDAt(t, "a", b.at(24*time.Hour))
		require.NoError(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{
			Task: ref(woken), RunAt: b.at(24 * time.Hour), CountLeaseLoss: true,
		}))
		require.Equal(t, 1, b.task(t, "a").LeaseLosses)

		// The eager resume that leases it reports them, as a claim would.
		res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "a", Type: "go", Payload: json.RawMessage(`1`),
			Now: new(b.now), Lease: &db.CreateLease{Owner: "eager", LockedUntil: b.at(lease)},
		})
		require.NoError(t, err)
		require.NotNil(t, res.LeasedTask)
		require.Equal(t, 1, res.LeasedTask.LeaseLosses)
		require.Equal(t, b.task(t, "a"), res.LeasedTask)
	})

	// ExcludeSuspects leaves out exactly the tasks that are, or that the
	// claim would make, suspects: db.SuspectLeaseLosses losses or more. So
	// the SQL and the constant cannot drift apart.
	t.Run("ClaimCanExcludeSuspects", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 2, db.SuspectLeaseLosses, "the claim queries write it as 2")
		b := setup(t, newStore)
		ids := []string{"expired", "expired-once", "suspect", "once", "clean"}
		for _, id := range ids {
			b.create(t, id)
		}
		byID := func(tasks []*db.Task) map[string]*db.Task {
			m := map[string]*db.Task{}
			for _, task := range tasks {
				m[task.InstanceID] = task
			}
			return m
		}
		release := func(task *db.Task, count bool) {
			t.Helper()
			require.NoError(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(task), RunAt: b.now, CountLeaseLoss: count}))
		}
		first := byID(b.claimAt(t, b.now, 10))
		require.Len(t, first, len(ids))
		release(first["expired-once"], true)
		release(first["suspect"], true)
		second := byID(b.claimAt(t, b.now, 10))
		require.Len(t, second, 2, "expired-once and suspect")
		release(second["suspect"], true)
		release(first["once"], true)
		release(first["clean"], false)

		// Every task is due at lease: "expired" (0 losses, its claim counts
		// the first) and "expired-once" (1, its claim would count the
		// second) hold expired leases; "suspect" (2), "once" (1) and
		// "clean" (0) are pending.
		at := b.at(lease)
		for id, want := range map[string]int{"expired": 0, "expired-once": 1, "suspect": 2, "once": 1, "clean": 0} {
			require.Equal(t, want, b.task(t, id).LeaseLosses, id)
		}
		claim := func(exclude bool) map[string]*db.Task {
			t.Helper()
			claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
				Owner: owner, WorkflowNames: []string{workflowName}, Max: 10, Now: at, LockedUntil: at.Add(lease),
				ExcludeSuspects: exclude,
			})
			tasks := taskList(claims)
			require.NoError(t, err)
			return byID(tasks)
		}
		kept := claim(true)
		require.ElementsMatch(t, []string{"expired", "once", "clean"}, keys(kept), "no suspect, and none the claim makes one")
		require.Equal(t, 1, kept["expired"].LeaseLosses)
		require.Equal(t, 1, kept["once"].LeaseLosses)
		require.Zero(t, kept["clean"].LeaseLosses)
		require.Equal(t, db.TaskStatusPending, b.task(t, "suspect").Status)
		require.Equal(t, db.TaskStatusProcessing, b.task(t, "expired-once").Status)
		require.Equal(t, 1, b.task(t, "expired-once").LeaseLosses, "an excluded expired lease counts no loss")

		suspects := claim(false)
		require.ElementsMatch(t, []string{"expired-once", "suspect"}, keys(suspects))
		for id, task := range suspects {
			require.Equal(t, db.SuspectLeaseLosses, task.LeaseLosses, id)
		}
	})
}

// keys returns the instance ids of tasks by id.
func keys(tasks map[string]*db.Task) []string {
	ids := make([]string, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	return ids
}
