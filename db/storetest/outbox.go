package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// hookHorizon is a claim time after every time the suite records at, so that
// recorded() sees every entry that is not leased.
const hookHorizon = 100 * 365 * 24 * time.Hour

// recorded claims every hook entry recorded since the last call (entries it
// claimed before stay leased) and describes each as "reason instance runAt",
// runAt as an offset from the suite's base time.
func (b *testBundle) recorded(t *testing.T) []string {
	t.Helper()
	entries := b.claimHooks(t, base.Add(hookHorizon), 1000)
	out := make([]string, len(entries))
	for i, e := range entries {
		require.Equal(t, workflowName, e.WorkflowName)
		out[i] = fmt.Sprintf("%s %s %v", e.Reason, e.InstanceID, e.RunAt.Sub(base))
	}
	return out
}

func (b *testBundle) claimHooks(t *testing.T, now time.Time, max int) []*db.OutboxEntry {
	t.Helper()
	entries, err := b.store.OutboxClaim(b.ctx, &db.OutboxClaimParams{Now: now, LockedUntil: now.Add(lease), Max: max})
	require.NoError(t, err)
	return entries
}

// createHooked creates an instance with RecordHooks at now.
func (b *testBundle) createHooked(t *testing.T, id string, now time.Time) {
	t.Helper()
	_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
		WorkflowName: workflowName, ID: id, Now: new(now), RecordHooks: true,
	})
	require.NoError(t, err)
}

// suspend suspends a held task until next, as kind, waiting for the event
// types.
func (b *testBundle) suspend(t *testing.T, task *db.Task, hooks bool, next time.Time, kind db.TaskKind, types ...string) *db.CheckpointResult {
	t.Helper()
	p := b.checkpoint(task)
	p.Outcome = db.OutcomeSuspend
	p.NextRunAt = next
	p.NextKind = kind
	p.WaitEventTypes = types
	p.RecordHooks = hooks
	if len(types) > 0 {
		p.Steps = []db.StepWrite{{
			Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting,
			WaitEventType: types[0], WakeAt: new(next),
		}}
	}
	res, err := b.store.Checkpoint(b.ctx, p)
	require.NoError(t, err)
	return res
}

