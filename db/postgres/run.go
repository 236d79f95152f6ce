package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// RunLoad returns the instance and the steps of its current run, keyed by
// step key; db.ErrNotFound when there is no such instance.
func (s *Store) RunLoad(ctx context.Context, ref db.InstanceRef) (*db.RunState, error) {
	row, err := s.queries.InstanceGet(ctx, pgsqlc.InstanceGetParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("loading run: %w", interpretError(err))
	}
	steps, err := s.queries.StepList(ctx, pgsqlc.StepListParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
		RunNumber:    row.RunNumber,
	})
	if err != nil {
		return nil, fmt.Errorf("loading run steps: %w", interpretError(err))
	}
	state := &db.RunState{
		Instance: instanceFromRow(&row),
		Steps:    make(map[string]*db.Step, len(steps)),
	}
	for i := range steps {
		state.Steps[steps[i].StepKey] = stepFromRow(&steps[i])
	}
	return state, nil
}

// StepList returns a page of the steps of one run of an instance in
// creation (id) order, after the step p.AfterID; Limit 0 lists every step.
func (s *Store) StepList(ctx context.Context, p *db.StepListParams) ([]*db.Step, error) {
	rows, err := s.queries.StepList(ctx, pgsqlc.StepListParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int32(p.RunNumber),
		AfterID:      p.AfterID,
		Max:          limitArg(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("listing steps: %w", interpretError(err))
	}
	list := make([]*db.Step, len(rows))
	for i := range rows {
		list[i] = stepFromRow(&rows[i])
	}
	return list, nil
}

// Checkpoint commits a runner's transition in one transaction fenced by
// p.Task. It locks the instance first and the task second, the order every
// writer uses, and returns db.ErrLeaseLost, having changed nothing, when the
// run was restarted or ended, or the task version moved on. When an event is
// consumed, a write in p.Steps for the consuming step's key is dropped: the
// step is complete with the event. After OutcomeSuspend it records a hook
// entry (retry or wake, due when the task is) when p.RecordHooks is set, and
// notifies the wake channel when the task is due now.
func (s *Store) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	now := nowArg(p.Now)
	var res *db.CheckpointResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		inst, err := q.InstanceTouchRun(ctx, pgsqlc.InstanceTouchRunParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int32(p.RunNumber),
		})
		if isNoRows(err) || err == nil && db.InstanceStatus(inst.Status).Terminal() {
			return db.ErrLeaseLost
		}
		if err != nil {
			return err
		}
		if _, err := q.TaskLockHeld(ctx, pgsqlc.TaskLockHeldParams{ID: p.Task.ID, Version: p.Task.Version}); err != nil {
			if isNoRows(err) {
				return db.ErrLeaseLost
			}
			return err
		}

		res = &db.CheckpointResult{Status: db.InstanceStatus(inst.Status)}
		if p.ConsumeEvent != nil {
			if res.Event, err = consumeEvent(ctx, q, p, now); err != nil {
				return err
			}
		}
		for i := range p.Steps {
			if res.Event != nil && p.Steps[i].Key == p.ConsumeEvent.StepKey {
				continue // the step just completed with the event
			}
			if err := q.StepUpsert(ctx, stepUpsertParams(p, &p.Steps[i], now)); err != nil {
				return fmt.Errorf("writing step %q: %w", p.Steps[i].Key, err)
			}
		}
		if err := applyOutcome(ctx, q, p, now, inst.PauseRequested, res); err != nil {
			return err
		}
		if p.Outcome != db.OutcomeSuspend {
			return nil
		}
		reason := db.HookReasonWake
		if p.NextKind == db.TaskKindRetry {
			reason = db.HookReasonRetry
		}
		if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.InstanceID, reason, now); err != nil {
			return err
		}
		if !res.Due {
			return nil
		}
		return s.notifyWake(ctx, q, p.WorkflowName)
	})
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	return res, nil
}

// consumeEvent marks the oldest undelivered event of the requested type as
// consumed and completes the waiting step with it; nil when none is buffered.
func consumeEvent(ctx context.Context, q *pgsqlc.Queries, p *db.CheckpointParams, now *time.Time) (*db.Event, error) {
	ce := p.ConsumeEvent
	row, err := q.EventConsumeOldest(ctx, pgsqlc.EventConsumeOldestParams{
		Now:          now,
		StepKey:      ce.StepKey,
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int32(p.RunNumber),
		Type:         ce.Type,
	})
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ev := eventFromRow(&row)
	result, err := eventStepResult(ev)
	if err != nil {
		return nil, err
	}
	if err := q.StepCompleteWithEvent(ctx, pgsqlc.StepCompleteWithEventParams{
		WorkflowName:  p.WorkflowName,
		InstanceID:    p.InstanceID,
		RunNumber:     int32(p.RunNumber),
		StepKey:       ce.StepKey,
		WaitEventType: &ce.Type,
		Result:        result,
		Now:           now,
	}); err != nil {
		return nil, err
	}
	return ev, nil
}

