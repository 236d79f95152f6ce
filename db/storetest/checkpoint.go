package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testCheckpoint(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("StaleVersionChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		stale := b.claim(t, "a")
		b.send(t, "a", "approve", `{"ok":true}`)
		current := b.claimIDAt(t, "a", b.at(lease))

		instBefore, taskBefore := b.get(t, "a"), b.task(t, "a")
		eventsBefore := b.events(t, "a", 0)
		for _, outcome := range []db.CheckpointOutcome{
			db.OutcomeContinue, db.OutcomeSuspend, db.OutcomePark, db.OutcomeComplete, db.OutcomeError,
		} {
			p := b.checkpoint(stale)
			p.Now = b.at(2 * lease)
			p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete, Result: json.RawMessage(`1`)}}
			p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait"}
			p.Outcome = outcome
			p.NextRunAt = b.now
			p.NextKind = db.TaskKindWake
			p.Output = json.RawMessage(`"out"`)
			p.ErrorName = "E"
			res, err := b.store.Checkpoint(b.ctx, p)
			require.ErrorIs(t, err, db.ErrLeaseLost, "outcome %d", outcome)
			require.Nil(t, res)
		}
		require.Equal(t, instBefore, b.get(t, "a"), "instance untouched")
		require.Equal(t, taskBefore, b.task(t, "a"), "task untouched")
		require.Equal(t, eventsBefore, b.events(t, "a", 0), "events untouched")
		require.Empty(t, b.steps(t, "a", 1), "no step written")

		// The current holder is not affected.
		p := b.checkpoint(current)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait"}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.NotNil(t, res.Event)
	})

	t.Run("StaleContinueChangesNothing", func(t *testing.T) {
		// The step checkpoint writes no task or instance row, so its fence is
		// all that keeps a stale runner's step out: both the single
		// checkpoint and the group commit must drop it.
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		stale := b.claim(t, "a")
		current := b.claimIDAt(t, "a", b.at(lease))
		instBefore, taskBefore := b.get(t, "a"), b.task(t, "a")
		require.Equal(t, current.ID, taskBefore.ID)

		step := []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`)}}
		p := b.checkpoint(stale)
		p.Now = b.at(2 * lease)
		p.Steps = step
		res, err := b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Nil(t, res)
		batch, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{p})
		require.NoError(t, err)
		require.Len(t, batch, 1)
		require.ErrorIs(t, batch[0].Err, db.ErrLeaseLost)
		require.Nil(t, batch[0].Result)

		require.Equal(t, instBefore, b.get(t, "a"), "instance untouched")
		require.Equal(t, taskBefore, b.task(t, "a"), "task untouched")
		require.Empty(t, b.steps(t, "a", 1), "no step written")

		// The current holder's step lands.
		p.Task = db.TaskRef{ID: taskBefore.ID, Version: taskBefore.Version}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Len(t, b.steps(t, "a", 1), 1)
	})

	t.Run("Continue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		instBefore := b.get(t, "a")

		p := b.checkpoint(task)
		p.Now = b.at(time.Second)
		p.Steps = []db.StepWrite{{Key: "charge", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 6, Result: json.RawMessage(`{"amount": 10}`)}}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusRunning}, res)

		// A step checkpoint writes the step only: the task (its lease is the
		// heartbeat's to renew) and the instance (updated_at moves on status
		// transitions) stay as they were.
		require.Equal(t, task, b.task(t, "a"), "the task is not written")
		require.Equal(t, instBefore, b.get(t, "a"), "the instance is not written")
		require.Len(t, b.steps(t, "a", 1), 1)

		// A pause requested meanwhile is reported so the runner can park.
		_, err = b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		res, err = b.store.Checkpoint(b.ctx, b.checkpoint(task))
		require.NoError(t, err)
		require.True(t, res.PauseRequested)
		require.Equal(t, dftype.StatusWaitingForPause, res.Status)
	})

	t.Run("StepUpsert", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		retryAt := b.at(10 * time.Second)
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{
			{
				Key: "charge card", Type: db.StepTypeDo, Status: db.StepStatusRetrying,
				Attempts: 1, MaxAttempts: 6, Timeout: 10 * time.Minute, NextRetryAt: &retryAt,
				ErrorName: "Error", ErrorMessage: "card declined",
			},
			{Key: "nap", Type: db.StepTypeSleep, Status: db.StepStatusWaiting, WakeAt: new(b.at(time.Hour))},
		}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 2)
		charge := steps[0]
		require.Equal(t, "charge card", charge.Key)
		require.Equal(t, workflowName, charge.WorkflowName)
		require.Equal(t, "a", charge.InstanceID)
		require.Equal(t, 1, charge.RunNumber)
		require.Equal(t, db.StepTypeDo, charge.Type)
		require.Equal(t, db.StepStatusRetrying, charge.Status)
		require.Equal(t, 1, charge.Attempts)
		require.Equal(t, 6, charge.MaxAttempts)
		require.Equal(t, 10*time.Minute, charge.Timeout)
		requireTimePtr(t, retryAt, charge.NextRetryAt)
		require.Nil(t, charge.WakeAt)
		require.Equal(t, "Error", charge.ErrorName)
		require.Equal(t, "card declined", charge.ErrorMessage)
		require.Nil(t, charge.Result)
		requireTime(t, b.now, charge.CreatedAt)
		requireTime(t, b.now, charge.UpdatedAt)
		require.Nil(t, charge.CompletedAt)
		require.Equal(t, "nap", steps[1].Key)
		requireTimePtr(t, b.at(time.Hour), steps[1].WakeAt)

		// The retry succeeds: the same row is overwritten.
		p = b.checkpoint(task)
		p.Now = b.at(10 * time.Second)
		p.Steps = []db.StepWrite{{
			Key: "charge card", Type: db.StepTypeDo, Status: db.StepStatusComplete,
			Attempts: 2, MaxAttempts: 6, Timeout: 10 * time.Minute, Result: json.RawMessage(`{"id": "ch_1"}`),
		}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		steps = b.steps(t, "a", 1)
		require.Len(t, steps, 2)
		charge = steps[0]
		require.Equal(t, "charge card", charge.Key, "creation order is kept")
		require.Equal(t, db.StepStatusComplete, charge.Status)
		require.Equal(t, 2, charge.Attempts)
		require.Nil(t, charge.NextRetryAt)
		require.Empty(t, charge.ErrorName)
		require.Empty(t, charge.ErrorMessage)
		requireJSON(t, `{"id": "ch_1"}`, charge.Result)
		requireTime(t, b.now, charge.CreatedAt)
		requireTime(t, b.at(10*time.Second), charge.UpdatedAt)
		requireTimePtr(t, b.at(10*time.Second), charge.CompletedAt)

		// An errored step is final too.
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "nap", Type: db.StepTypeSleep, Status: db.StepStatusErrored, ErrorName: "X"}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		requireTimePtr(t, b.now, b.steps(t, "a", 1)[1].CompletedAt)
		require.Empty(t, b.steps(t, "a", 2))
	})

	t.Run("Suspend", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "nap", Type: db.StepTypeSleep, Status: db.StepStatusWaiting, WakeAt: new(b.at(time.Hour))}}
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(time.Hour)
		p.NextKind = db.TaskKindWake
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusWaiting}, res)

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusWaiting, inst.Status)
		got := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, got.Status)
		require.Equal(t, db.TaskKindWake, got.Kind)
		requireTime(t, b.at(time.Hour), got.RunAt)
		require.Empty(t, got.LockOwner)
		require.Nil(t, got.LockedUntil)
		requireTimePtr(t, b.at(time.Hour), b.nextRunAt(t))
		require.Empty(t, b.claimAt(t, b.at(time.Hour-time.Second), 10))

		// Waking and suspending with a time already passed is due at once.
		task = b.claimIDAt(t, "a", b.at(time.Hour))
		p = b.checkpoint(task)
		p.Now = b.at(time.Hour)
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(time.Hour - time.Second)
		p.NextKind = db.TaskKindRetry
		res, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.True(t, res.Due)
		got = b.task(t, "a")
		require.Equal(t, db.TaskKindRetry, got.Kind)
		requireTime(t, b.at(time.Hour), got.RunAt)
	})

	t.Run("SuspendWithBufferedEventIsDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		b.send(t, "a", "other", `1`)

		suspend := func(task *db.Task, types ...string) *db.CheckpointResult {
			p := b.checkpoint(task)
			p.Steps = []db.StepWrite{{Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: "approve", WakeAt: new(b.at(24 * time.Hour))}}
			p.Outcome = db.OutcomeSuspend
			p.NextRunAt = b.at(24 * time.Hour)
			p.NextKind = db.TaskKindWake
			p.WaitEventTypes = types
			res, err := b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
			return res
		}

		res := suspend(task, "approve")
		require.False(t, res.Due, "an event of another type does not count")
		requireTime(t, b.at(24*time.Hour), b.task(t, "a").RunAt)

		// The event arrived between the runner's check and its suspend.
		task = b.claimIDAt(t, "a", b.at(24*time.Hour))
		b.send(t, "a", "approve", `2`)
		res = suspend(task, "reject", "approve")
		require.True(t, res.Due)
		require.Equal(t, dftype.StatusWaiting, res.Status)
		got := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, got.Status)
		requireTime(t, b.now, got.RunAt)
	})

	t.Run("SuspendWithPauseRequestedPauses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		b.send(t, "a", "approve", `{}`)

		p := b.checkpoint(task)
		p.Outcome = db.OutcomeSuspend
		p.NextRunAt = b.at(time.Minute)
		p.NextKind = db.TaskKindWake
		p.WaitEventTypes = []string{"approve"}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusPaused, res.Status)
		require.False(t, res.Due, "a paused instance is never due")
		require.False(t, res.PauseRequested)

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusPaused, inst.Status)
		require.False(t, inst.PauseRequested)
		require.Empty(t, b.claimAt(t, b.at(time.Hour), 10))
		require.Nil(t, b.nextRunAt(t))
	})

	t.Run("Complete", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		output := "{\"total\" : 12.50,\n \"items\": []}"
		p := b.checkpoint(task)
		p.Now = b.at(time.Minute)
		p.Steps = []db.StepWrite{{Key: "last", Type: db.StepTypeDo, Status: db.StepStatusComplete, Result: json.RawMessage(`true`)}}
		p.Outcome = db.OutcomeComplete
		p.Output = json.RawMessage(output)
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusComplete}, res)

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusComplete, inst.Status)
		requireJSON(t, output, inst.Output)
		requireTimePtr(t, b.at(time.Minute), inst.CompletedAt)
		require.False(t, inst.PauseRequested)
		require.Len(t, b.steps(t, "a", 1), 1)
		_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a"})
		require.ErrorIs(t, err, db.ErrNotFound, "completed tasks are deleted")
		require.Nil(t, b.nextRunAt(t))

		_, err = b.store.Checkpoint(b.ctx, b.checkpoint(task))
		require.ErrorIs(t, err, db.ErrLeaseLost)
	})

	t.Run("CompleteClearsPauseRequest", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		_, err := b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)

		p := b.checkpoint(task)
		p.Outcome = db.OutcomeComplete
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, res.Status)
		inst := b.get(t, "a")
		require.False(t, inst.PauseRequested)
		require.Nil(t, inst.Output)
	})

	t.Run("Error", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		p := b.checkpoint(task)
		p.Outcome = db.OutcomeError
		p.ErrorName = "NonRetryableError"
		p.ErrorMessage = "card stolen"
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusErrored}, res)

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusErrored, inst.Status)
		require.Equal(t, "NonRetryableError", inst.ErrorName)
		require.Equal(t, "card stolen", inst.ErrorMessage)
		requireTimePtr(t, b.now, inst.CompletedAt)
		_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a"})
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("ConsumeEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		payload := "{\"approved\" : true,\n  \"by\": \"ann\"}"
		first := b.send(t, "a", "approve", payload).Event
		b.now = b.at(time.Second)
		other := b.send(t, "a", "reject", `{}`).Event
		b.now = b.at(time.Second)
		second := b.send(t, "a", "approve", `{"n":2}`).Event
		b.now = b.at(time.Second)

		p := b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait 1"}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.NotNil(t, res.Event)
		require.Equal(t, first.ID, res.Event.ID, "oldest first")
		requireJSON(t, payload, res.Event.Payload)
		requireTimePtr(t, b.now, res.Event.DeliveredAt)
		require.Equal(t, "wait 1", res.Event.ConsumedByStepKey)

		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 1)
		step := steps[0]
		require.Equal(t, "wait 1", step.Key)
		require.Equal(t, db.StepTypeWaitForEvent, step.Type)
		require.Equal(t, db.StepStatusComplete, step.Status)
		requireTimePtr(t, b.now, step.CompletedAt)
		// The step records json.Marshal of {type, payload, timestamp}, exactly
		// what a runner encodes on the first run; the event keeps the payload
		// as sent.
		requireJSON(t, `{"type":"approve","payload":{"approved":true,"by":"ann"},"timestamp":"2041-03-04T10:00:00Z"}`, step.Result)
		var decoded struct {
			Type      string          `json:"type"`
			Payload   json.RawMessage `json:"payload"`
			Timestamp time.Time       `json:"timestamp"`
		}
		require.NoError(t, json.Unmarshal(step.Result, &decoded))
		requireTime(t, first.CreatedAt, decoded.Timestamp)

		events := b.events(t, "a", 1)
		require.Len(t, events, 3)
		require.Equal(t, []int64{first.ID, other.ID, second.ID}, []int64{events[0].ID, events[1].ID, events[2].ID})
		require.Equal(t, res.Event, events[0])
		require.Equal(t, other, events[1], "other types untouched")
		require.Equal(t, second, events[2], "younger events untouched")

		// A wait that already exists keeps its timeout when it completes.
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "wait 2", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: "approve", WakeAt: new(b.at(time.Hour)), Timeout: time.Hour}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		p = b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait 2"}
		res, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, second.ID, res.Event.ID)
		steps = b.steps(t, "a", 1)
		require.Len(t, steps, 2)
		require.Equal(t, db.StepStatusComplete, steps[1].Status)
		require.Equal(t, "approve", steps[1].WaitEventType)
		requireTimePtr(t, b.at(time.Hour), steps[1].WakeAt)
		requireJSON(t, `{"type":"approve","payload":{"n":2},"timestamp":"2041-03-04T10:00:02Z"}`, steps[1].Result)

		// A wait written in the same checkpoint does not undo the delivery.
		third := b.send(t, "a", "approve", `3`).Event
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{
			{Key: "wait 2b", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: "approve"},
			{Key: "after", Type: db.StepTypeDo, Status: db.StepStatusComplete, Result: json.RawMessage(`4`)},
		}
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait 2b"}
		res, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, third.ID, res.Event.ID)
		steps = b.steps(t, "a", 1)
		require.Len(t, steps, 4)
		require.Equal(t, "wait 2b", steps[2].Key)
		require.Equal(t, db.StepStatusComplete, steps[2].Status)
		requireJSON(t, `{"type":"approve","payload":3,"timestamp":"2041-03-04T10:00:03Z"}`, steps[2].Result)
		require.Equal(t, "after", steps[3].Key)

		// None left: the rest of the checkpoint still commits.
		p = b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "approve", StepKey: "wait 3"}
		p.Steps = []db.StepWrite{{Key: "wait 3", Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: "approve"}}
		res, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Nil(t, res.Event)
		steps = b.steps(t, "a", 1)
		require.Len(t, steps, 5)
		require.Equal(t, "wait 3", steps[4].Key)
		require.Equal(t, db.StepStatusWaiting, steps[4].Status)
		require.Equal(t, other, b.events(t, "a", 1)[1])
	})

	t.Run("ConsumeEventWithoutPayload", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		ev, err := b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "a", Type: "ping", Now: new(b.at(1500 * time.Microsecond)),
		})
		require.NoError(t, err)
		require.Nil(t, ev.Event.Payload)

		p := b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "ping", StepKey: "w"}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Nil(t, res.Event.Payload)
		requireJSON(t, `{"type":"ping","payload":null,"timestamp":"2041-03-04T10:00:00.0015Z"}`, b.steps(t, "a", 1)[0].Result)

		// Encoded as json.Marshal would: compact, HTML characters escaped.
		b.send(t, "a", "html", "{ \"h\": \"<b>&\" }")
		p = b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{Type: "html", StepKey: "h"}
		res, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		requireJSON(t, "{ \"h\": \"<b>&\" }", res.Event.Payload)
		requireJSON(t, `{"type":"html","payload":{"h":"\u003cb\u003e\u0026"},"timestamp":"2041-03-04T10:00:00Z"}`, b.steps(t, "a", 1)[1].Result)
	})
}