func testHooks(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("NothingWithoutRecordHooks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		b.suspend(t, task, false, b.at(time.Hour), db.TaskKindWake, "approve")
		require.True(t, b.send(t, "a", "approve", `1`).Woken)
		task = b.claimIDAt(t, "a", b.now)
		b.suspend(t, task, false, b.at(time.Hour), db.TaskKindRetry)

		_, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Instances: []db.InstanceCreateItem{{ID: "b"}}, Now: new(b.now),
		})
		require.NoError(t, err)
		_, err = b.store.InstancePause(b.ctx, b.change("b"))
		require.NoError(t, err)
		_, err = b.store.InstanceResume(b.ctx, b.change("b"))
		require.NoError(t, err)
		_, err = b.store.InstanceRestart(b.ctx, b.change("b"))
		require.NoError(t, err)

		require.Empty(t, b.recorded(t))
	})

	t.Run("Create", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createHooked(t, "a", b.at(time.Second))

		claimAt := b.at(time.Minute)
		entries := b.claimHooks(t, claimAt, 10)
		require.Len(t, entries, 1)
		e := entries[0]
		require.NotZero(t, e.ID)
		require.Equal(t, workflowName, e.WorkflowName)
		require.Equal(t, "a", e.InstanceID)
		require.Equal(t, db.HookReasonCreate, e.Reason)
		requireTime(t, b.at(time.Second), e.RunAt)
		requireTime(t, b.at(time.Second), e.CreatedAt)
		requireTime(t, b.at(time.Second), e.NextAttemptAt, "due when recorded")
		require.Equal(t, 1, e.Attempts)
		require.Empty(t, e.LastError)
		requireTimePtr(t, claimAt.Add(lease), e.LockedUntil)
		require.Equal(t, int64(1), e.Version)
		require.Nil(t, e.DeliveredAt)

		// Without a Now, the entry is due when the task is, by the database clock.
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: "b", RecordHooks: true})
		require.NoError(t, err)
		entries = b.claimHooks(t, base.Add(hookHorizon), 10)
		require.Equal(t, []string{"b", "a"}, hookIDs(entries), "the database clock is before the suite's")
		requireTime(t, b.task(t, "b").RunAt, entries[0].RunAt)
		requireTime(t, entries[0].RunAt, entries[0].CreatedAt)
	})

	t.Run("CreateManyRecordsCreatedInstancesOnly", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "b")
		createdRes, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName,
			Instances:    []db.InstanceCreateItem{{ID: "c"}, {ID: "b"}, {ID: "a"}, {ID: "c"}, {ID: "d"}},
			Now:          new(b.at(time.Second)),
			RecordHooks:  true,
		})
		require.NoError(t, err)
		created := instances(createdRes)
		require.Equal(t, []string{"c", "a", "d"}, ids(created))
		require.Equal(t, []string{"create c 1s", "create a 1s", "create d 1s"}, b.recorded(t), "in input order")

		createdRes, err = b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Instances: []db.InstanceCreateItem{{ID: "a"}, {ID: "b"}}, Now: new(b.now), RecordHooks: true,
		})
		require.NoError(t, err)
		created = instances(createdRes)
		require.Empty(t, created)
		require.Empty(t, b.recorded(t))
	})

	t.Run("ResumeRecordsOnlyWhenItResumes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		hooked := func(d time.Duration) *db.InstanceChangeParams {
			return &db.InstanceChangeParams{WorkflowName: workflowName, ID: "a", Now: new(b.at(d)), RecordHooks: true}
		}

		_, err := b.store.InstancePause(b.ctx, hooked(0))
		require.NoError(t, err)
		require.Empty(t, b.recorded(t), "pausing enqueues nothing")
		_, err = b.store.InstanceResume(b.ctx, hooked(time.Minute))
		require.NoError(t, err)
		require.Equal(t, []string{"resume a 1m0s"}, b.recorded(t))

		_, err = b.store.InstanceResume(b.ctx, hooked(2*time.Minute))
		require.NoError(t, err)
		require.Empty(t, b.recorded(t), "resuming a queued instance does nothing")

		_, err = b.store.InstanceTerminate(b.ctx, hooked(3*time.Minute))
		require.NoError(t, err)
		_, err = b.store.InstanceResume(b.ctx, hooked(4*time.Minute))
		require.NoError(t, err)
		require.Empty(t, b.recorded(t), "terminating and resuming a terminal instance enqueue nothing")
	})

	t.Run("RestartRecordsCreate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		p := b.checkpoint(task)
		p.Outcome = db.OutcomeComplete
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		_, err = b.store.InstanceRestart(b.ctx, &db.InstanceChangeParams{
			WorkflowName: workflowName, ID: "a", Now: new(b.at(time.Hour)), RecordHooks: true,
		})
		require.NoError(t, err)
		require.Equal(t, []string{"create a 1h0m0s"}, b.recorded(t))
	})

	t.Run("EventRecordsWhenItWakes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		b.create(t, "paused")
		for _, task := range b.claimAt(t, b.now, 10) {
			b.suspend(t, task, false, b.at(24*time.Hour), db.TaskKindWake, "approve")
		}
		b.create(t, "queued")
		_, err := b.store.InstancePause(b.ctx, b.change("paused"))
		require.NoError(t, err)

		send := func(id, typ string, d time.Duration) *db.EventSendResult {
			res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
				WorkflowName: workflowName, InstanceID: id, Type: typ, Now: new(b.at(d)), RecordHooks: true,
			})
			require.NoError(t, err)
			return res
		}
		require.False(t, send("a", "reject", time.Second).Woken)
		require.False(t, send("queued", "approve", time.Second).Woken)
		require.False(t, send("paused", "approve", time.Second).Woken)
		require.Empty(t, b.recorded(t), "only an event that wakes the instance enqueues it")

		require.True(t, send("a", "approve", time.Minute).Woken)
		require.Equal(t, []string{"event a 1m0s"}, b.recorded(t))
	})

	t.Run("SuspendRecordsWakeOrRetry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")

		task := b.claim(t, "a")
		b.suspend(t, task, true, b.at(time.Hour), db.TaskKindWake)
		require.Equal(t, []string{"wake a 1h0m0s"}, b.recorded(t), "due when the task is")

		task = b.claimIDAt(t, "a", b.at(time.Hour))
		b.suspend(t, task, true, b.at(time.Hour+10*time.Second), db.TaskKindRetry)
		require.Equal(t, []string{"retry a 1h0m10s"}, b.recorded(t))

		// A buffered event makes the task due at once, and so the entry.
		task = b.claimIDAt(t, "a", b.at(time.Hour+10*time.Second))
		b.send(t, "a", "approve", `1`)
		res := b.suspend(t, task, true, b.at(24*time.Hour), "", "approve")
		require.True(t, res.Due)
		require.Equal(t, []string{"wake a 0s"}, b.recorded(t), "no kind is a wake")

		// Suspending with a pause requested still schedules the task, so it is
		// recorded too; resuming records its own entry.
		task = b.claimIDAt(t, "a", b.now)
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		res = b.suspend(t, task, true, b.at(2*time.Hour), db.TaskKindWake)
		require.Equal(t, dftype.StatusPaused, res.Status)
		require.Equal(t, []string{"wake a 2h0m0s"}, b.recorded(t))
	})

	t.Run("OtherOutcomesRecordNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		for _, outcome := range []db.CheckpointOutcome{db.OutcomeContinue, db.OutcomePark} {
			p := b.checkpoint(task)
			p.Outcome = outcome
			p.NextRunAt = b.at(time.Hour)
			p.NextKind = db.TaskKindResume
			p.RecordHooks = true
			_, err := b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
		}
		_, err := b.store.InstanceResume(b.ctx, b.change("a"))
		require.NoError(t, err)
		for _, outcome := range []db.CheckpointOutcome{db.OutcomeComplete, db.OutcomeError} {
			_, err = b.store.InstanceRestart(b.ctx, b.change("a"))
			require.NoError(t, err)
			task = b.claim(t, "a")
			p := b.checkpoint(task)
			p.Outcome = outcome
			p.RecordHooks = true
			_, err = b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
		}
		require.Empty(t, b.recorded(t))
	})

	t.Run("RolledBackChangesRecordNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")

		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: "a", Now: new(b.now), RecordHooks: true})
		require.ErrorIs(t, err, db.ErrAlreadyExists)

		stale := b.claim(t, "a")
		_, err = b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		for _, kind := range []db.TaskKind{db.TaskKindWake, db.TaskKindRetry} {
			p := b.checkpoint(stale)
			p.Outcome = db.OutcomeSuspend
			p.NextRunAt = b.now
			p.NextKind = kind
			p.RecordHooks = true
			_, err = b.store.Checkpoint(b.ctx, p)
			require.ErrorIs(t, err, db.ErrLeaseLost)
		}

		_, err = b.store.InstanceTerminate(b.ctx, b.change("a"))
		require.NoError(t, err)
		_, err = b.store.EventSend(b.ctx, &db.EventSendParams{WorkflowName: workflowName, InstanceID: "a", Type: "x", Now: new(b.now), RecordHooks: true})
		require.ErrorIs(t, err, db.ErrTerminal)

		missing := &db.InstanceChangeParams{WorkflowName: workflowName, ID: "missing", Now: new(b.now), RecordHooks: true}
		_, err = b.store.InstanceResume(b.ctx, missing)
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = b.store.InstanceRestart(b.ctx, missing)
		require.ErrorIs(t, err, db.ErrNotFound)

		require.Empty(t, b.recorded(t))
	})
}

