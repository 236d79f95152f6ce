package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// runLoadSnapshot wraps the reads of RunLoad in a read-only repeatable-read
// transaction, so that the instance and the steps come from one snapshot.
var runLoadSnapshot = [2][]string{
	{"BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"},
	{"COMMIT"},
}

// RunLoad returns the instance and the steps of its current run, keyed by
// step key; db.ErrNotFound when there is no such instance. Both reads go in
// one round trip and see one snapshot.
func (s *Store) RunLoad(ctx context.Context, ref db.InstanceRef) (*db.RunState, error) {
	var (
		row      pgsqlc.WorkflowInstance
		steps    []pgsqlc.WorkflowStep
		rowErr   error
		stepsErr error
	)
	err := s.pipeline(ctx, runLoadSnapshot[0], runLoadSnapshot[1],
		func(q *pgsqlc.Queries) error {
			// A missing instance is no error of the batch: the step
			// query still answers (with no rows).
			row, rowErr = q.InstanceGet(ctx, pgsqlc.InstanceGetParams{
				WorkflowName: ref.WorkflowName,
				InstanceID:   ref.ID,
			})
			if rowErr != nil && !isNoRows(rowErr) {
				return rowErr
			}
			return nil
		},
		func(q *pgsqlc.Queries) error {
			steps, stepsErr = q.StepListCurrentRun(ctx, pgsqlc.StepListCurrentRunParams{
				WorkflowName: ref.WorkflowName,
				InstanceID:   ref.ID,
			})
			return stepsErr
		})
	if err == nil {
		err = rowErr
	}
	if err != nil {
		return nil, fmt.Errorf("loading run: %w", interpretError(err))
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

// Checkpoint commits a runner's transition fenced by p.Task, in one round
// trip unless an event is consumed. It returns db.ErrLeaseLost, having
// changed nothing, when the run was restarted or ended, or the task version
// moved on. Every path locks the instance first and the task second, the
// order every writer uses.
//
// A batchable checkpoint (Continue, Complete or Error) is a group commit of
// one (CheckpointBatch). Suspend and Park are a pipeline in one transaction:
// CheckpointFence locks and checks, then the step rows and the outcome are
// written by statements that each check the task again (see CheckpointFence
// in batch.sql). After OutcomeSuspend it records a hook entry (retry or
// wake, due when the task is) when p.RecordHooks is set, and notifies the
// wake channel when the task is due now. A checkpoint that consumes an event
// takes a transaction of two round trips on one connection
// (checkpointConsume), and one on the database's clock (no p.Now) or that
// resets the task's lease losses (the first after a reclaim) a transaction
// of several (checkpointTx).
func (s *Store) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	switch {
	case p.Now.IsZero(), p.ResetLeaseLosses:
		return s.checkpointTx(ctx, p)
	case p.ConsumeEvent != nil:
		return s.checkpointConsume(ctx, p)
	case p.Batchable():
		results, err := s.CheckpointBatch(ctx, []*db.CheckpointParams{p})
		if err != nil {
			return nil, err
		}
		if results[0].Err != nil {
			return nil, results[0].Err
		}
		return results[0].Result, nil
	}
	res, err := s.checkpointPipelined(ctx, p)
	if errors.Is(err, db.ErrLeaseLost) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	return res, nil
}

// checkpointPipelined commits a Suspend or Park checkpoint without an event
// to consume in one pipelined round trip.
func (s *Store) checkpointPipelined(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	steps, result, err := s.suspendStatements(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := s.pipeline(ctx, nil, nil, steps...); err != nil {
		return nil, err
	}
	return result()
}

// suspendStatements returns the statements of a Suspend or Park checkpoint
// without an event to consume, as pipeline steps, and what reads its result
// once the pipeline ran: db.ErrLeaseLost when the fence failed.
func (s *Store) suspendStatements(ctx context.Context, p *db.CheckpointParams) ([]pipelineStep, func() (*db.CheckpointResult, error), error) {
	now := nowArg(p.Now)
	held := false
	res := &db.CheckpointResult{}
	steps := []pipelineStep{func(q *pgsqlc.Queries) error {
		row, err := q.CheckpointFence(ctx, pgsqlc.CheckpointFenceParams{
			TaskID:       p.Task.ID,
			Version:      p.Task.Version,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int32(p.RunNumber),
		})
		held = err == nil
		if isNoRows(err) {
			return nil // the statements after it change nothing
		}
		res.Status = db.InstanceStatus(row.Status)
		return err
	}}
	if len(p.Steps) > 0 {
		w := checkpointStepsParams(p, now)
		steps = append(steps, func(q *pgsqlc.Queries) error { return q.CheckpointSteps(ctx, w) })
	}
	var outcome pipelineStep
	switch p.Outcome {
	case db.OutcomeSuspend:
		kind, reason := p.NextKind, db.HookReasonWake
		if kind == "" {
			kind = db.TaskKindWake
		}
		if kind == db.TaskKindRetry {
			reason = db.HookReasonRetry
		}
		outcome = func(q *pgsqlc.Queries) error {
			row, err := q.CheckpointSuspend(ctx, pgsqlc.CheckpointSuspendParams{
				Channel:      s.wakeChannel,
				WorkflowName: p.WorkflowName,
				NextRunAt:    p.NextRunAt,
				Now:          now,
				InstanceID:   p.InstanceID,
				RunNumber:    int32(p.RunNumber),
				Types:        emptyIfNil(p.WaitEventTypes),
				Kind:         string(kind),
				Priority:     int16(kind.Priority()),
				TaskID:       p.Task.ID,
				Version:      p.Task.Version,
				Reason:       string(reason),
				RecordHook:   p.RecordHooks,
			})
			if isNoRows(err) {
				held = false
				return nil
			}
			res.Status = db.InstanceStatus(row.Status)
			res.Due = row.Due && res.Status != db.StatusPaused
			return err
		}
	case db.OutcomePark:
		kind := p.NextKind
		if kind == "" {
			kind = db.TaskKindResume
		}
		outcome = func(q *pgsqlc.Queries) error {
			n, err := q.CheckpointPark(ctx, pgsqlc.CheckpointParkParams{
				Now:      now,
				RunAt:    p.NextRunAt,
				Kind:     string(kind),
				Priority: int16(kind.Priority()),
				TaskID:   p.Task.ID,
				Version:  p.Task.Version,
			})
			held = held && n == 1
			res.Status = db.StatusPaused
			return err
		}
	default:
		return nil, nil, errors.New("unknown checkpoint outcome " + fmt.Sprint(p.Outcome))
	}
	return append(steps, outcome), func() (*db.CheckpointResult, error) {
		if !held {
			return nil, db.ErrLeaseLost
		}
		return res, nil
	}, nil
}

// checkpointStepsParams are the arrays of CheckpointSteps for p.Steps.
// Nullable columns travel as empty strings or the zero time (year 1).
func checkpointStepsParams(p *db.CheckpointParams, now *time.Time) pgsqlc.CheckpointStepsParams {
	w := pgsqlc.CheckpointStepsParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int32(p.RunNumber),
		Now:          now,
		TaskID:       p.Task.ID,
		Version:      p.Task.Version,
	}
	for i := range p.Steps {
		st := &p.Steps[i]
		w.StepKeys = append(w.StepKeys, st.Key)
		w.Types = append(w.Types, string(st.Type))
		w.Statuses = append(w.Statuses, string(st.Status))
		w.Attempts = append(w.Attempts, int32(st.Attempts))
		w.MaxAttempts = append(w.MaxAttempts, int32(st.MaxAttempts))
		w.TimeoutsMs = append(w.TimeoutsMs, st.Timeout.Milliseconds())
		w.NextRetryAt = append(w.NextRetryAt, timeOrZero(st.NextRetryAt))
		w.WakeAt = append(w.WakeAt, timeOrZero(st.WakeAt))
		w.WaitEventTypes = append(w.WaitEventTypes, st.WaitEventType)
		w.Results = append(w.Results, string(st.Result))
		w.ErrorNames = append(w.ErrorNames, st.ErrorName)
		w.ErrorMessages = append(w.ErrorMessages, st.ErrorMessage)
	}
	return w
}

// emptyIfNil keeps a nil slice from being sent as a NULL array.
func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkpointTx commits a checkpoint in one transaction of several round
// trips, fenced by p.Task: the path of checkpoints on the database clock (no
// p.Now) and of those that reset the task's lease losses. It locks the instance first and the task second, the order every
// writer uses, and returns db.ErrLeaseLost, having changed nothing, when the
// run was restarted or ended, or the task version moved on. When an event is
// consumed, a write in p.Steps for the consuming step's key is dropped: the
// step is complete with the event. After OutcomeSuspend it records a hook
// entry (retry or wake, due when the task is) when p.RecordHooks is set, and
// notifies the wake channel when the task is due now.
func (s *Store) checkpointTx(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	now := nowArg(p.Now)
	var res *db.CheckpointResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		inst, err := q.InstanceLockRun(ctx, pgsqlc.InstanceLockRunParams{
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
		if p.ResetLeaseLosses && p.Outcome == db.OutcomeContinue {
			if err := q.TaskResetLeaseLosses(ctx, pgsqlc.TaskResetLeaseLossesParams{ID: p.Task.ID, Version: p.Task.Version}); err != nil {
				return err
			}
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

// checkpointConsume commits a checkpoint that consumes an event in one
// transaction of two round trips on one connection. The first opens it,
// locks the instance and then the task (the fence, in the order every writer
// uses) and marks the oldest undelivered event of the type consumed. The
// consuming step's result is made from that event here (eventStepResult: the
// runner's exact encoding, which SQL cannot reproduce byte for byte). The
// second writes the consuming step, then the other steps and the outcome
// with the statements of a checkpoint that consumes nothing (their own
// fences hold, as this transaction holds the locks), and commits. A failed
// fence rolls back and reports db.ErrLeaseLost. When an event is consumed,
// a write in p.Steps for the consuming step's key is dropped: the step is
// complete with the event.
func (s *Store) checkpointConsume(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	defer conn.Release()
	open := true // until COMMIT was sent: roll back on every other way out
	defer func() {
		if open {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	now := nowArg(p.Now)
	ce := p.ConsumeEvent
	var (
		inst                    pgsqlc.InstanceLockRunRow
		instErr, taskErr, evErr error
		evRow                   pgsqlc.WorkflowEvent
	)
	tolerate := func(err error) error {
		if isNoRows(err) {
			return nil
		}
		return err
	}
	err = sendPipeline(ctx, conn, append([]string{"BEGIN"}, planSettings...), nil,
		func(q *pgsqlc.Queries) error {
			inst, instErr = q.InstanceLockRun(ctx, pgsqlc.InstanceLockRunParams{
				WorkflowName: p.WorkflowName,
				InstanceID:   p.InstanceID,
				RunNumber:    int32(p.RunNumber),
			})
			return tolerate(instErr)
		},
		func(q *pgsqlc.Queries) error {
			_, taskErr = q.TaskLockHeld(ctx, pgsqlc.TaskLockHeldParams{ID: p.Task.ID, Version: p.Task.Version})
			return tolerate(taskErr)
		},
		func(q *pgsqlc.Queries) error {
			evRow, evErr = q.EventConsumeOldest(ctx, eventConsumeOldestParams(p, now))
			return tolerate(evErr)
		})
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	if isNoRows(instErr) || isNoRows(taskErr) || db.InstanceStatus(inst.Status).Terminal() {
		return nil, db.ErrLeaseLost
	}

	rest := *p
	rest.ConsumeEvent = nil
	var (
		steps []pipelineStep
		ev    *db.Event
	)
	if !isNoRows(evErr) {
		ev = eventFromRow(&evRow)
		result, err := eventStepResult(ev)
		if err != nil {
			return nil, err
		}
		complete := stepCompleteWithEventParams(p, result, now)
		steps = append(steps, func(q *pgsqlc.Queries) error { return q.StepCompleteWithEvent(ctx, complete) })
		rest.Steps = slices.DeleteFunc(slices.Clone(p.Steps), func(w db.StepWrite) bool { return w.Key == ce.StepKey })
	}
	var result func() (*db.CheckpointResult, error)
	switch rest.Outcome {
	case db.OutcomeContinue, db.OutcomeComplete, db.OutcomeError:
		step, results, err := batchStatement(ctx, []*db.CheckpointParams{&rest})
		if err != nil {
			return nil, err
		}
		steps = append(steps, step)
		result = func() (*db.CheckpointResult, error) {
			r := results()[0]
			return r.Result, r.Err
		}
	default:
		more, read, err := s.suspendStatements(ctx, &rest)
		if err != nil {
			return nil, err
		}
		steps, result = append(steps, more...), read
	}
	err = sendPipeline(ctx, conn, nil, []string{"COMMIT"}, steps...)
	open = err != nil
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	res, err := result()
	if err != nil {
		// The first round trip's fence held and the locks it took were held
		// until the commit, so no statement's own fence can have failed.
		return nil, fmt.Errorf("checkpointing: the fence held, then failed in its own transaction: %w", err)
	}
	res.Event = ev
	return res, nil
}

// consumeEvent marks the oldest undelivered event of the requested type as
// consumed and completes the waiting step with it; nil when none is buffered.
func consumeEvent(ctx context.Context, q *pgsqlc.Queries, p *db.CheckpointParams, now *time.Time) (*db.Event, error) {
	row, err := q.EventConsumeOldest(ctx, eventConsumeOldestParams(p, now))
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
	if err := q.StepCompleteWithEvent(ctx, stepCompleteWithEventParams(p, result, now)); err != nil {
		return nil, err
	}
	return ev, nil
}

// eventConsumeOldestParams consumes, for p's consuming step, the oldest
// undelivered event of the type it waits for.
func eventConsumeOldestParams(p *db.CheckpointParams, now *time.Time) pgsqlc.EventConsumeOldestParams {
	return pgsqlc.EventConsumeOldestParams{
		Now:          now,
		StepKey:      p.ConsumeEvent.StepKey,
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int32(p.RunNumber),
		Type:         p.ConsumeEvent.Type,
	}
}

// stepCompleteWithEventParams completes p's consuming step with result.
func stepCompleteWithEventParams(p *db.CheckpointParams, result json.RawMessage, now *time.Time) pgsqlc.StepCompleteWithEventParams {
	return pgsqlc.StepCompleteWithEventParams{
		WorkflowName:  p.WorkflowName,
		InstanceID:    p.InstanceID,
		RunNumber:     int32(p.RunNumber),
		StepKey:       p.ConsumeEvent.StepKey,
		WaitEventType: &p.ConsumeEvent.Type,
		Result:        result,
		Now:           now,
	}
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
		res.PauseRequested = pauseRequested // the task and instance rows stay as they are
		return nil

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
