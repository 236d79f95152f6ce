package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

// RunLoad returns the instance and the steps of its current run, keyed by
// step key, read from one snapshot; db.ErrNotFound when there is no such
// instance.
func (s *Store) RunLoad(ctx context.Context, ref db.InstanceRef) (*db.RunState, error) {
	var state *db.RunState
	err := s.inReadTx(ctx, func(q *litesqlc.Queries) error {
		row, err := q.InstanceGet(ctx, litesqlc.InstanceGetParams{
			WorkflowName: ref.WorkflowName,
			InstanceID:   ref.ID,
		})
		if err != nil {
			return err
		}
		steps, err := q.StepList(ctx, litesqlc.StepListParams{
			WorkflowName: ref.WorkflowName,
			InstanceID:   ref.ID,
			RunNumber:    row.RunNumber,
			Max:          limitArg(0),
		})
		if err != nil {
			return fmt.Errorf("loading run steps: %w", err)
		}
		state = &db.RunState{
			Instance: instanceFromRow(&row),
			Steps:    make(map[string]*db.Step, len(steps)),
		}
		for i := range steps {
			state.Steps[steps[i].StepKey] = stepFromRow(&steps[i])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading run: %w", interpretError(err))
	}
	return state, nil
}

// StepList returns a page of the steps of one run of an instance in
// creation (id) order, after the step p.AfterID; Limit 0 lists every step.
func (s *Store) StepList(ctx context.Context, p *db.StepListParams) ([]*db.Step, error) {
	rows, err := s.queriesFor(ctx, false).StepList(ctx, litesqlc.StepListParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(p.RunNumber),
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

// Checkpoint commits a runner's transition in one write transaction fenced by
// p.Task. It returns db.ErrLeaseLost, having changed nothing, when the run
// was restarted or ended, or the task version moved on. When an event is
// consumed, a write in p.Steps for the consuming step's key is dropped: the
// step is complete with the event. After OutcomeSuspend it records a hook
// entry (retry or wake, due when the task is) when p.RecordHooks is set.
func (s *Store) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	var res *db.CheckpointResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var err error
		res, err = checkpointTx(ctx, q, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	return res, nil
}

// checkpointTx is one checkpoint inside the caller's write transaction. It
// fences before it writes anything: db.ErrLeaseLost means it wrote nothing.
func checkpointTx(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	now, err := txNow(ctx, q, nowArg(p.Now))
	if err != nil {
		return nil, err
	}
	inst, err := q.CheckpointFence(ctx, litesqlc.CheckpointFenceParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(p.RunNumber),
		TaskID:       p.Task.ID,
		Version:      p.Task.Version,
	})
	if isNoRows(err) || err == nil && db.InstanceStatus(inst.Status).Terminal() {
		return nil, db.ErrLeaseLost
	}
	if err != nil {
		return nil, err
	}

	res := &db.CheckpointResult{Status: db.InstanceStatus(inst.Status)}
	if p.ConsumeEvent != nil {
		if res.Event, err = consumeEvent(ctx, q, p, now); err != nil {
			return nil, err
		}
	}
	for i := range p.Steps {
		if res.Event != nil && p.Steps[i].Key == p.ConsumeEvent.StepKey {
			continue // the step just completed with the event
		}
		if err := q.StepUpsert(ctx, stepUpsertParams(p, &p.Steps[i], now)); err != nil {
			return nil, fmt.Errorf("writing step %q: %w", p.Steps[i].Key, err)
		}
	}
	if err := applyOutcome(ctx, q, p, now, inst.PauseRequested != 0, res); err != nil {
		return nil, err
	}
	if p.ResetLeaseLosses && p.Outcome == db.OutcomeContinue {
		if err := q.TaskResetLeaseLosses(ctx, litesqlc.TaskResetLeaseLossesParams{ID: p.Task.ID, Version: p.Task.Version}); err != nil {
			return nil, err
		}
	}
	if p.Outcome != db.OutcomeSuspend {
		return res, nil
	}
	reason := db.HookReasonWake
	if p.NextKind == db.TaskKindRetry {
		reason = db.HookReasonRetry
	}
	return res, recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.InstanceID, reason, now)
}

// consumeEvent marks the oldest undelivered event of the requested type as
// consumed and completes the waiting step with it; nil when none is buffered.
func consumeEvent(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams, now int64) (*db.Event, error) {
	ce := p.ConsumeEvent
	row, err := q.EventConsumeOldest(ctx, litesqlc.EventConsumeOldestParams{
		Now:          now,
		StepKey:      ce.StepKey,
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(p.RunNumber),
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
	if err := q.StepCompleteWithEvent(ctx, litesqlc.StepCompleteWithEventParams{
		WorkflowName:  p.WorkflowName,
		InstanceID:    p.InstanceID,
		RunNumber:     int64(p.RunNumber),
		StepKey:       ce.StepKey,
		WaitEventType: &ce.Type,
		Result:        jsonArg(result),
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
// itself keeps the payload as sent. The Postgres backend writes the same
// bytes.
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

func stepUpsertParams(p *db.CheckpointParams, w *db.StepWrite, now int64) litesqlc.StepUpsertParams {
	return litesqlc.StepUpsertParams{
		WorkflowName:  p.WorkflowName,
		InstanceID:    p.InstanceID,
		RunNumber:     int64(p.RunNumber),
		StepKey:       w.Key,
		Type:          string(w.Type),
		Status:        string(w.Status),
		Attempts:      int64(w.Attempts),
		MaxAttempts:   int64(w.MaxAttempts),
		TimeoutMs:     w.Timeout.Milliseconds(),
		NextRetryAt:   microsPtr(w.NextRetryAt),
		WakeAt:        microsPtr(w.WakeAt),
		WaitEventType: textArg(w.WaitEventType),
		Result:        jsonArg(w.Result),
		ErrorName:     textArg(w.ErrorName),
		ErrorMessage:  textArg(w.ErrorMessage),
		Now:           now,
	}
}

// applyOutcome moves the instance and its held task to where the outcome
// leaves them, and fills in res.
func applyOutcome(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams, now int64, pauseRequested bool, res *db.CheckpointResult) error {
	ref := litesqlc.TaskDeleteParams{WorkflowName: p.WorkflowName, InstanceID: p.InstanceID}
	switch p.Outcome {
	case db.OutcomeContinue:
		res.PauseRequested = pauseRequested // the task and instance rows stay as they are
		return nil

	case db.OutcomeSuspend:
		due, err := q.EventSuspendDue(ctx, litesqlc.EventSuspendDueParams{
			NextRunAt:    micros(p.NextRunAt),
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int64(p.RunNumber),
			Types:        listArg(p.WaitEventTypes),
		})
		if err != nil {
			return err
		}
		status, err := q.InstanceSuspend(ctx, litesqlc.InstanceSuspendParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		})
		if err != nil {
			return err
		}
		runAt := &p.NextRunAt
		if due != 0 {
			runAt = nil // now
		}
		if err := scheduleTask(ctx, q, p, now, runAt, db.TaskKindWake); err != nil {
			return err
		}
		res.Status = db.InstanceStatus(status)
		res.Due = due != 0 && res.Status != db.StatusPaused
		return nil

	case db.OutcomePark:
		if err := q.InstancePark(ctx, litesqlc.InstanceParkParams{
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
		if err := q.InstanceComplete(ctx, litesqlc.InstanceCompleteParams{
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
		if err := q.InstanceFail(ctx, litesqlc.InstanceFailParams{
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
func scheduleTask(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams, now int64, runAt *time.Time, fallback db.TaskKind) error {
	kind := p.NextKind
	if kind == "" {
		kind = fallback
	}
	return q.TaskSchedule(ctx, litesqlc.TaskScheduleParams{
		RunAt:    microsPtr(runAt),
		Now:      now,
		Kind:     string(kind),
		Priority: int64(kind.Priority()),
		ID:       p.Task.ID,
	})
}

// CheckpointBatch commits a group of batchable checkpoints (Continue,
// Complete, Error) in one write transaction: the embedded database has one
// writer, so a group costs one commit instead of one per step. Each item is
// fenced before it writes anything; an item whose lease was lost reports
// db.ErrLeaseLost and changes nothing.
func (s *Store) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	results := make([]db.CheckpointBatchResult, len(ps))
	for _, p := range ps {
		if !p.Batchable() {
			return nil, db.ErrNotBatchable
		}
	}
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		for i, p := range ps {
			res, err := checkpointTx(ctx, q, p)
			if errors.Is(err, db.ErrLeaseLost) {
				// Fenced before any write: this item changed nothing.
				results[i] = db.CheckpointBatchResult{Err: db.ErrLeaseLost}
				continue
			}
			if err != nil {
				return err
			}
			results[i] = db.CheckpointBatchResult{Result: res}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	return results, nil
}
