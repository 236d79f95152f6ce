package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// step is the workflow.Step the runner hands to workflow code.
type step struct{ e *execution }

var _ workflow.Step = (*step)(nil)

var errAttemptTimeout = errors.New("attempt timeout")

// timeoutError is the failure of an attempt that outlived its timeout.
type timeoutError struct {
	attempt int
	timeout time.Duration
}

func (t *timeoutError) Error() string {
	return fmt.Sprintf("attempt %d timed out after %s", t.attempt, t.timeout)
}

func (t *timeoutError) ErrorName() string { return workflow.ErrorNameStepTimeout }

// Do implements workflow.Step.
func (s *step) Do(name string, fn workflow.StepFunc, opts ...workflow.StepOption) (json.RawMessage, error) {
	key, err := wfcore.NormalizeStepName(name)
	if err != nil {
		return nil, err
	}
	cfg := wfcore.NewStepConfig(opts...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkUserStep(key, &cfg); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: step %q has no function", workflow.ErrInvalidRequest, key)
	}
	if err := s.e.useName(key); err != nil {
		return nil, err
	}
	return s.do(key, fn, cfg, false)
}

// do runs the Do step key; compensation is set for the compensation steps
// the runner runs itself (see compensate).
func (s *step) do(key string, fn workflow.StepFunc, cfg workflow.StepConfig, compensation bool) (json.RawMessage, error) {
	e := s.e
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, workflow.ErrSuspended
	}
	if e.active[key] {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", workflow.ErrDuplicateStep, key)
	}
	if err := e.countLocked(key); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	attempt := 1
	if st := e.steps[key]; st != nil {
		if st.Type != db.StepTypeDo {
			e.mu.Unlock()
			return nil, mismatch(key, st.Type, db.StepTypeDo)
		}
		switch st.Status {
		case db.StepStatusComplete:
			res := st.Result
			e.registerCompensationLocked(st, &cfg, true)
			e.mu.Unlock()
			return res, nil
		case db.StepStatusErrored:
			e.mu.Unlock()
			return nil, stepError(st)
		case db.StepStatusRetrying:
			if !compensation && e.sagaStopsRunLocked() {
				return nil, e.stopForSagaLocked()
			}
			attempt = st.Attempts + 1
			if st.NextRetryAt != nil && st.NextRetryAt.After(e.r.now()) {
				return nil, e.blockLocked(&wait{at: *st.NextRetryAt, kind: db.TaskKindRetry}, nil)
			}
		}
	}
	if !compensation && e.sagaStopsRunLocked() {
		return nil, e.stopForSagaLocked()
	}
	if compensation {
		// A pause request while compensating may be a compensation
		// request, which the compensations already fulfil.
		e.takeRequestAtBoundaryLocked()
	}
	if e.park || e.blocked > 0 {
		// A step boundary while the run is about to suspend or park: start
		// nothing new.
		return nil, e.blockLocked(nil, nil)
	}
	if e.budget != nil && e.budget.Add(-1) < 0 {
		// The caller's step budget is spent: yield, due again at once.
		return nil, e.blockLocked(&wait{at: e.r.now(), kind: db.TaskKindResume}, nil)
	}
	if e.lossLimit {
		// This is the step the runners that lost the lease were running (the
		// first the run starts again): stop the loop here.
		e.mu.Unlock()
		msg := fmt.Sprintf("step %q lost its runner %d times", key, e.leaseLosses)
		e.log.Error("ending a crash loop", "step", key, "lease_losses", e.leaseLosses)
		e.finish(&db.CheckpointParams{
			Outcome: db.OutcomeError, ErrorName: ErrorNameRunnerLost, ErrorMessage: msg,
			Steps: []db.StepWrite{{
				Key: key, Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: attempt,
				MaxAttempts: cfg.Retries.MaxAttempts(), Timeout: cfg.Timeout,
				ErrorName: ErrorNameRunnerLost, ErrorMessage: msg,
			}},
		})
		return nil, workflow.ErrSuspended
	}
	started := e.r.now()
	e.active[key] = true
	e.inflight++
	e.running[key] = db.RunningStep{Key: key, Attempt: attempt, StartedAt: started}
	e.mu.Unlock()

	if override := e.r.cfg.StepOverrideFunc; override != nil {
		if mock := override(e.inst.WorkflowName, key); mock != nil {
			fn = mock
		}
	}
	span := e.startStepSpan(key, db.StepTypeDo, attempt)
	raw, runErr, aborted := e.attempt(key, fn, cfg, attempt, span)
	if !aborted {
		if e.r.observing {
			e.r.cfg.Observer.ObserveStep(e.inst.WorkflowName, e.r.now().Sub(started))
		}
		endStepSpan(span, runErr)
	} else if span != nil {
		span.AddEvent("aborted")
		span.End()
	}
	e.mu.Lock()
	delete(e.running, key)
	if aborted || (!compensation && e.saga.running) {
		// A step of workflow code still running when the compensations
		// started records nothing: it was not among the steps they undo.
		e.endLocked(key, true)
		return nil, workflow.ErrSuspended
	}
	e.mu.Unlock()
	policy := *cfg.Retries
	write := db.StepWrite{
		Key: key, Type: db.StepTypeDo, Attempts: attempt, MaxAttempts: policy.MaxAttempts(), Timeout: cfg.Timeout,
		StartedAt: &started,
	}
	if runErr == nil {
		write.Status, write.Result = db.StepStatusComplete, raw
		if err := e.commitStep(key, write); err != nil {
			return nil, err
		}
		e.registerCommitted(key, &cfg)
		return raw, nil
	}
	write.ErrorName, write.ErrorMessage = workflow.ErrorName(runErr), runErr.Error()
	if workflow.IsNonRetryable(runErr) || policy.IsNonRetryable(write.ErrorName) || policy.Exhausted(attempt) {
		write.Status = db.StepStatusErrored
		e.log.Warn("step failed", "step", key, "attempt", attempt, "max_attempts", policy.MaxAttempts(),
			"error_name", write.ErrorName, "error", write.ErrorMessage)
		if err := e.commitStep(key, write); err != nil {
			return nil, err
		}
		return nil, stepError(stepFromWrite(write))
	}
	// The jittered wait is drawn once and recorded (next_retry_at): replay
	// reads it, never draws again.
	next := e.r.now().Add(policy.NextDelay(attempt, e.r.jitter()))
	write.Status, write.NextRetryAt = db.StepStatusRetrying, &next
	e.log.Warn("step attempt failed; retrying", "step", key, "attempt", attempt, "max_attempts", policy.MaxAttempts(),
		"next_attempt_at", next, "error_name", write.ErrorName, "error", write.ErrorMessage)
	if ro, ok := e.r.cfg.Observer.(RetryObserver); ok {
		ro.ObserveRetry(e.inst.WorkflowName)
	}
	e.mu.Lock()
	e.endLocked(key, false)
	return nil, e.blockLocked(&wait{at: next, kind: db.TaskKindRetry}, &write)
}

