package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
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
	if p.PayloadBudget > 0 {
		rows, err := s.queriesFor(ctx, false).StepListBounded(ctx, litesqlc.StepListBoundedParams{
			PayloadBudget: int64(p.PayloadBudget),
			WorkflowName:  p.WorkflowName,
			InstanceID:    p.InstanceID,
			RunNumber:     int64(p.RunNumber),
			AfterID:       p.AfterID,
			Statuses:      stepStatusesArg(p.Statuses),
			Max:           limitArg(p.Limit),
		})
		if err != nil {
			return nil, fmt.Errorf("listing steps: %w", interpretError(err))
		}
		list := make([]*db.Step, len(rows))
		for i := range rows {
			list[i] = stepFromBoundedRow(&rows[i])
		}
		return list, nil
	}
	rows, err := s.queriesFor(ctx, false).StepList(ctx, litesqlc.StepListParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(p.RunNumber),
		AfterID:      p.AfterID,
		Statuses:     stepStatusesArg(p.Statuses),
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
		var (
			log lifecycleBuf
			err error
		)
		res, err = s.checkpointTx(ctx, q, p, &log)
		if err == nil {
			err = log.flush(ctx, q)
		}
		if err != nil || (p.Outcome != db.OutcomeComplete && p.Outcome != db.OutcomeError) {
			return err
		}
		if p.NotifyParent != nil {
			// A child's run ended: its end goes to its parent in the same
			// transaction.
			if res.ParentWoken, err = s.notifyParent(ctx, q, p.NotifyParent, nowArg(p.Now)); err != nil {
				return err
			}
		}
		if !p.ReleaseLimits {
			return nil
		}
		// A limited instance's run ended: its slots go back in the same
		// transaction, and the oldest waiting instances are admitted.
		ref := db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.InstanceID}
		at := p.Now
		if at.IsZero() {
			at = time.Now()
		}
		admitted, leased, err := admission.Release(ctx, limitTx{q: q, s: s}, ref, at, p.ReleaseLease)
		if err == nil {
			res.Admitted, res.Leased = admitted, leased
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	return res, nil
}

// checkpointTx is one checkpoint inside the caller's write transaction: it
// reads the facts transition.Checkpoint's plan depends on and applies the
// plan. It fences before it writes anything: db.ErrLeaseLost means it wrote
// nothing.
func (s *Store) checkpointTx(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams, log *lifecycleBuf) (*db.CheckpointResult, error) {
	plan, err := transition.Checkpoint(p)
	if err != nil {
		return nil, err
	}
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
	if isNoRows(err) || err == nil && dftype.InstanceStatus(inst.Status).Terminal() {
		return nil, db.ErrLeaseLost
	}
	if err != nil {
		return nil, err
	}

	run := runRef{workflowName: p.WorkflowName, instanceID: p.InstanceID, runNumber: int64(p.RunNumber)}
	var ev *db.Event
	if p.ConsumeEvent != nil {
		if ev, err = consumeEvent(ctx, q, run, p.ConsumeEvent, now); err != nil {
			return nil, err
		}
	}
	steps := transition.Steps(p, ev != nil)
	if err := recordFailedAttempts(ctx, q, p, steps, now); err != nil {
		return nil, err
	}
	if err := retryRun(ctx, q, p); err != nil {
		return nil, err
	}
	for i := range steps {
		if err := q.StepUpsert(ctx, stepUpsertParams(p, &steps[i], now)); err != nil {
			return nil, fmt.Errorf("writing step %q: %w", steps[i].Key, err)
		}
	}
	facts := transition.CheckpointFacts{Status: dftype.InstanceStatus(inst.Status), PauseRequested: inst.PauseRequested != 0}
	if plan.MayBeDue {
		if facts.Due, err = suspendDue(ctx, q, run, &plan.Task, now); err != nil {
			return nil, err
		}
	}
	if plan.Requested != nil && facts.PauseRequested {
		// The pause request may carry a compensation request the run never
		// saw: then the instance is queued instead of parked.
		attempts, err := q.CompensationMarker(ctx, litesqlc.CompensationMarkerParams{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int64(p.RunNumber), StepKey: db.CompensationMarkerKey,
		})
		if err != nil && !isNoRows(err) {
			return nil, err
		}
		facts.CompensationRequested = err == nil && attempts == 0
	}
	status, res := plan.Resolve(facts)
	res.Event = ev
	task, hook := &plan.Task, plan.Hook
	runAt := micros(plan.RunAt(timeFromMicros(now), facts.Due))
	if plan.Compensates(facts) {
		// Queued with its pause request kept, due now as a resume.
		task, hook, runAt = &transition.TaskWrite{
			Op: transition.TaskSchedule, Kind: plan.Requested.Task.Kind, Priority: plan.Requested.Task.Priority,
		}, plan.Requested.Hook, now
		err = q.InstanceTransition(ctx, litesqlc.InstanceTransitionParams{
			Status: string(status), PauseRequested: 1, Now: now, WorkflowName: p.WorkflowName, InstanceID: p.InstanceID,
		})
	} else {
		err = endOrSetStatus(ctx, q, p, status, now)
	}
	if err != nil {
		return nil, err
	}
	if err := applyTask(ctx, q, run, p.Task, task, runAt, now); err != nil {
		return nil, err
	}
	s.bufferLifecycle(log, now, transition.CheckpointEvents(p, steps, ev != nil)...)
	return res, recordHook(ctx, q, hook, p.WorkflowName, p.InstanceID, now)
}

