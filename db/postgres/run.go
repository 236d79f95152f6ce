package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
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
	if p.PayloadBudget > 0 {
		rows, err := s.queries.StepListBounded(ctx, pgsqlc.StepListBoundedParams{
			PayloadBudget: int64(p.PayloadBudget),
			WorkflowName:  p.WorkflowName,
			InstanceID:    p.InstanceID,
			RunNumber:     int32(p.RunNumber),
			AfterID:       p.AfterID,
			Statuses:      stepStatusesArg(p.Statuses),
			Max:           boundedLimit(p.Limit),
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
	rows, err := s.queries.StepList(ctx, pgsqlc.StepListParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int32(p.RunNumber),
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

// Checkpoint applies transition.Checkpoint's plan, fenced by p.Task, in one
// pipelined round trip, or two when an event is consumed
// (checkpointConsume). It returns db.ErrLeaseLost, having changed nothing,
// when the run was restarted or ended, or the task version moved on. Every
// path locks the instance first and the task second, the order every
// writer uses. A nil p.Now is the database clock.
func (s *Store) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	switch {
	case (p.ReleaseLimits || p.NotifyParent != nil) && p.ConsumeEvent == nil && (p.Outcome == db.OutcomeComplete || p.Outcome == db.OutcomeError):
		return s.checkpointRelease(ctx, p)
	case p.ConsumeEvent != nil:
		return s.checkpointConsume(ctx, p)
	case p.Batchable():
		// A group commit of one, without building a pipeline of its own.
		results, err := s.CheckpointBatch(ctx, []*db.CheckpointParams{p})
		if err != nil {
			return nil, err
		}
		return results[0].Result, results[0].Err
	}
	steps, result, prelude, err := s.checkpointStatements(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := s.pipeline(ctx, prelude, nil, steps...); err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	return result()
}

// checkpointStatements returns the statements that apply the plan of a
// checkpoint that consumes no event, as pipeline steps to run behind
// prelude, and what reads its result once the pipeline ran: db.ErrLeaseLost
// when the fence failed.
//
// A checkpoint that continues or ends its run is a group commit of one (see
// CheckpointBatch), followed, when the plan resets the task's lease losses,
// by TaskResetLeaseLosses, which is fenced by the task's version like the
// group commit. A suspend or park is CheckpointFence, which locks and checks,
// then the step rows and the outcome, each guarded by the task check again
// (see CheckpointFence in batch.sql).
func (s *Store) checkpointStatements(ctx context.Context, p *db.CheckpointParams) ([]pipelineStep, func() (*db.CheckpointResult, error), []string, error) {
	plan, err := transition.Checkpoint(p)
	if err != nil {
		return nil, nil, nil, err
	}
	if plan.Task.Op != transition.TaskSchedule {
		item := p
		if p.ResetLeaseLosses {
			rest := *p
			rest.ResetLeaseLosses = false
			item = &rest
		}
		step, results, err := batchStatement(ctx, []*db.CheckpointParams{item}, true, s.logging())
		if err != nil {
			return nil, nil, nil, err
		}
		steps := []pipelineStep{step}
		if rec := failedAttemptsStep(ctx, p); rec != nil {
			steps = []pipelineStep{rec, step}
		}
		if plan.Task.ResetLeaseLosses {
			ref := pgsqlc.TaskResetLeaseLossesParams{ID: p.Task.ID, Version: p.Task.Version}
			steps = append(steps, func(q *pgsqlc.Queries) error { return q.TaskResetLeaseLosses(ctx, ref) })
		}
		return steps, func() (*db.CheckpointResult, error) {
			r := results()[0]
			return r.Result, r.Err
		}, planSettings, nil
	}
	steps, result := s.suspendStatements(ctx, p, &plan)
	return steps, result, nil, nil
}

// suspendStatements returns the statements of a Suspend or Park checkpoint
// without an event to consume, as pipeline steps, and what reads its result
// once the pipeline ran: db.ErrLeaseLost when the fence failed. The plan's
// statuses are bound as parameters: the statement picks the one the
// instance's pause request selects.
func (s *Store) suspendStatements(ctx context.Context, p *db.CheckpointParams, plan *transition.CheckpointPlan) ([]pipelineStep, func() (*db.CheckpointResult, error)) {
	now := nowArg(p.Now)
	held := false
	var facts transition.CheckpointFacts
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
		facts.Status, facts.PauseRequested = dftype.InstanceStatus(row.Status), row.PauseRequested
		return err
	}}
	if rec := failedAttemptsStep(ctx, p); rec != nil {
		steps = append(steps, rec)
	}
	if r := p.RetryRun; r != nil && p.Outcome == db.OutcomeSuspend {
		// A workflow retry (rare): the next run attempt, before the step
		// rows (a reset step's row is deleted, then nothing rewrites it).
		retry := pgsqlc.InstanceRetryRunParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int32(p.RunNumber),
			ResetSteps:   emptyIfNil(r.ResetSteps),
			ErrorName:    r.ErrorName,
			ErrorMessage: r.ErrorMessage,
			TaskID:       p.Task.ID,
			Version:      p.Task.Version,
		}
		steps = append(steps, func(q *pgsqlc.Queries) error { return q.InstanceRetryRun(ctx, retry) })
	}
	if len(p.Steps) > 0 {
		w := checkpointStepsParams(p, now)
		steps = append(steps, func(q *pgsqlc.Queries) error { return q.CheckpointSteps(ctx, w) })
	}
	if log := s.heldLifecycleStep(ctx, p.Task, now, transition.CheckpointEvents(p, p.Steps, false)); log != nil {
		// Before the outcome's statement, while the task is still processing.
		steps = append(steps, log)
	}
	task, req := &plan.Task, plan.Requested
	if plan.MayBeDue {
		steps = append(steps, func(q *pgsqlc.Queries) error {
			row, err := q.CheckpointSuspend(ctx, pgsqlc.CheckpointSuspendParams{
				Channel:                s.wakeChannel,
				WorkflowName:           p.WorkflowName,
				NextRunAt:              task.RunAt,
				Now:                    now,
				InstanceID:             p.InstanceID,
				RunNumber:              int32(p.RunNumber),
				Types:                  emptyIfNil(task.DueOnEvents),
				Kind:                   string(task.Kind),
				Priority:               int16(task.Priority),
				TaskID:                 p.Task.ID,
				Version:                p.Task.Version,
				StatusIfPauseRequested: string(plan.StatusIfPauseRequested),
				Status:                 string(plan.Status),
				Reason:                 string(plan.Hook.Reason),
				RecordHook:             plan.Hook.Record(),
				MarkerKey:              db.CompensationMarkerKey,
				RequestedStatus:        string(req.Status),
				RequestedKind:          string(req.Task.Kind),
				RequestedPriority:      int16(req.Task.Priority),
				RequestedReason:        string(req.Hook.Reason),
			})
			if isNoRows(err) {
				held = false
				return nil
			}
			facts.Due, facts.CompensationRequested = row.Due, row.Compensate
			return err
		})
	} else {
		steps = append(steps, func(q *pgsqlc.Queries) error {
			row, err := q.CheckpointPark(ctx, pgsqlc.CheckpointParkParams{
				Channel:           s.wakeChannel,
				WorkflowName:      p.WorkflowName,
				InstanceID:        p.InstanceID,
				RunNumber:         int32(p.RunNumber),
				Now:               now,
				RunAt:             task.RunAt,
				Kind:              string(task.Kind),
				Priority:          int16(task.Priority),
				TaskID:            p.Task.ID,
				Version:           p.Task.Version,
				Status:            string(plan.Status),
				MarkerKey:         db.CompensationMarkerKey,
				RequestedStatus:   string(req.Status),
				RequestedKind:     string(req.Task.Kind),
				RequestedPriority: int16(req.Task.Priority),
				RequestedReason:   string(req.Hook.Reason),
			})
			if isNoRows(err) {
				held = false
				return nil
			}
			facts.CompensationRequested = row.Compensate
			return err
		})
	}
	return steps, func() (*db.CheckpointResult, error) {
		if !held {
			return nil, db.ErrLeaseLost
		}
		_, res := plan.Resolve(facts)
		return res, nil
	}
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
		w.Attempts = append(w.Attempts, int32(db.StoredAttempts(st.Attempts)))
		w.MaxAttempts = append(w.MaxAttempts, int32(db.StoredMaxAttempts(st.MaxAttempts)))
		w.TimeoutsMs = append(w.TimeoutsMs, st.Timeout.Milliseconds())
		w.NextRetryAt = append(w.NextRetryAt, timeOrZero(st.NextRetryAt))
		w.WakeAt = append(w.WakeAt, timeOrZero(st.WakeAt))
		w.WaitEventTypes = append(w.WaitEventTypes, st.WaitEventType)
		w.Results = append(w.Results, string(st.Result))
		w.ErrorNames = append(w.ErrorNames, st.ErrorName)
		w.ErrorMessages = append(w.ErrorMessages, st.ErrorMessage)
		w.StartedAt = append(w.StartedAt, timeOrZero(st.StartedAt))
	}
	return w
}

