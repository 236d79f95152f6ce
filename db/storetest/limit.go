package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// createKeyed creates id under a concurrency key of max 1 and reports
// whether it was admitted (it has a task) or waits for the key's slot.
func (b *testBundle) createKeyed(t *testing.T, id, key string, at time.Time) bool {
	t.Helper()
	res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
		WorkflowName: workflowName, ID: id, Now: new(at),
		Limits: []db.LimitSpec{{Scope: db.KeyScope(workflowName, key), Define: true, MaxRunning: 1}},
	})
	require.NoError(t, err)
	require.True(t, res.Instance.Limited)
	_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	if err != nil {
		require.ErrorIs(t, err, db.ErrNotFound)
		return false
	}
	return true
}

// requireWaits checks that id waits for the slot of key: queued, without a
// task, and saying so.
func (b *testBundle) requireWaits(t *testing.T, id, key string) {
	t.Helper()
	inst := b.get(t, id)
	require.Equal(t, dftype.StatusQueued, inst.Status, "%s waits", id)
	require.NotNil(t, inst.WaitingFor, "%s says what it waits for", id)
	require.Equal(t, db.KeyScope(workflowName, key), inst.WaitingFor.Scope)
	_, err := b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	require.ErrorIs(t, err, db.ErrNotFound, "%s has no task while it waits", id)
}

// end is the checkpoint that completes the run of a claimed limited
// instance and gives its slots back.
func (b *testBundle) end(task *db.Task, at time.Time) *db.CheckpointParams {
	p := b.checkpoint(task)
	p.Now = at
	p.Outcome = db.OutcomeComplete
	p.Output = []byte(`"done"`)
	p.ReleaseLimits = true
	return p
}