// suspendDue reads whether a suspended task is due at once (see
// transition.TaskWrite.Due), comparing times as they are stored.
func suspendDue(ctx context.Context, q *litesqlc.Queries, run runRef, w *transition.TaskWrite, now int64) (bool, error) {
	buffered := int64(0)
	if len(w.DueOnEvents) > 0 {
		var err error
		buffered, err = q.EventBuffered(ctx, litesqlc.EventBufferedParams{
			WorkflowName: run.workflowName,
			InstanceID:   run.instanceID,
			RunNumber:    run.runNumber,
			Types:        listArg(w.DueOnEvents),
		})
		if err != nil {
			return false, err
		}
	}
	stored := *w
	stored.RunAt = timeFromMicros(micros(w.RunAt))
	return stored.Due(timeFromMicros(now), buffered != 0), nil
}

// endOrSetStatus writes the status a checkpoint resolved to: a run that
// ends with its output or error, any other status as it is; "" writes
// nothing.
func endOrSetStatus(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams, status dftype.InstanceStatus, now int64) error {
	switch status {
	case "":
		return nil
	case dftype.StatusComplete:
		return q.InstanceComplete(ctx, litesqlc.InstanceCompleteParams{
			Output:       jsonArg(p.Output),
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		})
	case dftype.StatusErrored:
		return q.InstanceFail(ctx, litesqlc.InstanceFailParams{
			ErrorName:    textArg(p.ErrorName),
			ErrorMessage: textArg(p.ErrorMessage),
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		})
	}
	return q.InstanceTransition(ctx, litesqlc.InstanceTransitionParams{
		Status:       string(status),
		Now:          now,
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
	})
}

// runRef names one run of an instance.
type runRef struct {
	workflowName, instanceID string
	runNumber                int64
	// queue and priority are the instance's, written on a task a requeue
	// inserts.
	queue    string
	priority int64
}

