package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// saga is an execution's compensation state, under execution.mu.
//
// Workflow code registers a compensation with each step that completes
// (workflow.Compensate): on the first run when the step commits, on replay
// when the step returns its recorded result, so after a crash the closures
// are registered again as the code replays. When the run fails for good, or
// a caller asked for its compensation, the registered compensations run in
// the reverse order of their steps' completion, each as the durable step
// workflow.CompensationStepPrefix + key: a compensation that completed
// before a crash returns its record and is not run again.
type saga struct {
	// registered are the compensations of the completed steps, by step key.
	registered map[string]*registeredCompensation
	// seq orders the steps that completed in this execution.
	seq int
	// running is set once the compensations run: the workflow code's
	// goroutines start no new step.
	running bool
	// requested is set when a caller asked for the instance's compensation.
	requested bool
}

// registeredCompensation is the compensation of one completed step.
type registeredCompensation struct {
	key    string
	comp   wfcore.Compensation
	result json.RawMessage
	// loaded is set for a step recorded before this execution: those
	// complete before the ones of this execution, ordered by completedAt
	// then id; the others by seq.
	loaded      bool
	completedAt time.Time
	id          int64
	seq         int
}

// checkUserStep rejects a step name of workflow code that is reserved for
// compensations, and a step with a compensation whose compensation step name
// would be too long.
func checkUserStep(key string, cfg *workflow.StepConfig) error {
	if strings.HasPrefix(key, workflow.CompensationStepPrefix) {
		return fmt.Errorf("%w: %q: the prefix %q is reserved for compensations", workflow.ErrInvalidStepName, key, workflow.CompensationStepPrefix)
	}
	if cfg == nil {
		return nil
	}
	c, ok := wfcore.CompensationOf(*cfg)
	if !ok {
		return nil
	}
	if c.Func == nil && c.Invoke == nil {
		return fmt.Errorf("%w: step %q has a nil compensation", workflow.ErrInvalidRequest, key)
	}
	if c.Invoke != nil {
		if raw := wfcore.RawStepConfig(c.Options...); raw.Retries != nil || raw.Timeout != 0 {
			return fmt.Errorf("%w: the compensation of step %q invokes a child workflow, which is not retried and waits for InvokeOptions.Timeout: it takes no retries or timeout (CompensationOptions)",
				workflow.ErrInvalidRequest, key)
		}
	}
	if utf8.RuneCountInString(workflow.CompensationStepPrefix+key) > workflow.MaxStepNameLength {
		return fmt.Errorf("%w: step %q has a compensation, so its name must leave room for the prefix %q within %d characters",
			workflow.ErrInvalidStepName, key, workflow.CompensationStepPrefix, workflow.MaxStepNameLength)
	}
	if err := wfcore.NewStepConfig(c.Options...).Validate(); err != nil {
		return fmt.Errorf("compensation of step %q: %w", key, err)
	}
	return nil
}

// registerCompensationLocked remembers the compensation of the completed
// step st, if cfg has one; a step registers once per execution. The caller
// holds mu.
func (e *execution) registerCompensationLocked(st *db.Step, cfg *workflow.StepConfig, loaded bool) {
	if st == nil || st.Status != db.StepStatusComplete {
		return
	}
	c, ok := wfcore.CompensationOf(*cfg)
	if !ok {
		return
	}
	e.registerLocked(st, c, st.Result, loaded)
}

// registerLocked remembers c, the compensation of the completed step st,
// to be called with result (the step's result, or an Invoke step's child
// output); a step registers once per execution. The caller holds mu.
func (e *execution) registerLocked(st *db.Step, c wfcore.Compensation, result json.RawMessage, loaded bool) {
	if c.Func == nil && c.Invoke == nil {
		return
	}
	if e.saga.registered == nil {
		e.saga.registered = map[string]*registeredCompensation{}
	}
	if _, ok := e.saga.registered[st.Key]; ok {
		return
	}
	e.saga.seq++
	rc := &registeredCompensation{key: st.Key, comp: c, result: result, loaded: loaded, id: st.ID, seq: e.saga.seq}
	if st.CompletedAt != nil {
		rc.completedAt = *st.CompletedAt
	}
	e.saga.registered[st.Key] = rc
}

// registerCommitted registers the compensation of the step key that this
// execution committed just now.
func (e *execution) registerCommitted(key string, cfg *workflow.StepConfig) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.registerCompensationLocked(e.steps[key], cfg, false)
}