func testOutbox(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("ClaimLeasesDueEntriesOldestFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createHooked(t, "b", b.at(time.Second))
		b.createHooked(t, "a", b.now)
		b.createHooked(t, "c", b.at(2*time.Second))

		require.Empty(t, b.claimHooks(t, b.at(time.Hour), 0))
		require.Empty(t, b.claimHooks(t, b.at(-time.Microsecond), 10), "nothing is due yet")

		first := b.claimHooks(t, b.now, 1)
		require.Equal(t, []string{"a"}, hookIDs(first))
		second := b.claimHooks(t, b.at(time.Second), 10)
		require.Equal(t, []string{"b"}, hookIDs(second), "a leased entry is not claimed again")
		third := b.claimHooks(t, b.at(2*time.Second), 10)
		require.Equal(t, []string{"c"}, hookIDs(third))
		require.Empty(t, b.claimHooks(t, b.at(lease-time.Microsecond), 10), "leases not expired")

		// Expired leases are claimed again, longest due first.
		again := b.claimHooks(t, b.at(lease+2*time.Second), 10)
		require.Equal(t, []string{"a", "b", "c"}, hookIDs(again))
		for i, prev := range []*db.OutboxEntry{first[0], second[0], third[0]} {
			e := again[i]
			require.Equal(t, prev.ID, e.ID)
			require.Equal(t, prev.Version+1, e.Version)
			require.Equal(t, 2, e.Attempts)
			requireTimePtr(t, b.at(2*lease+2*time.Second), e.LockedUntil)
			requireTime(t, prev.NextAttemptAt, e.NextAttemptAt)
		}
	})

	t.Run("DeliveredIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createHooked(t, "a", b.now)
		stale := b.claimHooks(t, b.now, 10)[0]
		current := b.claimHooks(t, b.at(lease), 10)[0]
		require.Equal(t, stale.ID, current.ID)
		require.Greater(t, current.Version, stale.Version)

		err := b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{ID: stale.ID, Version: stale.Version, Now: b.at(lease)})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		err = b.store.OutboxRetry(b.ctx, &db.OutboxRetryParams{ID: stale.ID, Version: stale.Version, NextAttemptAt: b.at(lease), LastError: "x"})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Empty(t, b.claimHooks(t, b.at(2*lease-time.Microsecond), 10), "still leased by the current holder")

		// Nothing was delivered either: it is claimed again when the lease ends.
		current = b.claimHooks(t, b.at(2*lease), 10)[0]
		require.Equal(t, 3, current.Attempts)
		require.Empty(t, current.LastError)

		require.NoError(t, b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{ID: current.ID, Version: current.Version, Now: b.at(2 * lease)}))
		require.Empty(t, b.claimHooks(t, base.Add(hookHorizon), 10), "delivered entries are never claimed")

		// Delivered means no longer held: the same version cannot act again.
		err = b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{ID: current.ID, Version: current.Version, Now: b.at(3 * lease)})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		err = b.store.OutboxRetry(b.ctx, &db.OutboxRetryParams{ID: current.ID, Version: current.Version, NextAttemptAt: b.now})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Empty(t, b.claimHooks(t, base.Add(hookHorizon), 10))

		err = b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{ID: current.ID + 1000, Version: 1, Now: b.now})
		require.ErrorIs(t, err, db.ErrLeaseLost, "an unknown entry is not held either")

		n, err := b.store.OutboxPrune(b.ctx, &db.OutboxPruneParams{DeliveredBefore: b.at(2*lease + time.Microsecond), Max: 10})
		require.NoError(t, err)
		require.Equal(t, 1, n, "delivered at the current holder's Now")
	})

	t.Run("RetryReleasesUntilNextAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createHooked(t, "a", b.now)
		first := b.claimHooks(t, b.now, 10)[0]

		require.NoError(t, b.store.OutboxRetry(b.ctx, &db.OutboxRetryParams{
			ID: first.ID, Version: first.Version, NextAttemptAt: b.at(time.Minute), LastError: "hook answered 503",
		}))
		err := b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{ID: first.ID, Version: first.Version, Now: b.now})
		require.ErrorIs(t, err, db.ErrLeaseLost, "released means no longer held")

		require.Empty(t, b.claimHooks(t, b.at(time.Minute-time.Microsecond), 10))
		again := b.claimHooks(t, b.at(time.Minute), 10)
		require.Len(t, again, 1)
		e := again[0]
		require.Equal(t, first.ID, e.ID)
		require.Equal(t, first.Version+1, e.Version)
		require.Equal(t, 2, e.Attempts)
		require.Equal(t, "hook answered 503", e.LastError)
		requireTime(t, b.at(time.Minute), e.NextAttemptAt)
		requireTimePtr(t, b.at(time.Minute+lease), e.LockedUntil)
		requireTime(t, b.now, e.RunAt, "the reported change keeps its time")
		requireTime(t, b.now, e.CreatedAt)

		// A retry that goes back in time is due at once.
		require.NoError(t, b.store.OutboxRetry(b.ctx, &db.OutboxRetryParams{ID: e.ID, Version: e.Version, NextAttemptAt: b.now}))
		require.Len(t, b.claimHooks(t, b.at(time.Minute), 10), 1)
	})

	t.Run("RetriedEntriesWaitBehindDueOnes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createHooked(t, "a", b.now)
		b.createHooked(t, "b", b.at(time.Second))
		a := b.claimHooks(t, b.now, 10)[0]
		require.NoError(t, b.store.OutboxRetry(b.ctx, &db.OutboxRetryParams{ID: a.ID, Version: a.Version, NextAttemptAt: b.at(2 * time.Second)}))
		require.Equal(t, []string{"b", "a"}, hookIDs(b.claimHooks(t, b.at(time.Minute), 10)))
	})

	t.Run("Prune", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"a", "b", "c", "d"} {
			b.createHooked(t, id, b.now)
		}
		entries := b.claimHooks(t, b.now, 10)
		require.Equal(t, []string{"a", "b", "c", "d"}, hookIDs(entries))
		for i, e := range entries[:3] {
			require.NoError(t, b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{
				ID: e.ID, Version: e.Version, Now: b.at(time.Duration(i+1) * time.Minute),
			}))
		}
		d := entries[3]

		prune := func(before time.Duration, max int) int {
			n, err := b.store.OutboxPrune(b.ctx, &db.OutboxPruneParams{DeliveredBefore: b.at(before), Max: max})
			require.NoError(t, err)
			return n
		}
		require.Zero(t, prune(time.Hour, 0), "max 0 deletes nothing")
		require.Zero(t, prune(time.Minute, 10), "delivered at the bound is kept")
		require.Equal(t, 1, prune(2*time.Minute, 10))
		require.Equal(t, 1, prune(time.Hour, 1), "max bounds one call")
		require.Equal(t, 1, prune(time.Hour, 10))
		require.Zero(t, prune(time.Hour, 10))
		require.Zero(t, prune(hookHorizon, 10), "undelivered entries are never pruned")

		require.NoError(t, b.store.OutboxRetry(b.ctx, &db.OutboxRetryParams{ID: d.ID, Version: d.Version, NextAttemptAt: b.now}))
		require.Equal(t, []string{"d"}, hookIDs(b.claimHooks(t, b.now, 10)))
	})

	t.Run("ConcurrentClaimsNeverShareAnEntry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		const entries, claimers = 40, 4
		items := make([]db.InstanceCreateItem, entries)
		for i := range items {
			items[i].ID = fmt.Sprintf("i%02d", i)
		}
		_, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Instances: items, Now: new(b.now), RecordHooks: true,
		})
		require.NoError(t, err)

		var (
			mu      sync.Mutex
			claimed = map[int64]int{}
			wg      sync.WaitGroup
			errs    = make(chan error, claimers)
		)
		for range claimers {
			wg.Go(func() {
				for {
					list, err := b.store.OutboxClaim(b.ctx, &db.OutboxClaimParams{Now: b.now, LockedUntil: b.at(lease), Max: 3})
					if err != nil {
						errs <- err
						return
					}
					if len(list) == 0 {
						return
					}
					mu.Lock()
					for _, e := range list {
						claimed[e.ID]++
					}
					mu.Unlock()
					for _, e := range list {
						if err := b.store.OutboxDelivered(b.ctx, &db.OutboxDeliveredParams{ID: e.ID, Version: e.Version, Now: b.now}); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, claimed, entries)
		for id, n := range claimed {
			require.Equal(t, 1, n, "entry %d", id)
		}
	})
}

func hookIDs(list []*db.OutboxEntry) []string {
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.InstanceID
	}
	return out
}