// applyTask applies a transition's write to the run's task: held names
// the held task (a checkpoint's) and runAt is when a scheduled task is due.
func applyTask(ctx context.Context, q *litesqlc.Queries, run runRef, held db.TaskRef, w *transition.TaskWrite, runAt, now int64) error {
	switch w.Op {
	case transition.TaskKeep:
		if !w.ResetLeaseLosses {
			return nil
		}
		return q.TaskResetLeaseLosses(ctx, litesqlc.TaskResetLeaseLossesParams{ID: held.ID, Version: held.Version})
	case transition.TaskSchedule:
		return q.TaskSchedule(ctx, litesqlc.TaskScheduleParams{
			RunAt:    runAt,
			Kind:     string(w.Kind),
			Priority: int64(w.Priority),
			ID:       held.ID,
		})
	case transition.TaskDelete:
		return q.TaskDelete(ctx, litesqlc.TaskDeleteParams{WorkflowName: run.workflowName, InstanceID: run.instanceID})
	case transition.TaskRequeue:
		if err := q.TaskUpsertDue(ctx, litesqlc.TaskUpsertDueParams{
			WorkflowName: run.workflowName,
			InstanceID:   run.instanceID,
			RunNumber:    run.runNumber,
			Kind:         string(w.Kind),
			Priority:     int64(w.Priority),
			Now:          now,

			Queue:            run.queue,
			InstancePriority: run.priority,
		}); err != nil || !w.ResetAttempts {
			return err
		}
		return q.TaskResetAttempts(ctx, litesqlc.TaskResetAttemptsParams{
			WorkflowName: run.workflowName,
			InstanceID:   run.instanceID,
		})
	}
	return fmt.Errorf("task write %d is not applied here", w.Op)
}

// consumeEvent marks the oldest undelivered event of the requested type as
// consumed and completes the waiting step with it; nil when none is buffered.
func consumeEvent(ctx context.Context, q *litesqlc.Queries, run runRef, ce *db.ConsumeEvent, now int64) (*db.Event, error) {
	row, err := q.EventConsumeOldest(ctx, litesqlc.EventConsumeOldestParams{
		Now:          now,
		StepKey:      ce.StepKey,
		WorkflowName: run.workflowName,
		InstanceID:   run.instanceID,
		RunNumber:    run.runNumber,
		Type:         ce.Type,
	})
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ev := eventFromRow(&row)
	result, err := transition.EventStepResult(ev)
	if err != nil {
		return nil, err
	}
	if err := q.StepCompleteWithEvent(ctx, litesqlc.StepCompleteWithEventParams{
		WorkflowName:  run.workflowName,
		InstanceID:    run.instanceID,
		RunNumber:     run.runNumber,
		StepKey:       ce.StepKey,
		WaitEventType: &ce.Type,
		StepType:      string(db.StepTypeOrWait(ce.StepType)),
		Result:        jsonArg(result),
		Now:           now,
	}); err != nil {
		return nil, err
	}
	return ev, nil
}

func stepUpsertParams(p *db.CheckpointParams, w *db.StepWrite, now int64) litesqlc.StepUpsertParams {
	return litesqlc.StepUpsertParams{
		WorkflowName:  p.WorkflowName,
		InstanceID:    p.InstanceID,
		RunNumber:     int64(p.RunNumber),
		StepKey:       w.Key,
		Type:          string(w.Type),
		Status:        string(w.Status),
		Attempts:      int64(db.StoredAttempts(w.Attempts)),
		MaxAttempts:   int64(db.StoredMaxAttempts(w.MaxAttempts)),
		TimeoutMs:     w.Timeout.Milliseconds(),
		NextRetryAt:   microsPtr(w.NextRetryAt),
		WakeAt:        microsPtr(w.WakeAt),
		WaitEventType: textArg(w.WaitEventType),
		Result:        jsonArg(w.Result),
		ErrorName:     textArg(w.ErrorName),
		ErrorMessage:  textArg(w.ErrorMessage),
		Now:           now,
		StartedAt:     microsPtr(w.StartedAt),
	}
}

// recordFailedAttempts keeps the failed attempts among steps as rows of
// their own (StepAttemptRecord); a checkpoint without one runs nothing.
func recordFailedAttempts(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams, steps []db.StepWrite, now int64) error {
	for i := range steps {
		w := &steps[i]
		if !w.RecordsFailedAttempt() {
			continue
		}
		if err := q.StepAttemptRecord(ctx, litesqlc.StepAttemptRecordParams{
			RunNumber:    int64(p.RunNumber),
			StepKey:      w.Key,
			Attempt:      int64(db.StoredAttempts(w.Attempts)),
			StartedAt:    microsPtr(w.StartedAt),
			Now:          now,
			ErrorName:    textArg(w.ErrorName),
			ErrorMessage: textArg(w.ErrorMessage),
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		}); err != nil {
			return fmt.Errorf("recording attempt %d of step %q: %w", w.Attempts, w.Key, err)
		}
	}
	return nil
}