// sagaStopsRunLocked reports whether a step of workflow code that would
// start new work must stop instead: the compensations run, or a caller asked
// for them. The caller holds mu.
func (e *execution) sagaStopsRunLocked() bool { return e.saga.running || e.saga.requested }

// stopForSagaLocked parks a goroutine of workflow code at a step boundary
// while the run is compensated, and returns ErrSuspended once the execution
// ends. Before the compensations start it counts as blocked, so the run
// loop sees that the workflow code stopped (and starts them); afterwards it
// is not counted, so that only the compensations decide when the run
// suspends. The caller holds mu; it is released.
func (e *execution) stopForSagaLocked() error {
	if !e.saga.running {
		return e.blockLocked(nil, nil)
	}
	e.mu.Unlock()
	<-e.ctx.Done()
	return workflow.ErrSuspended
}

// end ends the run with the outcome o of the workflow code (or of its
// compensations). It returns the channel of the compensations it started
// instead, or nil when the run ended (or suspended for a workflow retry).
func (e *execution) end(o runOutcome) chan runOutcome {
	e.mu.Lock()
	running, requested := e.saga.running, e.saga.requested
	e.mu.Unlock()
	switch {
	case running:
		e.finish(errorEnd(o.err))
		return nil
	case requested:
		// A caller asked for the compensation: whatever the workflow code
		// returned, its completed steps are undone.
		return e.startSaga(requestedError{}, true)
	case o.err == nil || errors.Is(o.err, workflow.ErrSuspended):
		e.complete(o.out, o.err)
		return nil
	}
	if p := e.retryRun(o.err); p != nil {
		e.finish(p)
		return nil
	}
	if next := e.startSaga(o.err, false); next != nil {
		return next
	}
	e.finish(errorEnd(o.err))
	return nil
}

// errorEnd is the checkpoint that errors the instance with err.
func errorEnd(err error) *db.CheckpointParams {
	return &db.CheckpointParams{Outcome: db.OutcomeError, ErrorName: workflow.ErrorName(err), ErrorMessage: err.Error()}
}

// startSaga starts the compensations of the completed steps with cause, the
// error the instance ends with once they ran. It returns their channel, or
// nil when none is registered and force is false (a requested compensation
// forces it: the run ends even with nothing to undo).
func (e *execution) startSaga(cause error, force bool) chan runOutcome {
	e.mu.Lock()
	if e.saga.running || (len(e.saga.registered) == 0 && !force) {
		e.mu.Unlock()
		return nil
	}
	comps := make([]*registeredCompensation, 0, len(e.saga.registered))
	for _, rc := range e.saga.registered {
		comps = append(comps, rc)
	}
	e.saga.running = true
	// The workflow code's goroutines parked at step boundaries stay parked
	// until the execution ends; their waits are not the run's any more.
	e.blocked, e.waits, e.writes = 0, nil, nil
	e.mu.Unlock()
	slices.SortFunc(comps, compareCompletion)
	slices.Reverse(comps)
	e.log.Info("compensating", "steps", len(comps), "cause", workflow.ErrorName(cause))
	done := make(chan runOutcome, 1)
	go func() {
		var o runOutcome
		defer func() {
			if p := recover(); p != nil {
				o = runOutcome{err: &panicError{value: p, stack: string(debug.Stack())}}
			}
			done <- o
		}()
		o.err = e.compensate(cause, comps)
	}()
	return done
}

