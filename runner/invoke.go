package runner

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/tracing"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Invoke implements workflow.Step: it starts the child once (a create
// that finds the step's child when it has one, so a replay after a crash
// between the start and the parent's next checkpoint finds the same
// child; a step has at most one child per run) and waits for its end as WaitForEvent waits for an event: on the
// reserved type workflow.InvokeEventType(run, key), which the child's
// last checkpoint sends in its own transaction (db.CheckpointParams.
// NotifyParent). The step row has type invoke.
func (s *step) Invoke(name string, opts workflow.InvokeOptions) (json.RawMessage, error) {
	e := s.e
	key, err := wfcore.NormalizeStepName(name)
	if err != nil {
		return nil, err
	}
	if err := checkUserStep(key, nil); err != nil {
		return nil, err
	}
	timeout, err := invokeTimeout(key, opts)
	if err != nil {
		return nil, err
	}
	comp, err := invokeCompensation(key, opts.Compensation)
	if err != nil {
		return nil, err
	}
	if !opts.NoWait {
		// A NoWait call only looks at the child, and may look again in
		// this pass (InvokeAll does); the call that waits uses the name.
		if err := e.useName(key); err != nil {
			return nil, err
		}
	}
	return s.invoke(key, opts, timeout, comp, false)
}

// invokeTimeout checks the workflow name and the timeout of the Invoke
// step key and returns the timeout, its default filled in.
func invokeTimeout(key string, opts workflow.InvokeOptions) (time.Duration, error) {
	if err := workflow.ValidateWorkflowName(opts.Workflow); err != nil {
		return 0, fmt.Errorf("invoke step %q: %w", key, err)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = workflow.MaxSleep
	}
	if timeout < 0 || timeout > workflow.MaxSleep {
		return 0, fmt.Errorf("%w: invoke step %q: timeout %s must be positive and at most %s", workflow.ErrInvalidRequest, key, timeout, workflow.MaxSleep)
	}
	return timeout, nil
}

// invokeCompensation is the compensation InvokeOptions.Compensation
// registers for the Invoke step key, nil for none. It refuses options
// other than compensation options, which an Invoke has no use for.
func invokeCompensation(key string, opts []workflow.StepOption) (*wfcore.Compensation, error) {
	if len(opts) == 0 {
		return nil, nil
	}
	raw := wfcore.RawStepConfig(opts...)
	if raw.Retries != nil || raw.Timeout != 0 {
		return nil, fmt.Errorf("%w: invoke step %q: InvokeOptions.Compensation takes only Compensate, CompensateWithInvoke and CompensationOptions (an Invoke is not retried, and its timeout is InvokeOptions.Timeout)",
			workflow.ErrInvalidRequest, key)
	}
	if !raw.HasCompensation() {
		return nil, fmt.Errorf("%w: invoke step %q: InvokeOptions.Compensation registers no compensation (use workflow.Compensate or workflow.CompensateWithInvoke)",
			workflow.ErrInvalidRequest, key)
	}
	cfg := wfcore.NewStepConfig(opts...)
	if err := checkUserStep(key, &cfg); err != nil {
		return nil, err
	}
	c, _ := wfcore.CompensationOf(cfg)
	return &c, nil
}

// compensateInvoke runs the compensation key that invokes the child undo
// describes (workflow.CompensateWithInvoke), given the result of the step
// it undoes: an Invoke step the runner runs itself, as compensate runs the
// others with do. Options that undo cannot make, or that are not valid,
// fail the compensation for good, recorded as a refused start.
func (s *step) compensateInvoke(key string, undo workflow.InvokeCompensationFunc, result json.RawMessage) error {
	e := s.e
	opts, err := undo(result)
	var timeout time.Duration
	if err == nil {
		timeout, err = invokeTimeout(key, opts)
	}
	if err == nil && (opts.NoWait || len(opts.Compensation) > 0) {
		err = fmt.Errorf("%w: a compensation's Invoke has no NoWait and no compensation of its own", workflow.ErrInvalidRequest)
	}
	if err != nil {
		e.mu.Lock()
		if st := e.steps[key]; st != nil && st.Status == db.StepStatusErrored {
			e.mu.Unlock()
			return invokeError(st)
		}
		if e.closed {
			e.mu.Unlock()
			return workflow.ErrSuspended
		}
		w := db.StepWrite{
			Key: key, Type: db.StepTypeInvoke, Status: db.StepStatusErrored, Attempts: 1,
			ErrorName: workflow.ErrorNameInvokeRefused, ErrorMessage: fmt.Sprintf("compensation %q: %v", key, err),
		}
		if err := e.startCommitLocked(key, w); err != nil {
			return err
		}
		return invokeError(stepFromWrite(w))
	}
	_, err = s.invoke(key, opts, timeout, nil, true)
	return err
}

