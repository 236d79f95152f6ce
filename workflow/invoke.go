package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/dftype"
)

// DefaultMaxInvokeDepth is how deep Invoke steps may nest by default: a
// workflow invoked by a chain of this many parents fails its Invoke with
// ErrInvokeDepth instead of starting a child.
const DefaultMaxInvokeDepth = 16

// Error names and errors of Invoke.
const (
	// ErrorNameChildFailed is the name of a *ChildError: the child errored
	// or was terminated.
	ErrorNameChildFailed = "ChildFailedError"
	// ErrorNameInvokeTimeout is the recorded name of an Invoke whose child
	// did not end before the step's timeout.
	ErrorNameInvokeTimeout = "InvokeTimeoutError"
	// ErrorNameInvokeRefused is the recorded name of an Invoke whose child
	// could not be started: an unknown workflow, params that do not
	// encode, an id another instance holds.
	ErrorNameInvokeRefused = "InvokeRefusedError"
	// ErrorNameInvokeDepth is the recorded name of an Invoke past the
	// nesting limit (ErrInvokeDepth).
	ErrorNameInvokeDepth = "InvokeDepthError"
)

var (
	// ErrInvokeTimeout is matched (errors.Is) by the error Invoke returns
	// when the child did not end within InvokeOptions.Timeout. The child
	// keeps running.
	ErrInvokeTimeout = errors.New("timed out waiting for the child workflow")
	// ErrInvokeDepth is returned by Invoke when the invoking instance is
	// already nested as deep as the runner allows (runner.Config.MaxInvokeDepth).
	ErrInvokeDepth = errors.New("invoke nesting too deep")
)

// InvokeOptions describe the child an Invoke step starts.
type InvokeOptions struct {
	// Workflow is the registered name of the child's workflow (a Go
	// workflow or a flow). Required.
	Workflow string
	// Params is the child's input, encoded as JSON.
	Params any
	// ID is the child's instance id. Empty picks a new one: the parent's
	// id and run number, then 24 random hex digits, which nobody can work
	// out beforehand and so create first. A replay of the step does not
	// need the same id: a step has at most one child per run, and the
	// replay finds it by its parent link.
	//
	// A fixed id names one child for good: after a restart of the parent,
	// the new run's Invoke finds that id taken by the old run's child and
	// fails (ErrorNameInvokeRefused, wrapping ErrInstanceAlreadyExists).
	// A parent that may be restarted puts its run number in the id, as in
	// fmt.Sprintf("order-%s-charge-%d", orderID, ev.RunNumber).
	ID string
	// Timeout bounds the wait for the child's end: past it Invoke returns
	// an error matching ErrInvokeTimeout, and the child keeps running
	// unless TerminateOnTimeout is set.
	//
	// Defaults to MaxSleep (365 days).
	Timeout time.Duration
	// TerminateOnTimeout terminates the child (and its children with the
	// terminate policy) when the wait times out, before Invoke returns.
	TerminateOnTimeout bool
	// Policy is what a terminate or restart of the parent does to the
	// child.
	//
	// Defaults to dftype.ParentTerminate.
	Policy dftype.ParentPolicy
	// Queue and Priority place the child as in dftype.CreateRequest; empty means
	// the child workflow's.
	Queue    string
	Priority int
	// Metadata is recorded with the child as dftype.CreateRequest.Metadata: a
	// flow child's pinned version, for one (flow.WithPin). The parent link
	// is not in it: the engine records it apart, where callers cannot
	// write it (dftype.InstanceInfo.Parent).
	Metadata json.RawMessage
	// NoWait makes Invoke return at once with ErrChildRunning when the
	// child has not ended, instead of suspending: the child is started
	// and the wait recorded, so its end wakes the run once it suspends.
	// InvokeAll uses it to start a window of children before it waits.
	NoWait bool
	// Compensation registers the compensation of the Invoke step, as the
	// same options do for a Do step: Compensate(fn), CompensateWithInvoke
	// (a child that undoes this one; its result is this child's output)
	// and CompensationOptions. It is registered once the child completed
	// (not when it failed, was terminated or timed out), so if the parent
	// then fails for good, or a caller asks for its compensation, it runs
	// with the others in the reverse order of completion, as the step
	// CompensationStepPrefix + name. Only compensation options are
	// accepted: an Invoke is not retried and its timeout is Timeout, so
	// WithRetries or WithTimeout here is refused with ErrInvalidRequest.
	//
	// Defaults to none: a completed child is not undone.
	Compensation []StepOption
}

// ErrChildRunning is what an Invoke with NoWait returns while its child
// has not ended.
var ErrChildRunning = errors.New("the child workflow has not ended")

// ChildError is the error of an Invoke whose child errored or was
// terminated; the parent inspects it with errors.As.
type ChildError struct {
	// Step is the Invoke step's name.
	Step string
	// WorkflowName and InstanceID name the child.
	WorkflowName string
	InstanceID   string
	// Status is dftype.StatusErrored or dftype.StatusTerminated.
	Status dftype.InstanceStatus
	// ChildErrorName and ChildErrorMessage are the child's error (empty
	// for a terminated child).
	ChildErrorName    string
	ChildErrorMessage string
}