// attempt runs one attempt of fn under its timeout. aborted is true when the
// execution was cancelled (suspended elsewhere, lease lost, shutdown), in
// which case nothing may be recorded.
func (e *execution) attempt(key string, fn workflow.StepFunc, cfg workflow.StepConfig, attempt int, span trace.Span) (json.RawMessage, error, bool) {
	base := e.stepCtx
	if span != nil {
		// The step's function (and what it starts: spans, requests, child
		// workflows) runs under its attempt's span.
		base = trace.ContextWithSpan(base, span)
	}
	actx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	timer := e.r.cfg.Clock.AfterFunc(cfg.Timeout, func() { cancel(errAttemptTimeout) })
	defer timer.Stop()
	info := workflow.StepInfo{
		WorkflowName: e.inst.WorkflowName, InstanceID: e.inst.ID, RunNumber: e.inst.RunNumber,
		Step: key, Attempt: attempt,
	}
	if d := e.inst.DeadlineAt; d != nil {
		// The instance's deadline cancels the attempt (e.stepCtx, on the
		// runner's clock, so a fake clock moves it too) with cause
		// ErrDeadlineExceeded; the run then errors (see execution.run).
		info.Deadline = *d
	}
	type result struct {
		raw     json.RawMessage
		err     error
		aborted bool
	}
	ch := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			if p := recover(); p != nil {
				res = result{err: &panicError{value: p, stack: string(debug.Stack())}}
			}
			ch <- res
		}()
		// The last thing before the callback, on its goroutine: the runner
		// must still hold the instance, by its own clock.
		startedAt, ok := e.mayStart(key)
		if !ok {
			res.aborted = true
			return
		}
		info.StartedAt = startedAt
		v, err := fn(wfcore.ContextWithStepInfo(actx, info))
		if err != nil {
			res.err = err
			return
		}
		// A result that cannot be stored (too large, too deep, not portable
		// JSON, not encodable) would be refused again on every attempt.
		if res.raw, res.err = e.r.cfg.EngineLimits.MarshalPayload(fmt.Sprintf("result of step %q", key), v); res.err != nil {
			res.err = workflow.NonRetryable(res.err)
		}
	}()
	select {
	case res := <-ch:
		return res.raw, res.err, res.aborted
	case <-actx.Done():
		if errors.Is(context.Cause(actx), errAttemptTimeout) && e.ctx.Err() == nil {
			// The attempt outlived its timeout. Its goroutine may still
			// finish, but its late result is dropped with ch.
			return nil, &timeoutError{attempt: attempt, timeout: cfg.Timeout}, false
		}
		return nil, nil, true
	}
}