// invoke is Invoke once the name and options are checked; comp is the
// step's compensation, registered when its child completed (nil: none).
// compensation is set for the compensations the runner runs itself (see
// compensateInvoke), which a running saga does not stop.
func (s *step) invoke(key string, opts workflow.InvokeOptions, timeout time.Duration, comp *wfcore.Compensation, compensation bool) (json.RawMessage, error) {
	e := s.e
	eventType := workflow.InvokeEventType(e.inst.RunNumber, key)
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
	if st := e.steps[key]; !compensation && (st == nil || (st.Status != db.StepStatusComplete && st.Status != db.StepStatusErrored)) && e.sagaStopsRunLocked() {
		// The run is compensated (or a caller asked for it): no child is
		// started and none is waited for, as Do and WaitForEvent stop.
		return nil, e.stopForSagaLocked()
	}
	if compensation {
		// A pause request while compensating may be a compensation
		// request, which the compensations already fulfil.
		e.takeRequestAtBoundaryLocked()
	}
	now := e.r.now()
	timeoutAt := now.Add(timeout).UTC().Truncate(time.Microsecond)
	st := e.steps[key]
	if st != nil {
		if st.Type != db.StepTypeInvoke {
			e.mu.Unlock()
			return nil, mismatch(key, st.Type, db.StepTypeInvoke)
		}
		switch st.Status {
		case db.StepStatusComplete:
			out, err := childResult(key, st.Result)
			e.registerChildLocked(st, comp, out, err, true)
			e.mu.Unlock()
			return out, err
		case db.StepStatusErrored:
			e.mu.Unlock()
			return nil, invokeError(st)
		}
		if st.WakeAt != nil {
			timeoutAt = *st.WakeAt
		}
	}
	e.active[key] = true
	e.inflight++
	e.mu.Unlock()

	if st == nil {
		// No row: the child may not exist yet (or a crash came between its
		// start and this step's wait): start it, idempotently.
		if err := e.startChild(key, opts); err != nil {
			var refused *childRefusedError
			if !errors.As(err, &refused) {
				e.mu.Lock()
				e.endLocked(key, true)
				return nil, err
			}
			// The start was refused for good: the step fails, durably, so
			// that a replay gives the same answer.
			w := db.StepWrite{
				Key: key, Type: db.StepTypeInvoke, Status: db.StepStatusErrored, Attempts: 1,
				ErrorName: refused.name, ErrorMessage: refused.err.Error(),
			}
			if err := e.commitStep(key, w); err != nil {
				return nil, err
			}
			return nil, invokeError(stepFromWrite(w))
		}
		e.mu.Lock()
		if opts.NoWait {
			e.endLocked(key, false)
			return nil, e.recordWaitLocked(key, eventType, timeoutAt)
		}
		if e.park || e.blocked > 0 {
			// About to suspend: record the wait; the suspend checkpoint
			// notices an end already buffered and makes the task due.
			e.endLocked(key, false)
			return nil, e.blockLocked(&wait{at: timeoutAt, kind: db.TaskKindWake, eventType: eventType},
				invokeWaitWrite(key, eventType, timeoutAt))
		}
		e.mu.Unlock()
	}
	ev, err := e.consumeAs(key, eventType, db.StepTypeInvoke)
	if err != nil {
		return nil, err
	}
	if ev != nil {
		e.mu.Lock()
		st := e.steps[key]
		out, err := childResult(key, st.Result)
		e.registerChildLocked(st, comp, out, err, false)
		e.mu.Unlock()
		return out, err
	}
	if !timeoutAt.After(e.r.now()) {
		if opts.TerminateOnTimeout {
			if err := e.terminateChild(key); err != nil {
				return nil, err
			}
		}
		e.mu.Lock()
		e.inflight++
		e.active[key] = true
		e.mu.Unlock()
		w := db.StepWrite{
			Key: key, Type: db.StepTypeInvoke, Status: db.StepStatusErrored, WakeAt: &timeoutAt,
			WaitEventType: eventType, ErrorName: workflow.ErrorNameInvokeTimeout,
			ErrorMessage: fmt.Sprintf("the child of step %q did not end before %s", key, timeoutAt.Format(time.RFC3339Nano)),
		}
		if err := e.commitStep(key, w); err != nil {
			return nil, err
		}
		return nil, invokeError(stepFromWrite(w))
	}
	e.mu.Lock()
	if opts.NoWait {
		// The wait is recorded already (st is its row): the run suspends
		// on it with the others.
		e.waits = append(e.waits, wait{at: timeoutAt, kind: db.TaskKindWake, eventType: eventType})
		e.mu.Unlock()
		return nil, workflow.ErrChildRunning
	}
	var write *db.StepWrite
	if st == nil {
		write = invokeWaitWrite(key, eventType, timeoutAt)
	}
	return nil, e.blockLocked(&wait{at: timeoutAt, kind: db.TaskKindWake, eventType: eventType}, write)
}