func (e *ChildError) Error() string {
	if e.Status == dftype.StatusTerminated {
		return fmt.Sprintf("child %s/%s of step %q was terminated", e.WorkflowName, e.InstanceID, e.Step)
	}
	return fmt.Sprintf("child %s/%s of step %q failed: %s: %s", e.WorkflowName, e.InstanceID, e.Step, e.ChildErrorName, e.ChildErrorMessage)
}

// ErrorName returns ErrorNameChildFailed, the name a parent that returns
// the error records.
func (e *ChildError) ErrorName() string { return ErrorNameChildFailed }

// Invoke starts a child workflow and waits for its output, decoded into O.
// It is a durable step named name: the child is started once (its id is
// derived from the parent's and the step's unless opts.ID is set), and the
// child's end resumes the parent without polling. A child that errored or
// was terminated returns a *ChildError; a wait past opts.Timeout returns
// an error matching ErrInvokeTimeout.
//
//	total, err := workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "adder", Params: []int{1, 2}})
func Invoke[O any](step Step, name string, opts InvokeOptions) (O, error) {
	var out O
	raw, err := step.Invoke(name, opts)
	if err != nil {
		return out, err
	}
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("decoding output of the child of step %q: %w", name, err)
	}
	return out, nil
}

// Invoke starts the binding's workflow as a child with params and waits for
// its output, as the function Invoke does: a durable step named name whose
// child is started once and whose end resumes the parent without polling.
// opts, at most one, sets the child's id, timeout, parent policy, placement
// and compensation; its Workflow and Params must be empty, since the binding
// names the workflow and params is the input.
//
//	receipt, err := charge.Invoke(step, "charge", ChargeParams{Amount: 42})
func (b *Binding[P, O]) Invoke(step Step, name string, params P, opts ...InvokeOptions) (O, error) {
	var o InvokeOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		var zero O
		return zero, fmt.Errorf("%w: Invoke of step %q takes at most one InvokeOptions, got %d", ErrInvalidRequest, name, len(opts))
	}
	if o.Workflow != "" || o.Params != nil {
		var zero O
		return zero, fmt.Errorf("%w: Invoke of step %q through the binding of %q: InvokeOptions.Workflow and Params must be empty", ErrInvalidRequest, name, b.name)
	}
	o.Workflow, o.Params = b.name, params
	return Invoke[O](step, name, o)
}

// InvokeCall is one child of InvokeAll: the step name and its options.
type InvokeCall struct {
	Name    string
	Options InvokeOptions
}

// InvokeAll invokes every call's child, at most maxInFlight children
// running at once (0 or less: all of them), and returns their outputs and
// errors in call order. Each call is an Invoke step of its own (distinct
// names). It starts the first maxInFlight calls whose children have not
// ended (in call order), records a wait for each, and suspends the run
// until one ends; each replay finds the ended ones and starts the next, so
// the bound holds across suspends and crashes. An error that suspends the
// run (ErrSuspended) is returned as the error of the whole call; the
// children's own errors (a *ChildError, a timeout) are in errs.
func InvokeAll[O any](step Step, calls []InvokeCall, maxInFlight int) (outs []O, errs []error, err error) {
	outs, errs = make([]O, len(calls)), make([]error, len(calls))
	if maxInFlight <= 0 || maxInFlight > len(calls) {
		maxInFlight = len(calls)
	}
	for {
		first := -1
		running := 0
		for i, c := range calls {
			if running == maxInFlight {
				break
			}
			opts := c.Options
			opts.NoWait = true
			outs[i], errs[i] = Invoke[O](step, c.Name, opts)
			switch {
			case errors.Is(errs[i], ErrSuspended):
				return outs, errs, ErrSuspended
			case errors.Is(errs[i], ErrChildRunning):
				running++
				if first < 0 {
					first = i
				}
			}
		}
		if first < 0 {
			return outs, errs, nil
		}
		// Wait (suspend) on the first running child; the waits recorded
		// for the others wake the run too. A child that ended since it was
		// looked at returns its end instead: it is recorded, so look again,
		// with room for the next call.
		outs[first], errs[first] = Invoke[O](step, calls[first].Name, calls[first].Options)
		if errors.Is(errs[first], ErrSuspended) {
			return outs, errs, ErrSuspended
		}
	}
}

// InvokeEventPrefix starts the reserved event type an Invoke step waits
// on for its child's end; user event types cannot start with it (they
// match ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$).
const InvokeEventPrefix = "@invoke/"

// InvokeEventType is the event type the Invoke step key of run waits on.
func InvokeEventType(run int, key string) string {
	return fmt.Sprintf("%s%d/%s", InvokeEventPrefix, run, key)
}