// commitStep commits one step row in a checkpoint that keeps the run going,
// updates the cache and ends the step's in-flight work. It returns
// ErrSuspended when the run can no longer commit. When the store refuses
// the row (db.ErrInvalidData: a result the database cannot hold), the step
// fails for good instead: it is recorded errored with ErrorNameStoreRefused
// and commitStep returns its StepError, as replay will.
func (e *execution) commitStep(key string, w db.StepWrite) error {
	e.commitMu.Lock()
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	var res *db.CheckpointResult
	var err error
	var refused error
	if !closed {
		res, err = e.checkpoint(&db.CheckpointParams{Outcome: db.OutcomeContinue, Steps: []db.StepWrite{w}})
		if errors.Is(err, db.ErrInvalidData) {
			w = refusedStep(w, err)
			refused = stepError(stepFromWrite(w))
			res, err = e.checkpoint(&db.CheckpointParams{Outcome: db.OutcomeContinue, Steps: []db.StepWrite{w}})
			if errors.Is(err, db.ErrInvalidData) {
				e.cancel(fmt.Errorf("%w: %w", errCauseStore, err))
			}
		}
	}
	e.commitMu.Unlock()
	e.mu.Lock()
	if closed || err != nil {
		e.endLocked(key, true)
		return workflow.ErrSuspended
	}
	e.steps[key] = stepFromWrite(w)
	if res.PauseRequested {
		e.park = true
	}
	e.endLocked(key, true)
	return refused
}

// refusedStep is the errored row that replaces a step row w the store
// refused with err.
func refusedStep(w db.StepWrite, err error) db.StepWrite {
	what := "storing the step"
	if w.Status == db.StepStatusComplete && w.Type == db.StepTypeDo {
		what = "storing its result"
	}
	return db.StepWrite{
		Key: w.Key, Type: w.Type, Status: db.StepStatusErrored, Attempts: w.Attempts,
		MaxAttempts: w.MaxAttempts, Timeout: w.Timeout, WakeAt: w.WakeAt, WaitEventType: w.WaitEventType,
		ErrorName: ErrorNameStoreRefused, ErrorMessage: fmt.Sprintf("%s: %v", what, err),
		StartedAt: w.StartedAt,
	}
}