// eventStepResult is the JSON result a waitForEvent step records for the
// event it consumed. It is exactly json.Marshal of {type, payload, timestamp}
// (payload compacted, a missing one null, timestamp in UTC RFC 3339 with
// nanoseconds): the runner encodes the event the same way on the first run,
// so the first run and every replay decode the same bytes. The event row
// itself keeps the payload as sent.
func eventStepResult(ev *db.Event) (json.RawMessage, error) {
	payload := ev.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	return json.Marshal(struct {
		Type      string          `json:"type"`
		Payload   json.RawMessage `json:"payload"`
		Timestamp time.Time       `json:"timestamp"`
	}{ev.Type, payload, ev.CreatedAt.UTC()})
}

func stepUpsertParams(p *db.CheckpointParams, w *db.StepWrite, now *time.Time) pgsqlc.StepUpsertParams {
	return pgsqlc.StepUpsertParams{
		WorkflowName:  p.WorkflowName,
		InstanceID:    p.InstanceID,
		RunNumber:     int32(p.RunNumber),
		StepKey:       w.Key,
		Type:          string(w.Type),
		Status:        string(w.Status),
		Attempts:      int32(w.Attempts),
		MaxAttempts:   int32(w.MaxAttempts),
		TimeoutMs:     w.Timeout.Milliseconds(),
		NextRetryAt:   w.NextRetryAt,
		WakeAt:        w.WakeAt,
		WaitEventType: textArg(w.WaitEventType),
		Result:        jsonArg(w.Result),
		ErrorName:     textArg(w.ErrorName),
		ErrorMessage:  textArg(w.ErrorMessage),
		Now:           now,
	}
}

// applyOutcome moves the locked instance and its held task to where the
// outcome leaves them, and fills in res.
func applyOutcome(ctx context.Context, q *pgsqlc.Queries, p *db.CheckpointParams, now *time.Time, pauseRequested bool, res *db.CheckpointResult) error {
	ref := pgsqlc.TaskDeleteParams{WorkflowName: p.WorkflowName, InstanceID: p.InstanceID}
	switch p.Outcome {
	case db.OutcomeContinue:
		res.PauseRequested = pauseRequested
		if p.LockedUntil.IsZero() {
			return nil
		}
		return q.TaskExtend(ctx, pgsqlc.TaskExtendParams{LockedUntil: p.LockedUntil, ID: p.Task.ID})

	case db.OutcomeSuspend:
		due, err := q.EventSuspendDue(ctx, pgsqlc.EventSuspendDueParams{
			NextRunAt:    p.NextRunAt,
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int32(p.RunNumber),
			Types:        p.WaitEventTypes,
		})
		if err != nil {
			return err
		}
		status, err := q.InstanceSuspend(ctx, pgsqlc.InstanceSuspendParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		})
		if err != nil {
			return err
		}
		runAt := &p.NextRunAt
		if due {
			runAt = nil // now
		}
		if err := scheduleTask(ctx, q, p, now, runAt, db.TaskKindWake); err != nil {
			return err
		}
		res.Status = db.InstanceStatus(status)
		res.Due = due && res.Status != db.StatusPaused
		return nil

	case db.OutcomePark:
		if err := q.InstancePark(ctx, pgsqlc.InstanceParkParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		}); err != nil {
			return err
		}
		if err := scheduleTask(ctx, q, p, now, &p.NextRunAt, db.TaskKindResume); err != nil {
			return err
		}
		res.Status = db.StatusPaused
		return nil

	case db.OutcomeComplete:
		if err := q.InstanceComplete(ctx, pgsqlc.InstanceCompleteParams{
			Output:       jsonArg(p.Output),
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		}); err != nil {
			return err
		}
		res.Status = db.StatusComplete
		return q.TaskDelete(ctx, ref)

	case db.OutcomeError:
		if err := q.InstanceFail(ctx, pgsqlc.InstanceFailParams{
			ErrorName:    textArg(p.ErrorName),
			ErrorMessage: textArg(p.ErrorMessage),
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		}); err != nil {
			return err
		}
		res.Status = db.StatusErrored
		return q.TaskDelete(ctx, ref)

	default:
		return errors.New("unknown checkpoint outcome " + fmt.Sprint(p.Outcome))
	}
}

// scheduleTask gives the held task back to the queue as p.NextKind (or
// fallback when unset), due at runAt, or now when runAt is nil.
func scheduleTask(ctx context.Context, q *pgsqlc.Queries, p *db.CheckpointParams, now, runAt *time.Time, fallback db.TaskKind) error {
	kind := p.NextKind
	if kind == "" {
		kind = fallback
	}
	return q.TaskSchedule(ctx, pgsqlc.TaskScheduleParams{
		RunAt:    runAt,
		Now:      now,
		Kind:     string(kind),
		Priority: int16(kind.Priority()),
		ID:       p.Task.ID,
	})
}