// testLimitRelease covers the release of a limited instance's slots in
// the group commit: the checkpoints that end limited instances are
// Batchable, and the batch gives back the slots of those whose fence held,
// in its transaction, admitting the waiters of the freed scopes.
func testLimitRelease(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("BatchMixesLimitedAndUnlimitedEndings", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		batcher := b.batcher(t)
		require.True(t, b.createKeyed(t, "a", "k1", b.now))
		require.True(t, b.createKeyed(t, "b", "k2", b.now))
		b.createAt(t, workflowName, "u", b.now)
		b.createAt(t, workflowName, "c", b.now)
		require.False(t, b.createKeyed(t, "wa", "k1", b.at(time.Second)))
		require.False(t, b.createKeyed(t, "wb", "k2", b.at(time.Second)))
		require.False(t, b.createKeyed(t, "wb2", "k2", b.at(2*time.Second)))
		b.requireWaits(t, "wa", "k1")
		b.requireWaits(t, "wb", "k2")

		at := b.at(3 * time.Second)
		claimed := map[string]*db.Task{}
		for _, task := range b.claimAt(t, at, 10) {
			claimed[task.InstanceID] = task
		}
		require.Len(t, claimed, 4, "a, b, u and c are due; the waiters have no task")

		lease := &db.CreateLease{Owner: eagerOwner, LockedUntil: at.Add(lease)}
		endA := b.end(claimed["a"], at)
		endA.ReleaseLease = lease
		endB := b.end(claimed["b"], at)
		endB.Outcome, endB.Output, endB.ErrorName, endB.ErrorMessage = db.OutcomeError, nil, "Boom", "it failed"
		endU := b.end(claimed["u"], at)
		endU.ReleaseLimits = false
		cont := b.checkpoint(claimed["c"])
		cont.Now = at
		cont.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: []byte(`1`)}}
		ps := []*db.CheckpointParams{cont, endA, endU, endB}
		for _, p := range ps {
			require.True(t, p.Batchable(), "an ending limited checkpoint goes in the group commit")
		}
		res, err := batcher.CheckpointBatch(b.ctx, ps)
		require.NoError(t, err)
		require.Len(t, res, 4)
		for i := range res {
			require.NoError(t, res[i].Err, "item %d", i)
		}
		require.Equal(t, dftype.StatusRunning, res[0].Result.Status)
		require.Equal(t, dftype.StatusComplete, res[1].Result.Status)
		require.Equal(t, dftype.StatusComplete, res[2].Result.Status)
		require.Equal(t, dftype.StatusErrored, res[3].Result.Status)
		require.Equal(t, dftype.StatusComplete, b.get(t, "a").Status)
		require.Equal(t, dftype.StatusComplete, b.get(t, "u").Status)
		require.Equal(t, dftype.StatusErrored, b.get(t, "b").Status)
		require.Len(t, b.steps(t, "c", 1), 1, "the continuing item's step is written")

		// a's end started wa at once with a's lease, in a's result.
		require.NotNil(t, res[1].Result.Leased, "the waiter of a's key starts on the releasing runner")
		if ls, ok := b.store.(db.LifecycleStore); ok {
			started, err := ls.LifecycleList(b.ctx, &db.LifecycleListParams{
				WorkflowName: workflowName, InstanceID: "wa", Types: []db.LifecycleEventType{db.LifecycleStarted},
			})
			require.NoError(t, err)
			require.Len(t, started, 1, "the release that started wa's run logs its start, in its transaction")
			require.True(t, started[0].At.Equal(at))
		}
		require.Equal(t, "wa", res[1].Result.Leased.Instance.ID)
		require.Equal(t, dftype.StatusRunning, res[1].Result.Leased.Instance.Status)
		require.Equal(t, db.TaskStatusProcessing, res[1].Result.Leased.LeasedTask.Status)
		require.Equal(t, eagerOwner, res[1].Result.Leased.LeasedTask.LockOwner)
		require.Equal(t, dftype.StatusRunning, b.get(t, "wa").Status)
		require.Nil(t, b.get(t, "wa").WaitingFor)
		// b had no lease: the oldest waiter of its key is due for a claim,
		// the next one still waits.
		require.Nil(t, res[3].Result.Leased)
		require.Nil(t, res[0].Result.Leased)
		require.Nil(t, res[2].Result.Leased)
		var admitted []string
		for i := range res {
			admitted = append(admitted, res[i].Result.Admitted...)
		}
		require.Equal(t, []string{workflowName}, admitted, "the batch names the workflow of the waiter made due, once")
		wb := b.task(t, "wb")
		require.Equal(t, db.TaskStatusPending, wb.Status)
		require.False(t, wb.RunAt.After(at), "wb is due now")
		require.Nil(t, b.get(t, "wb").WaitingFor)
		b.requireWaits(t, "wb2", "k2")

		// Each key holds one slot again: a create of either waits.
		require.False(t, b.createKeyed(t, "x1", "k1", at))
		require.False(t, b.createKeyed(t, "x2", "k2", at))
	})

	t.Run("WaitersOfFreedScopesGoByPriorityFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		batcher := b.batcher(t)
		// a holds the slots of two keys; each key has one waiter: old (the
		// older, of priority 0) waits for k1, high (priority 5) for k2.
		spec := func(key string) db.LimitSpec {
			return db.LimitSpec{Scope: db.KeyScope(workflowName, key), Define: true, MaxRunning: 1}
		}
		for _, c := range []db.InstanceCreateParams{
			{ID: "a", Now: new(b.now), Limits: []db.LimitSpec{spec("k1"), spec("k2")}},
			{ID: "old", Now: new(b.at(time.Second)), Limits: []db.LimitSpec{spec("k1")}},
			{ID: "high", Priority: 5, Now: new(b.at(2 * time.Second)), Limits: []db.LimitSpec{spec("k2")}},
		} {
			c.WorkflowName = workflowName
			_, err := b.store.InstanceCreate(b.ctx, &c)
			require.NoError(t, err)
		}
		b.requireWaits(t, "old", "k1")
		b.requireWaits(t, "high", "k2")

		// a's end frees both keys and admits both waiters; its lease
		// starts the first of them, which is high: the waiters of the
		// freed scopes go highest priority first, then oldest first.
		at := b.at(3 * time.Second)
		end := b.end(b.claimIDAt(t, "a", at), at)
		end.ReleaseLease = &db.CreateLease{Owner: eagerOwner, LockedUntil: at.Add(lease)}
		res, err := batcher.CheckpointBatch(b.ctx, []*db.CheckpointParams{end})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.NotNil(t, res[0].Result.Leased)
		require.Equal(t, "high", res[0].Result.Leased.Instance.ID, "the lease starts the waiter of the highest priority")
		require.Equal(t, db.TaskStatusPending, b.task(t, "old").Status, "old is admitted, due for a claim")
	})

	t.Run("EndingsOfOneScopeFreeASlotEach", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		batcher := b.batcher(t)
		// A key of two slots: a and b hold them, w1 to w3 wait.
		create := func(id string, at time.Time) {
			t.Helper()
			_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
				WorkflowName: workflowName, ID: id, Now: new(at),
				Limits: []db.LimitSpec{{Scope: db.KeyScope(workflowName, "k"), Define: true, MaxRunning: 2}},
			})
			require.NoError(t, err)
		}
		create("a", b.now)
		create("b", b.now)
		for i, id := range []string{"w1", "w2", "w3"} {
			create(id, b.at(time.Duration(i+1)*time.Second))
			b.requireWaits(t, id, "k")
		}
		at := b.at(4 * time.Second)
		tasks := b.claimAt(t, at, 10)
		require.ElementsMatch(t, []string{"a", "b"}, taskIDs(tasks))

		// Both end in one batch: each gives its slot back, so the two
		// oldest waiters are admitted, and the third still waits.
		res, err := batcher.CheckpointBatch(b.ctx, []*db.CheckpointParams{b.end(tasks[0], at), b.end(tasks[1], at)})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		require.NoError(t, res[1].Err)
		require.Equal(t, db.TaskStatusPending, b.task(t, "w1").Status)
		require.Equal(t, db.TaskStatusPending, b.task(t, "w2").Status)
		b.requireWaits(t, "w3", "k")
	})

	t.Run("FencedOutEndingReleasesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		batcher := b.batcher(t)
		require.True(t, b.createKeyed(t, "a", "k1", b.now))
		require.True(t, b.createKeyed(t, "b", "k2", b.now))
		require.False(t, b.createKeyed(t, "wa", "k1", b.at(time.Second)))
		require.False(t, b.createKeyed(t, "wb", "k2", b.at(time.Second)))
		stale := b.claimAt(t, b.at(2*time.Second), 10)
		require.Len(t, stale, 2)
		byID := map[string]*db.Task{}
		for _, task := range stale {
			byID[task.InstanceID] = task
		}
		// a's lease expires and another claim takes it over: the first
		// holder's end is fenced out.
		later := b.at(2*time.Second + lease + time.Second)
		retaken := b.claimAt(t, later, 10)
		require.Len(t, retaken, 2, "both expired leases are taken over")
		var bNow *db.Task
		for _, task := range retaken {
			if task.InstanceID == "b" {
				bNow = task
			}
		}
		require.NotNil(t, bNow)

		endStale := b.end(byID["a"], later)
		endStale.ReleaseLease = &db.CreateLease{Owner: eagerOwner, LockedUntil: later.Add(lease)}
		endB := b.end(bNow, later)
		res, err := batcher.CheckpointBatch(b.ctx, []*db.CheckpointParams{endStale, endB})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, db.ErrLeaseLost)
		require.Nil(t, res[0].Result)
		require.NoError(t, res[1].Err)

		require.Equal(t, dftype.StatusRunning, b.get(t, "a").Status, "the fenced-out end changed nothing")
		b.requireWaits(t, "wa", "k1")
		require.Equal(t, db.TaskStatusPending, b.task(t, "wb").Status, "the end that held released its slot")
		require.False(t, b.createKeyed(t, "x1", "k1", later), "a still holds its key's slot")
	})

	t.Run("OnlyFencedOutEndingsCommitNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		batcher := b.batcher(t)
		require.True(t, b.createKeyed(t, "a", "k1", b.now))
		require.False(t, b.createKeyed(t, "wa", "k1", b.at(time.Second)))
		task := b.claimIDAt(t, "a", b.at(2*time.Second))
		_, err := b.store.InstanceTerminate(b.ctx, b.change("a"))
		require.NoError(t, err)
		// The terminate gave a's slot back and admitted wa.
		require.Equal(t, db.TaskStatusPending, b.task(t, "wa").Status)

		res, err := batcher.CheckpointBatch(b.ctx, []*db.CheckpointParams{b.end(task, b.at(3*time.Second))})
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, db.ErrLeaseLost)
		require.Equal(t, dftype.StatusTerminated, b.get(t, "a").Status)
		require.False(t, b.createKeyed(t, "x", "k1", b.at(3*time.Second)), "wa holds the slot: nothing was released twice")
	})
}