// retryRun applies a workflow retry's RunRetry (only a suspend carries
// one): the next run attempt, and the failed steps' rows deleted.
func retryRun(ctx context.Context, q *litesqlc.Queries, p *db.CheckpointParams) error {
	r := p.RetryRun
	if r == nil || p.Outcome != db.OutcomeSuspend {
		return nil
	}
	if err := q.InstanceRetryRun(ctx, litesqlc.InstanceRetryRunParams{
		ErrorName:    textArg(r.ErrorName),
		ErrorMessage: textArg(r.ErrorMessage),
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(p.RunNumber),
	}); err != nil {
		return err
	}
	for _, key := range r.ResetSteps {
		if err := q.StepDelete(ctx, litesqlc.StepDeleteParams{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int64(p.RunNumber), StepKey: key,
		}); err != nil {
			return err
		}
	}
	return nil
}

// StepAttemptList returns the failed attempts of one run's steps, oldest
// first.
func (s *Store) StepAttemptList(ctx context.Context, p *db.StepAttemptListParams) ([]*db.StepAttempt, error) {
	rows, err := s.queriesFor(ctx, false).StepAttemptList(ctx, litesqlc.StepAttemptListParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(p.RunNumber),
	})
	if err != nil {
		return nil, fmt.Errorf("listing step attempts: %w", interpretError(err))
	}
	keep := map[string]bool{}
	for _, k := range p.StepKeys {
		keep[k] = true
	}
	list := make([]*db.StepAttempt, 0, len(rows))
	for i := range rows {
		if len(keep) == 0 || keep[rows[i].StepKey] {
			list = append(list, stepAttemptFromRow(&rows[i]))
		}
	}
	return list, nil
}

// CheckpointBatch commits a group of batchable checkpoints (Continue,
// Complete, Error) in one write transaction: the embedded database has one
// writer, so a group costs one commit instead of one per step. Each item is
// fenced before it writes anything; an item whose lease was lost reports
// db.ErrLeaseLost and changes nothing. The limited instances the batch ends
// (ReleaseLimits) give their slots back after every item is written, in
// the same transaction (admission.ReleaseMany); a fenced-out item releases
// nothing.
func (s *Store) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	results := make([]db.CheckpointBatchResult, len(ps))
	for _, p := range ps {
		if !p.Batchable() {
			return nil, db.ErrNotBatchable
		}
	}
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var (
			release []admission.ReleaseItem
			index   []int
			at      time.Time
			log     lifecycleBuf
		)
		for i, p := range ps {
			res, err := s.checkpointTx(ctx, q, p, &log)
			if errors.Is(err, db.ErrLeaseLost) {
				// Fenced before any write: this item changed nothing.
				results[i] = db.CheckpointBatchResult{Err: db.ErrLeaseLost}
				continue
			}
			if err != nil {
				return err
			}
			results[i] = db.CheckpointBatchResult{Result: res}
			if p.ReleaseLimits && (p.Outcome == db.OutcomeComplete || p.Outcome == db.OutcomeError) {
				release = append(release, admission.ReleaseItem{
					Ref:   db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.InstanceID},
					Lease: p.ReleaseLease,
				})
				index = append(index, i)
				if p.Now.After(at) {
					at = p.Now
				}
			}
		}
		// Every item's lifecycle events, written together.
		if err := log.flush(ctx, q); err != nil {
			return err
		}
		if len(release) == 0 {
			return nil
		}
		// The limited instances the batch ended give their slots back in
		// the same transaction, all at once.
		if at.IsZero() {
			at = time.Now()
		}
		rel, err := admission.ReleaseMany(ctx, limitTx{q: q, s: s}, release, at)
		if err != nil {
			return err
		}
		results[index[0]].Result.Admitted = rel.Admitted
		for j, i := range index {
			results[i].Result.Leased = rel.Leased[j]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	return results, nil
}

// stepStatusesArg is the statuses filter of StepList, a JSON array: nil
// for every status.
func stepStatusesArg(list []db.StepStatus) *string {
	if len(list) == 0 {
		return nil
	}
	arg := listArg(list)
	return &arg
}