// failedAttemptsStep is the statement that keeps p's failed attempts
// (StepAttemptsRecord), or nil when p has none: the common checkpoint runs
// no statement more. It fences on its own, instance then task, so it may go
// first in the pipeline, before a statement that deletes the task.
func failedAttemptsStep(ctx context.Context, p *db.CheckpointParams) pipelineStep {
	var w *pgsqlc.StepAttemptsRecordParams
	for i := range p.Steps {
		st := &p.Steps[i]
		if !st.RecordsFailedAttempt() {
			continue
		}
		if w == nil {
			w = &pgsqlc.StepAttemptsRecordParams{
				WorkflowName: p.WorkflowName,
				InstanceID:   p.InstanceID,
				RunNumber:    int32(p.RunNumber),
				Now:          nowArg(p.Now),
				TaskID:       p.Task.ID,
				Version:      p.Task.Version,
			}
		}
		w.StepKeys = append(w.StepKeys, st.Key)
		w.Attempts = append(w.Attempts, int32(db.StoredAttempts(st.Attempts)))
		w.StartedAt = append(w.StartedAt, timeOrZero(st.StartedAt))
		w.ErrorNames = append(w.ErrorNames, st.ErrorName)
		w.ErrorMessages = append(w.ErrorMessages, st.ErrorMessage)
	}
	if w == nil {
		return nil
	}
	return func(q *pgsqlc.Queries) error { return q.StepAttemptsRecord(ctx, *w) }
}