// endLocked ends a step's in-flight work; with unlock it releases mu too.
func (e *execution) endLocked(key string, unlock bool) {
	if !unlock {
		e.inflight--
		delete(e.active, key)
		return
	}
	e.inflight--
	delete(e.active, key)
	e.mu.Unlock()
	e.signal()
}

// blockLocked records a wait (and the step row that records it), parks the
// calling goroutine until the run suspends, and returns ErrSuspended. The
// caller holds mu; blockLocked releases it.
func (e *execution) blockLocked(w *wait, write *db.StepWrite) error {
	e.traceWait(w, write)
	if w != nil {
		e.waits = append(e.waits, *w)
	}
	if write != nil {
		e.writes = append(e.writes, *write)
	}
	e.blocked++
	e.mu.Unlock()
	e.signal()
	<-e.ctx.Done()
	return workflow.ErrSuspended
}

// countLocked counts a Do, WaitForEvent or Invoke step against the run's
// bound (execution.maxSteps).
func (e *execution) countLocked(key string) error {
	if e.counted[key] {
		return nil
	}
	if len(e.counted) >= e.maxSteps {
		return fmt.Errorf("%w: the limit is %d Do, WaitForEvent and Invoke steps per run (step %q)", workflow.ErrTooManySteps, e.maxSteps, key)
	}
	e.counted[key] = true
	return nil
}

// Sleep implements workflow.Step.
func (s *step) Sleep(name string, d time.Duration) error {
	if d > workflow.MaxSleep {
		return fmt.Errorf("%w: sleep of %s is longer than %s", workflow.ErrInvalidRequest, d, workflow.MaxSleep)
	}
	return s.sleep(name, func(now time.Time) time.Time { return now.Add(max(d, 0)) })
}

// SleepUntil implements workflow.Step.
func (s *step) SleepUntil(name string, t time.Time) error {
	return s.sleep(name, func(time.Time) time.Time { return t })
}

func (s *step) sleep(name string, until func(now time.Time) time.Time) error {
	e := s.e
	key, err := wfcore.NormalizeStepName(name)
	if err != nil {
		return err
	}
	if err := checkUserStep(key, nil); err != nil {
		return err
	}
	if err := e.useName(key); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return workflow.ErrSuspended
	}
	if st := e.steps[key]; (st == nil || st.Status != db.StepStatusComplete) && e.sagaStopsRunLocked() {
		return e.stopForSagaLocked()
	}
	now := e.r.now()
	if st := e.steps[key]; st != nil {
		if st.Type != db.StepTypeSleep {
			e.mu.Unlock()
			return mismatch(key, st.Type, db.StepTypeSleep)
		}
		if st.Status == db.StepStatusComplete {
			e.mu.Unlock()
			return nil
		}
		if st.WakeAt != nil && st.WakeAt.After(now) {
			return e.blockLocked(&wait{at: *st.WakeAt, kind: db.TaskKindWake}, nil)
		}
		return e.startCommitLocked(key, db.StepWrite{Key: key, Type: db.StepTypeSleep, Status: db.StepStatusComplete, WakeAt: st.WakeAt})
	}
	wakeAt := until(now).UTC().Truncate(time.Microsecond)
	if wakeAt.Sub(now) > workflow.MaxSleep {
		e.mu.Unlock()
		return fmt.Errorf("%w: sleep until %s is more than %s away", workflow.ErrInvalidRequest, wakeAt.Format(time.RFC3339), workflow.MaxSleep)
	}
	if !wakeAt.After(now) {
		return e.startCommitLocked(key, db.StepWrite{Key: key, Type: db.StepTypeSleep, Status: db.StepStatusComplete, WakeAt: &wakeAt})
	}
	return e.blockLocked(&wait{at: wakeAt, kind: db.TaskKindWake},
		&db.StepWrite{Key: key, Type: db.StepTypeSleep, Status: db.StepStatusWaiting, WakeAt: &wakeAt})
}