// registerChildLocked registers comp, the compensation of the Invoke step
// st, when its child completed (err, the child's failure, is nil), with
// the child's output out as the result it undoes. The caller holds mu.
func (e *execution) registerChildLocked(st *db.Step, comp *wfcore.Compensation, out json.RawMessage, err error, loaded bool) {
	if comp == nil || err != nil {
		return
	}
	e.registerLocked(st, *comp, out, loaded)
}

// startChild creates the child of the Invoke step key, or finds it when
// it exists as the same step's child (client: existingChild).
func (e *execution) startChild(key string, opts workflow.InvokeOptions) error {
	depth, err := e.childDepth(key)
	if err != nil {
		return err
	}
	if depth > e.r.cfg.MaxInvokeDepth {
		return &childRefusedError{name: workflow.ErrorNameInvokeDepth, err: fmt.Errorf("%w: step %q of %s/%s would start a child at depth %d, past the limit of %d",
			workflow.ErrInvokeDepth, key, e.inst.WorkflowName, e.inst.ID, depth, e.r.cfg.MaxInvokeDepth)}
	}
	params, err := e.r.cfg.EngineLimits.MarshalPayload(fmt.Sprintf("params of invoke step %q", key), opts.Params)
	if err != nil {
		return &childRefusedError{name: workflow.ErrorNameInvokeRefused, err: err}
	}
	id, engine, err := e.child(key, opts)
	if err != nil {
		return err
	}
	// The child lives in its parent's namespace: the parent's callers see
	// it, and nobody else does.
	req := dftype.CreateRequest{
		ID: id, Params: params, Metadata: opts.Metadata, Namespace: e.inst.Namespace, Queue: opts.Queue, Priority: opts.Priority,
		Parent: &dftype.ParentRef{
			WorkflowName: e.inst.WorkflowName, InstanceID: e.inst.ID, RunNumber: e.inst.RunNumber,
			StepKey: key, Policy: opts.Policy, Depth: depth,
		},
	}
	// A store that fails is retried while the lease holds; then the run is
	// given back (and the start tried again by its replay). A refusal of
	// the request itself is the step's answer.
	var refused error
	// With tracing on, the start of the child is the Invoke step's span,
	// and the child's create stores it: the child's runs descend from it.
	ctx, span := e.ctx, e.startStepSpan(key, db.StepTypeInvoke, 1)
	if span != nil {
		span.SetAttributes(attribute.String(tracing.AttrChildName, opts.Workflow))
		ctx = trace.ContextWithSpan(ctx, span)
	}
	err = e.r.retryStore(e.ctx, e.leaseDeadline, "starting a child", e.log, func() error {
		info, err := engine.Create(ctx, opts.Workflow, req)
		if childRefused(err) {
			refused, err = err, nil
		}
		if err == nil && span != nil {
			// The step's child: this id, or the one an earlier pass started.
			span.SetAttributes(attribute.String(tracing.AttrChildID, info.ID))
		}
		return err
	})
	if refused != nil {
		endStepSpan(span, refused)
	} else {
		endStepSpan(span, err)
	}
	switch {
	case refused != nil:
		return &childRefusedError{name: workflow.ErrorNameInvokeRefused, err: fmt.Errorf("invoke step %q: starting %s/%s: %w", key, opts.Workflow, id, refused)}
	case err != nil:
		e.cancel(fmt.Errorf("%w: starting the child of step %q: %w", errCauseStore, key, err))
		return workflow.ErrSuspended
	}
	return nil
}