// StepAttemptList returns the failed attempts of one run's steps, oldest
// first.
func (s *Store) StepAttemptList(ctx context.Context, p *db.StepAttemptListParams) ([]*db.StepAttempt, error) {
	rows, err := s.queries.StepAttemptList(ctx, pgsqlc.StepAttemptListParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int32(p.RunNumber),
		StepKeys:     emptyIfNil(p.StepKeys),
	})
	if err != nil {
		return nil, fmt.Errorf("listing step attempts: %w", interpretError(err))
	}
	list := make([]*db.StepAttempt, len(rows))
	for i := range rows {
		list[i] = stepAttemptFromRow(&rows[i])
	}
	return list, nil
}

// emptyIfNil keeps a nil slice from being sent as a NULL array.
func emptyIfNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkpointConsume commits a checkpoint that consumes an event in one
// transaction of two round trips on one connection. The first opens it,
// locks the instance and then the task (the fence, in the order every writer
// uses) and marks the oldest undelivered event of the type consumed. The
// consuming step's result is made from that event here
// (transition.EventStepResult: the runner's exact encoding, which SQL cannot reproduce byte for byte). The
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
	if isNoRows(instErr) || isNoRows(taskErr) || dftype.InstanceStatus(inst.Status).Terminal() {
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
		result, err := transition.EventStepResult(ev)
		if err != nil {
			return nil, err
		}
		complete := stepCompleteWithEventParams(p, result, now)
		steps = append(steps, func(q *pgsqlc.Queries) error { return q.StepCompleteWithEvent(ctx, complete) })
		rest.Steps = transition.Steps(p, true)
		consumed := &db.CheckpointParams{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: p.RunNumber, Now: p.Now,
			ConsumeEvent: p.ConsumeEvent, Outcome: db.OutcomeContinue,
		}
		if log := s.heldLifecycleStep(ctx, p.Task, now, transition.CheckpointEvents(consumed, nil, true)); log != nil {
			steps = append(steps, log)
		}
	}
	// The settings the first round trip made hold for the transaction.
	more, result, _, err := s.checkpointStatements(ctx, &rest)
	if err != nil {
		return nil, err
	}
	steps = append(steps, more...)
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
		StepType:      string(db.StepTypeOrWait(p.ConsumeEvent.StepType)),
		Result:        result,
		Now:           now,
	}
}