// startCommitLocked marks key in flight and commits w. The caller holds mu.
func (e *execution) startCommitLocked(key string, w db.StepWrite) error {
	if e.active[key] {
		e.mu.Unlock()
		return fmt.Errorf("%w: %q", workflow.ErrDuplicateStep, key)
	}
	e.active[key] = true
	e.inflight++
	e.mu.Unlock()
	return e.commitStep(key, w)
}

// WaitForEvent implements workflow.Step.
func (s *step) WaitForEvent(name string, opts workflow.WaitOptions) (*workflow.ReceivedEvent, error) {
	e := s.e
	key, err := wfcore.NormalizeStepName(name)
	if err != nil {
		return nil, err
	}
	if err := checkUserStep(key, nil); err != nil {
		return nil, err
	}
	opts, err = opts.Resolved()
	if err != nil {
		return nil, err
	}
	if err := e.useName(key); err != nil {
		return nil, err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, workflow.ErrSuspended
	}
	if e.active[key] {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", workflow.ErrDuplicateStep, key)
	}
	if err := e.countLocked(key); err != nil {
		e.mu.Unlock()
		return nil, err
	}
	if st := e.steps[key]; (st == nil || (st.Status != db.StepStatusComplete && st.Status != db.StepStatusErrored)) && e.sagaStopsRunLocked() {
		return nil, e.stopForSagaLocked()
	}
	now := e.r.now()
	timeoutAt := now.Add(opts.Timeout)
	st := e.steps[key]
	if st != nil {
		if st.Type != db.StepTypeWaitForEvent {
			e.mu.Unlock()
			return nil, mismatch(key, st.Type, db.StepTypeWaitForEvent)
		}
		switch st.Status {
		case db.StepStatusComplete:
			res := st.Result
			// The send completed the wait (DeliverAtSend) and made this
			// task due: this pass is the resumption.
			woken := e.r.observing && !e.wokenAt.IsZero() && st.CompletedAt != nil && !st.CompletedAt.Before(e.wokenAt)
			e.mu.Unlock()
			ev, err := decodeEvent(key, res)
			if woken && err == nil {
				e.r.cfg.Observer.ObserveWake(e.inst.WorkflowName, e.r.now().Sub(ev.Timestamp))
			}
			return ev, err
		case db.StepStatusErrored:
			e.mu.Unlock()
			return nil, stepError(st)
		}
		if st.WakeAt != nil {
			timeoutAt = *st.WakeAt
		}
	}
	if st == nil && (e.park || e.blocked > 0) {
		// About to suspend: record the wait; the suspend checkpoint notices a
		// buffered event and makes the task due at once.
		return nil, e.blockLocked(&wait{at: timeoutAt, kind: db.TaskKindWake, eventType: opts.Type},
			waitWrite(key, opts.Type, timeoutAt))
	}
	e.active[key] = true
	e.inflight++
	e.mu.Unlock()

	ev, err := e.consume(key, opts.Type)
	if err != nil {
		return nil, err
	}
	if ev != nil {
		if st != nil && e.r.observing {
			// The run waited (its row was recorded): the event woke it.
			e.r.cfg.Observer.ObserveWake(e.inst.WorkflowName, e.r.now().Sub(ev.Timestamp))
		}
		return ev, nil
	}
	if !timeoutAt.After(e.r.now()) {
		e.mu.Lock()
		e.inflight++
		e.active[key] = true
		e.mu.Unlock()
		w := db.StepWrite{
			Key: key, Type: db.StepTypeWaitForEvent, Status: db.StepStatusErrored, WakeAt: &timeoutAt,
			WaitEventType: opts.Type, ErrorName: workflow.ErrorNameEventTimeout,
			ErrorMessage: fmt.Sprintf("no event of type %q arrived before %s", opts.Type, timeoutAt.Format(time.RFC3339Nano)),
		}
		if err := e.commitStep(key, w); err != nil {
			return nil, err
		}
		return nil, stepError(stepFromWrite(w))
	}
	e.mu.Lock()
	var write *db.StepWrite
	if st == nil {
		write = waitWrite(key, opts.Type, timeoutAt)
	}
	return nil, e.blockLocked(&wait{at: timeoutAt, kind: db.TaskKindWake, eventType: opts.Type}, write)
}