// terminateChild terminates the child of the Invoke step key whose wait
// timed out (an ended or missing child is left as it is), found by its
// parent link: its id may be random. A store that fails is retried while
// the lease holds; then the run is given back, and its replay terminates
// the child again before it records the timeout.
func (e *execution) terminateChild(key string) error {
	engine, err := e.r.cfg.Registry.Engine()
	if err != nil {
		return fmt.Errorf("invoke step %q: %w", key, err)
	}
	link := &db.ParentLink{WorkflowName: e.inst.WorkflowName, InstanceID: e.inst.ID, RunNumber: e.inst.RunNumber, StepKey: key}
	err = e.r.retryStore(e.ctx, e.leaseDeadline, "terminating a child", e.log, func() error {
		child, err := e.r.cfg.Store.InstanceChildOf(e.ctx, link)
		if errors.Is(err, db.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = engine.Terminate(e.ctx, child.WorkflowName, child.ID)
		if errors.Is(err, workflow.ErrInstanceTerminal) || errors.Is(err, workflow.ErrInstanceNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		e.cancel(fmt.Errorf("%w: terminating the child of step %q: %w", errCauseStore, key, err))
		return workflow.ErrSuspended
	}
	return nil
}

// child returns the id of a new child of the Invoke step key (opts.ID, or
// a new one from childID) and the engine that starts it.
func (e *execution) child(key string, opts workflow.InvokeOptions) (string, workflow.Engine, error) {
	id := opts.ID
	if id == "" {
		id = childID(e.inst)
	}
	engine, err := e.r.cfg.Registry.Engine()
	if err != nil {
		return "", nil, fmt.Errorf("invoke step %q: %w", key, err)
	}
	return id, engine, nil
}

// childRefusedError is a start of a child that can never succeed: the
// step records it as its error (name).
type childRefusedError struct {
	name string
	err  error
}

func (e *childRefusedError) Error() string { return e.err.Error() }

func (e *childRefusedError) Unwrap() error { return e.err }

// childRefused reports whether a create's error refuses the request
// itself, rather than a store that failed.
func childRefused(err error) bool {
	for _, target := range []error{
		workflow.ErrWorkflowNotFound, workflow.ErrInstanceAlreadyExists, workflow.ErrInstanceTerminal,
		workflow.ErrInvalidWorkflowName, workflow.ErrInvalidInstanceID, workflow.ErrInvalidRequest,
		workflow.ErrPayloadTooLarge, workflow.ErrPayloadTooDeep, workflow.ErrEngineNotBound,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// childIDRandomBytes is how many random bytes end the id of a child.
const childIDRandomBytes = 12

// childID is a new id for a child of inst: the parent's id (shortened) and
// run number, then 24 random hex digits. The random part makes the id
// unguessable, so that nobody (another namespace's caller above all) can
// create an instance with it first and make the step fail; a replay of the
// step needs no fixed id, as it finds the step's child by its parent link
// (db.ChildStore.InstanceChildOf, client: existingChild), and a step has
// at most one child per run whatever ids its replays pick.
func childID(inst *db.Instance) string {
	var b [childIDRandomBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	prefix := inst.ID
	if len(prefix) > 60 {
		prefix = prefix[:60]
	}
	return fmt.Sprintf("%s-%d-%s", prefix, inst.RunNumber, hex.EncodeToString(b[:]))
}

// childResult decodes the end of a child recorded as an Invoke step's
// result: its output, or a *workflow.ChildError.
func childResult(key string, raw json.RawMessage) (json.RawMessage, error) {
	ev, err := decodeEvent(key, raw)
	if err != nil {
		return nil, err
	}
	var out dftype.ChildOutcome
	if err := ev.Decode(&out); err != nil {
		return nil, fmt.Errorf("decoding the child's end recorded for step %q: %w", key, err)
	}
	if out.Status == dftype.StatusComplete {
		if len(out.Output) == 0 {
			return json.RawMessage("null"), nil
		}
		return out.Output, nil
	}
	return nil, &workflow.ChildError{
		Step: key, WorkflowName: out.WorkflowName, InstanceID: out.InstanceID, Status: out.Status,
		ChildErrorName: out.ErrorName, ChildErrorMessage: out.ErrorMessage,
	}
}

// invokeError is the error of an errored Invoke step row (a timeout, or a
// refused write).
func invokeError(st *db.Step) error {
	se := &workflow.StepError{Step: st.Key, Name: st.ErrorName, Message: st.ErrorMessage, Attempts: st.Attempts}
	switch st.ErrorName {
	case workflow.ErrorNameInvokeTimeout:
		return fmt.Errorf("%w: %w", workflow.ErrInvokeTimeout, se)
	case workflow.ErrorNameInvokeDepth:
		return fmt.Errorf("%w: %w", workflow.ErrInvokeDepth, se)
	}
	return se
}

// childDepth is how many parents the child of the Invoke step key would
// have: 1 for the child of an instance that no step invoked (no store
// call), else 1 + the ancestors of the instance along the parent links its
// create recorded (one read). A store that fails is retried while the lease
// holds; then the run is given back.
func (e *execution) childDepth(key string) (int, error) {
	if e.inst.Parent == nil {
		return 1, nil
	}
	var depth int
	ref := db.InstanceRef{WorkflowName: e.inst.WorkflowName, ID: e.inst.ID}
	err := e.r.retryStore(e.ctx, e.leaseDeadline, "reading the nesting", e.log, func() error {
		var err error
		depth, err = e.r.cfg.Store.InstanceDepth(e.ctx, ref, e.r.cfg.MaxInvokeDepth)
		return err
	})
	if err != nil {
		e.cancel(fmt.Errorf("%w: reading the nesting of step %q: %w", errCauseStore, key, err))
		return 0, workflow.ErrSuspended
	}
	return depth + 1, nil
}

// parentNotify is the delivery of the run's end to its parent when the
// instance is an Invoke step's child (db.Instance.Parent, the link its
// create recorded; never its metadata, which callers write); nil otherwise.
func (e *execution) parentNotify(p *db.CheckpointParams) *db.ParentNotify {
	if e.inst.Parent == nil {
		return nil
	}
	out := dftype.ChildOutcome{WorkflowName: e.inst.WorkflowName, InstanceID: e.inst.ID, Status: dftype.StatusComplete, Output: p.Output}
	if p.Outcome == db.OutcomeError {
		out.Status, out.Output, out.ErrorName, out.ErrorMessage = dftype.StatusErrored, nil, p.ErrorName, p.ErrorMessage
	}
	payload, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return db.ChildNotify(e.inst, payload, e.r.cfg.RecordHooks)
}

// recordWaitLocked records the wait of an Invoke with NoWait (its row in
// the suspend's writes and in the cache, so that a later Invoke of the
// same step waits without starting the child again) and returns
// workflow.ErrChildRunning. The caller holds mu; it is released.
func (e *execution) recordWaitLocked(key, eventType string, timeoutAt time.Time) error {
	w := invokeWaitWrite(key, eventType, timeoutAt)
	e.waits = append(e.waits, wait{at: timeoutAt, kind: db.TaskKindWake, eventType: eventType})
	e.writes = append(e.writes, *w)
	e.steps[key] = stepFromWrite(*w)
	e.mu.Unlock()
	return workflow.ErrChildRunning
}

// invokeWaitWrite is the waiting row of an Invoke step.
func invokeWaitWrite(key, eventType string, timeoutAt time.Time) *db.StepWrite {
	w := waitWrite(key, eventType, timeoutAt)
	w.Type = db.StepTypeInvoke
	return w
}