// checkpointRelease commits a checkpoint that ends a limited instance's
// run, and gives its slots back (admitting the oldest waiting instances of
// its scopes, package admission), in one transaction on one connection:
// the checkpoint's own pipeline first, then the release once its fence
// held.
func (s *Store) checkpointRelease(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	rest := *p
	rest.ReleaseLimits, rest.NotifyParent = false, nil
	steps, result, prelude, err := s.checkpointStatements(ctx, &rest)
	if err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	defer conn.Release()
	open := true
	defer func() {
		if open {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	matches := false
	if n := p.NotifyParent; n != nil {
		// The parent is locked before the child (see InstanceLockParent);
		// the child's end goes only to the parent step its columns name.
		lock := pgsqlc.InstanceLockParentParams{WorkflowName: n.WorkflowName, InstanceID: n.InstanceID}
		check := parentMatchesArg(n)
		steps = append([]pipelineStep{
			func(q *pgsqlc.Queries) error { return q.InstanceLockParent(ctx, lock) },
			func(q *pgsqlc.Queries) error {
				var err error
				matches, err = q.InstanceParentMatches(ctx, check)
				return err
			},
		}, steps...)
	}
	if err := sendPipeline(ctx, conn, append([]string{"BEGIN"}, prelude...), nil, steps...); err != nil {
		return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
	}
	res, err := result()
	if err != nil {
		return nil, err
	}
	notify := p.NotifyParent != nil && matches
	commit := []string{"COMMIT"}
	if notify {
		commit = nil
	}
	if p.ReleaseLimits {
		// The release's writes go behind its reads, and the last ones with
		// the COMMIT, in pipelines on the transaction's connection.
		tx := &limitTx{q: pgsqlc.New(conn), channel: s.wakeChannel, sender: conn, logStarted: s.logging()}
		ref := db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.InstanceID}
		admitted, leased, err := admission.Release(ctx, tx, ref, limitNow(nowArg(p.Now)), p.ReleaseLease)
		if err != nil {
			return nil, fmt.Errorf("checkpointing: releasing limits: %w", interpretError(err))
		}
		if err := tx.flush(ctx, commit); err != nil {
			return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
		}
		res.Admitted, res.Leased = admitted, leased
	} else if !notify {
		// A notify whose target is not the child's parent step sends
		// nothing: the checkpoint commits on its own.
		if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
			return nil, fmt.Errorf("checkpointing: %w", interpretError(err))
		}
	}
	if n := p.NotifyParent; notify {
		// The child's end goes to its parent as an event send in the same
		// transaction, committed with it (checkpointNotifyParent).
		woken, err := s.notifyParent(ctx, conn, n, nowArg(p.Now))
		if err != nil {
			return nil, fmt.Errorf("checkpointing: notifying the parent: %w", interpretError(err))
		}
		res.ParentWoken = woken
	}
	open = false
	return res, nil
}

// stepStatusesArg is the statuses filter of StepList: nil for every status.
func stepStatusesArg(list []db.StepStatus) []string {
	if len(list) == 0 {
		return nil
	}
	out := make([]string, len(list))
	for i, st := range list {
		out[i] = string(st)
	}
	return out
}