// compareCompletion orders compensations by their steps' completion.
func compareCompletion(a, b *registeredCompensation) int {
	switch {
	case a.loaded && !b.loaded:
		return -1
	case !a.loaded && b.loaded:
		return 1
	case !a.loaded:
		return cmp.Compare(a.seq, b.seq)
	}
	if c := a.completedAt.Compare(b.completedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// compensate runs comps in order, each as a durable step, and returns the
// error the instance ends with: cause, or a *compensationError when some
// failed for good (the others still run). ErrSuspended means the run
// suspends (a compensation waits for its retry) or was abandoned.
func (e *execution) compensate(cause error, comps []*registeredCompensation) error {
	s := &step{e: e}
	var failed []*workflow.StepError
	for _, rc := range comps {
		key := workflow.CompensationStepPrefix + rc.key
		var err error
		if rc.comp.Invoke != nil {
			err = s.compensateInvoke(key, rc.comp.Invoke, rc.result)
		} else {
			cfg := wfcore.NewStepConfig(rc.comp.Options...)
			fn, result := rc.comp.Func, rc.result
			_, err = s.do(key, func(ctx context.Context) (any, error) { return nil, fn(ctx, result) }, cfg, true)
		}
		if err == nil {
			continue
		}
		var ce *workflow.ChildError
		if errors.As(err, &ce) {
			// The child that was to undo the step failed or was terminated.
			err = &workflow.StepError{Step: key, Name: workflow.ErrorNameChildFailed, Message: ce.Error(), Attempts: 1}
		}
		var se *workflow.StepError
		if !errors.As(err, &se) {
			// ErrSuspended (a retry wait, a pause, or the run was given up),
			// or a step error of the engine's: the run stops here.
			return err
		}
		failed = append(failed, se)
	}
	if len(failed) > 0 {
		return &compensationError{cause: cause, failed: failed}
	}
	return cause
}

// compensationError is the error of an instance some of whose compensations
// failed for good; it keeps the error that started the compensation.
type compensationError struct {
	cause  error
	failed []*workflow.StepError
}

func (c *compensationError) Error() string {
	var b strings.Builder
	for i, se := range c.failed {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "step %q failed: %s: %s", se.Step, se.Name, se.Message)
	}
	return fmt.Sprintf("compensation failed: %s; original error: %s: %s", b.String(), workflow.ErrorName(c.cause), c.cause.Error())
}

func (c *compensationError) ErrorName() string { return workflow.ErrorNameCompensationFailed }

func (c *compensationError) Unwrap() []error {
	out := []error{c.cause}
	for _, se := range c.failed {
		out = append(out, se)
	}
	return out
}

// requestedError is the error of a run a caller asked to compensate.
type requestedError struct{}

func (requestedError) Error() string {
	return "a caller asked for the compensation of the instance"
}

func (requestedError) ErrorName() string { return workflow.ErrorNameCompensationRequested }

func (requestedError) Is(target error) bool { return target == workflow.ErrCompensationRequested }

// startRequestedSaga starts the compensations a caller asked for, once the
// workflow code stopped at its step boundaries; nil when none was asked for
// or they run already.
func (e *execution) startRequestedSaga() chan runOutcome {
	e.mu.Lock()
	e.takeRequestAtBoundaryLocked()
	requested := e.saga.requested && !e.saga.running
	e.mu.Unlock()
	if !requested {
		return nil
	}
	return e.startSaga(requestedError{}, true)
}

// takeRequestAtStart notes, before the run starts, a compensation a caller
// asked for: recorded in the run's steps (taken up by an earlier
// execution), or carried by the pause request the instance was claimed
// with, which it takes up here; the run is then compensated
// (saga.requested).
func (e *execution) takeRequestAtStart() {
	e.mu.Lock()
	_, marked := e.steps[db.CompensationMarkerKey]
	e.mu.Unlock()
	if e.inst.PauseRequested && e.inst.Status != dftype.StatusPaused && e.takeRequest() {
		e.inst.PauseRequested = false
		marked = true
	}
	if marked {
		e.mu.Lock()
		e.saga.requested = true
		e.mu.Unlock()
	}
}

// takeRequest takes up a compensation request carried by the pause request
// the run saw (CompensationTake, fenced by the held task): it reports true
// when there was one, false for a pause of the ordinary kind (or when the
// store could not tell: the run then parks, and a lost lease fences it).
func (e *execution) takeRequest() bool {
	var took bool
	err := e.r.retryStore(e.ctx, e.leaseDeadline, "taking up a compensation request", e.log, func() error {
		now := e.r.now()
		var err error
		took, err = e.r.cfg.Store.CompensationTake(context.WithoutCancel(e.ctx), &db.CompensationTakeParams{
			Task: e.ref, WorkflowName: e.inst.WorkflowName, InstanceID: e.inst.ID, RunNumber: e.inst.RunNumber, Now: &now,
		})
		return err
	})
	if err != nil {
		e.log.Warn("taking up a compensation request failed", "error", err)
		return false
	}
	if took {
		e.log.Info("compensation requested")
	}
	return took
}

// takeRequestAtBoundaryLocked is called when the run stops at a step boundary
// for a pause request (park): when the pause carried a compensation
// request, it takes it up, and the run compensates instead of parking.
// The caller holds mu; it is released and held again.
func (e *execution) takeRequestAtBoundaryLocked() {
	if !e.park {
		return
	}
	e.mu.Unlock()
	e.commitMu.Lock()
	took := e.takeRequest()
	e.commitMu.Unlock()
	e.mu.Lock()
	if took {
		e.park = false
		e.saga.requested = true
	}
}
