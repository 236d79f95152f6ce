package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testEvent(t *testing.T, newStore func(t *testing.T) db.Store) {
	// waitFor claims the instance and suspends it on a waitForEvent of typ
	// that times out in a day.
	waitFor := func(t *testing.T, b *testBundle, id, typ string) {
		task := b.claim(t, id)
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{
			Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting,
			WaitEventType: typ, WakeAt: new(b.at(24 * time.Hour)), Timeout: 24 * time.Hour,
		}}
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(24 * time.Hour)
		p.NextKind = db.TaskKindWake
		p.WaitEventTypes = []string{typ}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.False(t, res.Due)
	}

	t.Run("SendBuffersForCurrentRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")

		payload := "{\"b\": 1, \"a\": [ ]}"
		res := b.send(t, "a", "approve", payload)
		require.False(t, res.Woken, "a queued instance waits for nothing")
		ev := res.Event
		require.NotZero(t, ev.ID)
		require.Equal(t, workflowName, ev.WorkflowName)
		require.Equal(t, "a", ev.InstanceID)
		require.Equal(t, 1, ev.RunNumber)
		require.Equal(t, "approve", ev.Type)
		requireJSON(t, payload, ev.Payload)
		requireTime(t, b.now, ev.CreatedAt)
		require.Nil(t, ev.DeliveredAt)
		require.Empty(t, ev.ConsumedByStepKey)
		require.Equal(t, []*db.Event{ev}, b.events(t, "a", 1))

		second := b.send(t, "a", "approve", `2`).Event
		require.Greater(t, second.ID, ev.ID)
		require.Equal(t, []*db.Event{ev, second}, b.events(t, "a", 0))
		require.Empty(t, b.events(t, "a", 2))

		task := b.task(t, "a")
		require.Equal(t, db.TaskKindRun, task.Kind, "the first run is not turned into a resume")
	})

	t.Run("SendRejectsUnknownAndTerminal", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.EventSend(b.ctx, &db.EventSendParams{WorkflowName: workflowName, InstanceID: "missing", Type: "x", Now: new(b.now)})
		require.ErrorIs(t, err, db.ErrNotFound)

		b.create(t, "a")
		_, err = b.store.InstanceTerminate(b.ctx, b.change("a"))
		require.NoError(t, err)
		before := b.get(t, "a")
		_, err = b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "a", Type: "x", Payload: json.RawMessage(`1`), Now: new(b.at(time.Minute)),
		})
		require.ErrorIs(t, err, db.ErrTerminal)
		require.Empty(t, b.events(t, "a", 0), "nothing stored")
		require.Equal(t, before, b.get(t, "a"), "nothing changed")
	})

	t.Run("SendWakesWaitingInstanceOfThatType", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		waitFor(t, b, "a", "approve")
		before := b.task(t, "a")
		timeoutAt := b.at(24 * time.Hour)

		b.now = b.at(time.Minute)
		res := b.send(t, "a", "reject", `{}`)
		require.False(t, res.Woken)
		require.Equal(t, before, b.task(t, "a"), "another type does not wake")
		require.Equal(t, dftype.StatusWaiting, b.get(t, "a").Status)

		b.now = b.at(time.Minute)
		res = b.send(t, "a", "approve", `{"ok":true}`)
		require.True(t, res.Woken)
		task := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.Equal(t, db.TaskKindResume, task.Kind)
		requireTime(t, b.now, task.RunAt)
		require.Equal(t, before.Version, task.Version)
		requireTimePtr(t, b.now, b.nextRunAt(t))

		// The send delivered the event to the wait it woke, as the run would
		// consume it: the run finds the step complete.
		require.Equal(t, "wait", res.DeliveredTo)
		requireTimePtr(t, b.now, res.Event.DeliveredAt)
		require.Equal(t, "wait", res.Event.ConsumedByStepKey)
		require.Equal(t, res.Event, b.events(t, "a", 1)[1])
		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 1)
		require.Equal(t, db.StepStatusComplete, steps[0].Status)
		requireTimePtr(t, b.now, steps[0].CompletedAt)
		require.Equal(t, 24*time.Hour, steps[0].Timeout, "the wait keeps its timeout")
		requireTimePtr(t, timeoutAt, steps[0].WakeAt)
		requireJSON(t, `{"type":"approve","payload":{"ok":true},"timestamp":"2041-03-04T10:02:00Z"}`, steps[0].Result)

		claimed := b.claimIDAt(t, "a", b.now)
		require.Equal(t, db.TaskKindResume, claimed.Kind)
		state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a"})
		require.NoError(t, err)
		require.Equal(t, steps[0], state.Steps["wait"], "the resumed run replays the delivered step")
		p := b.checkpoint(claimed)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait"}
		cp, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Nil(t, cp.Event, "delivered once: nothing is left to consume")
	})

	t.Run("SendWithLeaseLeasesTheWokenTask", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"a", "paused"} {
			b.create(t, id)
			waitFor(t, b, id, "approve")
		}
		_, err := b.store.InstancePause(b.ctx, b.change("paused"))
		require.NoError(t, err)
		before := b.task(t, "a")
		lease := &db.CreateLease{Owner: "eager", LockedUntil: b.at(lease)}
		send := func(id, typ string) *db.EventSendResult {
			t.Helper()
			res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
				WorkflowName: workflowName, InstanceID: id, Type: typ, Payload: json.RawMessage(`1`),
				Now: new(b.now), Lease: lease,
			})
			require.NoError(t, err)
			return res
		}

		res := send("a", "reject")
		require.False(t, res.Woken)
		require.Nil(t, res.LeasedTask, "an event the run does not wait for leases nothing")
		require.Equal(t, before, b.task(t, "a"))
		res = send("paused", "approve")
		require.False(t, res.Woken)
		require.Nil(t, res.LeasedTask, "a paused instance is not resumed")

		res = send("a", "approve")
		require.True(t, res.Woken)
		task := res.LeasedTask
		require.NotNil(t, task)
		require.Equal(t, before.ID, task.ID)
		require.Equal(t, db.TaskStatusProcessing, task.Status)
		require.Equal(t, "eager", task.LockOwner)
		requireTimePtr(t, b.at(lease.LockedUntil.Sub(b.now)), task.LockedUntil)
		require.Equal(t, before.Version+1, task.Version, "leased as a claim would")
		require.Equal(t, before.Attempts+1, task.Attempts)
		require.Equal(t, db.TaskKindResume, task.Kind)
		require.Equal(t, task, b.task(t, "a"))
		require.Equal(t, dftype.StatusRunning, b.get(t, "a").Status)
		require.Empty(t, b.claimAt(t, b.at(time.Second), 10), "no other runner can claim it")

		// The lease holder finds the event delivered to its wait.
		require.Equal(t, "wait", res.DeliveredTo)
		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 1)
		require.Equal(t, db.StepStatusComplete, steps[0].Status)
		requireJSON(t, `{"type":"approve","payload":1,"timestamp":"2041-03-04T10:00:00Z"}`, steps[0].Result)
		p := b.checkpoint(task)
		p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`1`)
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err, "the lease holds")
	})

	t.Run("SendDeliversTheOldestEventFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		waitFor(t, b, "a", "approve")
		// Sent while paused: buffered, not delivered, nothing woken.
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		b.now = b.at(time.Second)
		first := b.send(t, "a", "approve", `1`)
		require.False(t, first.Woken)
		require.Empty(t, first.DeliveredTo)
		require.Equal(t, db.StepStatusWaiting, b.steps(t, "a", 1)[0].Status)
		_, err = b.store.InstanceResume(b.ctx, b.change("a"))
		require.NoError(t, err)

		// The next send wakes the run; the first event is the one it gets,
		// whether the send delivers it or the run consumes it.
		b.now = b.at(time.Second)
		second := b.send(t, "a", "approve", `2`)
		require.True(t, second.Woken)
		task := b.claimIDAt(t, "a", b.now)
		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 1)
		if second.DeliveredTo == "" {
			require.Equal(t, db.StepStatusWaiting, steps[0].Status)
			p := b.checkpoint(task)
			p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait"}
			cp, err := b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
			require.Equal(t, first.Event.ID, cp.Event.ID)
			steps = b.steps(t, "a", 1)
		} else {
			require.Equal(t, "wait", second.DeliveredTo)
			require.Nil(t, second.Event.DeliveredAt, "the second event stays buffered")
		}
		require.Equal(t, db.StepStatusComplete, steps[0].Status)
		requireJSON(t, `{"type":"approve","payload":1,"timestamp":"2041-03-04T10:00:01Z"}`, steps[0].Result)
		events := b.events(t, "a", 1)
		require.Len(t, events, 2)
		require.Equal(t, "wait", events[0].ConsumedByStepKey)
		require.Nil(t, events[1].DeliveredAt)
		require.Empty(t, events[1].ConsumedByStepKey)
	})

	t.Run("SendOnTheDatabaseClockStillWakes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		waitFor(t, b, "a", "approve")
		res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "a", Type: "approve", Payload: json.RawMessage(`1`),
		})
		require.NoError(t, err)
		require.True(t, res.Woken)
		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 1)
		if res.DeliveredTo == "" {
			require.Equal(t, db.StepStatusWaiting, steps[0].Status, "left for the run to consume")
			require.Nil(t, b.events(t, "a", 1)[0].DeliveredAt)
		} else {
			require.Equal(t, db.StepStatusComplete, steps[0].Status)
			require.Equal(t, "wait", b.events(t, "a", 1)[0].ConsumedByStepKey)
		}
	})

	// The event-delivery rule (transition.DeliverAtSend): a send delivers
	// only the event it sent, only on the caller's clock and only when it is
	// the run's one undelivered event of its type; otherwise the resumed run
	// consumes the oldest itself.
	t.Run("SendDeliversOnlyTheOnlyUndeliveredEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		waitFor(t, b, "a", "approve")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		b.now = b.at(time.Second)
		first := b.send(t, "a", "approve", `1`)
		_, err = b.store.InstanceResume(b.ctx, b.change("a"))
		require.NoError(t, err)

		b.now = b.at(time.Second)
		second := b.send(t, "a", "approve", `2`)
		require.True(t, second.Woken)
		require.Empty(t, second.DeliveredTo, "an older event is undelivered: the run consumes it")
		require.Nil(t, second.Event.DeliveredAt)
		require.Equal(t, db.StepStatusWaiting, b.steps(t, "a", 1)[0].Status)
		for _, ev := range b.events(t, "a", 1) {
			require.Nil(t, ev.DeliveredAt, "event %d", ev.ID)
		}
		task := b.claimIDAt(t, "a", b.now)
		p := b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait"}
		cp, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, first.Event.ID, cp.Event.ID, "the oldest goes first")

		b.create(t, "clock")
		waitFor(t, b, "clock", "approve")
		res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "clock", Type: "approve", Payload: json.RawMessage(`1`),
		})
		require.NoError(t, err)
		require.True(t, res.Woken)
		require.Empty(t, res.DeliveredTo, "a send on the database clock delivers nothing")
		require.Equal(t, db.StepStatusWaiting, b.steps(t, "clock", 1)[0].Status)
		require.Nil(t, b.events(t, "clock", 1)[0].DeliveredAt)
	})

	t.Run("SendDoesNotWakePausedInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		waitFor(t, b, "a", "approve")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		before := b.task(t, "a")

		res := b.send(t, "a", "approve", `1`)
		require.False(t, res.Woken)
		require.Equal(t, 1, res.Event.RunNumber)
		require.Equal(t, before, b.task(t, "a"))
		require.Equal(t, dftype.StatusPaused, b.get(t, "a").Status)
		require.Len(t, b.events(t, "a", 1), 1, "buffered for later")
	})

	t.Run("SendToRunningInstanceOnlyBuffers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		res := b.send(t, "a", "approve", `1`)
		require.False(t, res.Woken)
		require.Equal(t, task, b.task(t, "a"), "the held task is untouched")

		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		res = b.send(t, "a", "approve", `2`)
		require.False(t, res.Woken)
		require.Len(t, b.events(t, "a", 1), 2)
	})

	t.Run("SendAfterRestartGoesToNewRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		waitFor(t, b, "a", "approve")
		_, err := b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)

		res := b.send(t, "a", "approve", `1`)
		require.False(t, res.Woken, "the old run's wait does not count")
		require.Equal(t, 2, res.Event.RunNumber)
		require.Equal(t, db.TaskKindRun, b.task(t, "a").Kind)
	})
}