// consume tries to consume the oldest buffered event of the type for key. The
// caller has marked key in flight; consume ends that.
func (e *execution) consume(key, eventType string) (*workflow.ReceivedEvent, error) {
	return e.consumeAs(key, eventType, db.StepTypeWaitForEvent)
}

// consumeAs is consume for a step of the given type (waitForEvent, or an
// invoke step receiving its child's end).
func (e *execution) consumeAs(key, eventType string, stepType db.StepType) (*workflow.ReceivedEvent, error) {
	e.commitMu.Lock()
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	var res *db.CheckpointResult
	var err error
	if !closed {
		res, err = e.checkpoint(&db.CheckpointParams{
			Outcome: db.OutcomeContinue, ConsumeEvent: &db.ConsumeEvent{Type: eventType, StepKey: key, StepType: stepType},
		})
	}
	e.commitMu.Unlock()
	if errors.Is(err, db.ErrInvalidData) {
		// The event cannot be recorded as the step's result (it stays
		// buffered): the wait fails for good.
		w := db.StepWrite{
			Key: key, Type: stepType, Status: db.StepStatusErrored, WaitEventType: eventType,
			ErrorName: ErrorNameStoreRefused, ErrorMessage: fmt.Sprintf("storing the event it received: %v", err),
		}
		if err := e.commitStep(key, w); err != nil {
			return nil, err
		}
		return nil, stepError(stepFromWrite(w))
	}
	e.mu.Lock()
	if closed || err != nil {
		e.endLocked(key, true)
		return nil, workflow.ErrSuspended
	}
	if res.PauseRequested {
		e.park = true
	}
	if res.Event == nil {
		e.endLocked(key, true)
		return nil, nil
	}
	// Decode exactly what replay will decode (the bytes the store wrote
	// for the step, by the same encoding), so both runs see one value.
	raw, err := transition.EventStepResult(res.Event)
	if err != nil {
		e.endLocked(key, true)
		return nil, fmt.Errorf("encoding event for step %q: %w", key, err)
	}
	e.steps[key] = &db.Step{Key: key, Type: stepType, Status: db.StepStatusComplete, WaitEventType: eventType, Result: raw}
	// A wait this run recorded for the step and went on (an Invoke with
	// NoWait) is over: the suspend must neither write its waiting row over
	// the completed one nor wait for an event already consumed.
	e.writes = slices.DeleteFunc(e.writes, func(w db.StepWrite) bool { return w.Key == key })
	e.waits = slices.DeleteFunc(e.waits, func(w wait) bool { return w.eventType == eventType })
	e.endLocked(key, true)
	return decodeEvent(key, raw)
}

func decodeEvent(key string, raw json.RawMessage) (*workflow.ReceivedEvent, error) {
	var ev workflow.ReceivedEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("decoding event recorded for step %q: %w", key, err)
	}
	return &ev, nil
}

func waitWrite(key, eventType string, timeoutAt time.Time) *db.StepWrite {
	return &db.StepWrite{Key: key, Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WakeAt: &timeoutAt, WaitEventType: eventType}
}

func stepFromWrite(w db.StepWrite) *db.Step {
	return &db.Step{
		Key: w.Key, Type: w.Type, Status: w.Status, Attempts: w.Attempts, MaxAttempts: w.MaxAttempts,
		Timeout: w.Timeout, NextRetryAt: w.NextRetryAt, WakeAt: w.WakeAt, WaitEventType: w.WaitEventType,
		Result: w.Result, ErrorName: w.ErrorName, ErrorMessage: w.ErrorMessage,
	}
}

func stepError(st *db.Step) error {
	return &workflow.StepError{Step: st.Key, Name: st.ErrorName, Message: st.ErrorMessage, Attempts: st.Attempts}
}

func mismatch(key string, recorded, used db.StepType) error {
	return fmt.Errorf("%w: step %q was recorded as %s and is now used as %s", workflow.ErrStepTypeMismatch, key, recorded, used)
}
