package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfhook"
)

// CompensationStepPrefix starts the step name of every compensation: the
// compensation of step "reserve" is the step "compensate:reserve". Workflow
// code cannot name a step with this prefix (Do returns ErrInvalidStepName).
const CompensationStepPrefix = "compensate:"

// Error names of a compensated instance.
const (
	// ErrorNameCompensationFailed is the error of an instance one of whose
	// compensations failed for good (its retries spent): its message names
	// the compensations that failed and keeps the error that started the
	// compensation.
	ErrorNameCompensationFailed = "CompensationFailedError"
	// ErrorNameCompensationRequested is the error of an instance whose
	// compensation a caller asked for (Client.Compensate): the run stopped at
	// a step boundary and its completed steps were undone.
	ErrorNameCompensationRequested = "CompensationRequestedError"
)

// ErrCompensationRequested is the error a run ends with when a caller asked
// for its compensation while it ran; the instance records it as
// ErrorNameCompensationRequested.
var ErrCompensationRequested = errors.New("compensation requested")

// CompensationFunc undoes what a completed step did. It runs as a durable
// step of its own (named CompensationStepPrefix + the step's name), with its
// own retries (configured with CompensationOptions), and is never run again
// once it succeeded.
type CompensationFunc func(ctx context.Context) error

// compensation is what Compensate, CompensateWithInvoke and
// DoWithCompensation record in a StepConfig: fn, or invoke, undoes the step.
type compensation struct {
	fn     func(ctx context.Context, result json.RawMessage) error
	invoke InvokeCompensationFunc
	opts   []StepOption
}

// Compensate registers fn as the compensation of the step it is passed to:
// when the step completes, fn is remembered, and if the workflow then fails
// for good (its Run returns an error and no workflow retry is left) or a
// caller asks for its compensation, the compensations of the completed steps
// run in the reverse order of their completion, each as a durable step
// CompensationStepPrefix + name with its own retries. opts configure that
// step (WithRetries, WithTimeout), as CompensationOptions does; it has the
// default step configuration otherwise. The instance then ends errored with the error that started the
// compensation (ErrorNameCompensationFailed when a compensation failed for
// good, after the others ran).
//
// Workflow code registers the compensation again on every replay (the
// closure is not stored); a compensation that completed is never run again.
//
//	_, err := step.Do("charge", charge, workflow.Compensate(refund))
func Compensate(fn CompensationFunc, opts ...StepOption) StepOption {
	return func(c *StepConfig) {
		comp := c.withCompensation()
		comp.fn, comp.invoke = nil, nil
		if fn != nil {
			comp.fn = func(ctx context.Context, _ json.RawMessage) error { return fn(ctx) }
		}
		comp.opts = append(comp.opts, opts...)
	}
}

// InvokeCompensationFunc describes the child workflow that undoes a
// completed step (see CompensateWithInvoke): it is called when the
// compensations run, with the step's recorded result (a Do step's result,
// an Invoke step's child output), and returns the options of the child to
// invoke. It must be deterministic, as workflow code is: it is called again
// on every replay of the compensations. An error fails the compensation for
// good.
type InvokeCompensationFunc func(result json.RawMessage) (InvokeOptions, error)

// CompensateWithInvoke registers, as the compensation of the step it is
// passed to, a child workflow that undoes it: when the compensations run
// (see Compensate), undo is called with the step's recorded result and the
// child it describes is invoked as the durable Invoke step
// CompensationStepPrefix + name, which waits for the child's end as Invoke
// does: the child is started once across crashes, and its end resumes the
// compensations. A child that errors, is terminated or outlives
// InvokeOptions.Timeout fails the compensation for good (the instance then
// ends with ErrorNameCompensationFailed, after the others ran). An Invoke is
// not retried and its timeout is InvokeOptions.Timeout, so
// CompensationOptions with retries or a timeout is refused with
// ErrInvalidRequest; InvokeOptions.Compensation and NoWait must be unset.
//
//	_, err := step.Do("charge", charge, workflow.CompensateWithInvoke(
//		func(result json.RawMessage) (workflow.InvokeOptions, error) {
//			return workflow.InvokeOptions{Workflow: "refund", Params: result}, nil
//		}))
func CompensateWithInvoke(undo InvokeCompensationFunc) StepOption {
	return func(c *StepConfig) {
		comp := c.withCompensation()
		comp.fn, comp.invoke = nil, undo
	}
}

// CompensationOptions configures the compensation step of the step it is
// passed to (with Compensate or DoWithCompensation): its retries and
// timeout, as WithRetries and WithTimeout do for a step. A compensation
// registered with CompensateWithInvoke takes none.
//
//	workflow.DoWithCompensation(step, "charge", charge, refund,
//		workflow.CompensationOptions(workflow.WithRetries(workflow.RetryPolicy{Limit: 10, Delay: time.Minute})))
func CompensationOptions(opts ...StepOption) StepOption {
	return func(c *StepConfig) {
		comp := c.withCompensation()
		comp.opts = append(comp.opts, opts...)
	}
}

// withCompensation returns the config's compensation, a copy of it the
// first time an option changes it (so that configurations copied from one
// another do not share it).
func (c *StepConfig) withCompensation() *compensation {
	if c.compensation == nil {
		c.compensation = &compensation{}
	} else {
		cp := *c.compensation
		cp.opts = append([]StepOption(nil), cp.opts...)
		c.compensation = &cp
	}
	return c.compensation
}

// DoWithCompensation runs a typed step, as Do does, and registers undo as its
// compensation (see Compensate), called with the step's recorded result.
//
//	booking, err := workflow.DoWithCompensation(step, "book hotel", bookHotel,
//		func(ctx context.Context, b Booking) error { return cancelHotel(ctx, b.ID) })
func DoWithCompensation[T any](step Step, name string, fn func(ctx context.Context) (T, error), undo func(ctx context.Context, result T) error, opts ...StepOption) (T, error) {
	var fnRaw func(ctx context.Context, raw json.RawMessage) error
	if undo != nil {
		fnRaw = func(ctx context.Context, raw json.RawMessage) error {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				return NonRetryable(fmt.Errorf("decoding result of step %q for its compensation: %w", name, err))
			}
			return undo(ctx, v)
		}
	}
	opts = append(opts[:len(opts):len(opts)], func(c *StepConfig) {
		comp := c.withCompensation()
		comp.fn, comp.invoke = fnRaw, nil
	})
	return Do(step, name, fn, opts...)
}

func init() {
	wfhook.CompensationOfFunc = func(cfg any) (wfhook.Compensation, bool) {
		c, ok := cfg.(StepConfig)
		if !ok || c.compensation == nil {
			return wfhook.Compensation{}, false
		}
		opts := make([]any, len(c.compensation.opts))
		for i, o := range c.compensation.opts {
			opts[i] = o
		}
		out := wfhook.Compensation{Func: c.compensation.fn, Options: opts}
		if c.compensation.invoke != nil {
			out.Invoke = c.compensation.invoke
		}
		return out, true
	}
}

// Compensator is the optional part of an Engine that asks for the
// compensation of an instance; the management client (client.Client) and
// the HTTP client (apiclient.Client) implement it.
type Compensator interface {
	// Compensate asks for the compensation of a live instance.
	Compensate(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)
}

// Compensate asks for the compensation of the instance (a saga's undo): a
// running instance stops at its next step boundary, any other live one is
// queued at once, and the compensations of its completed steps run in the
// reverse order of their completion. It fails with ErrInstanceTerminal on a
// terminal instance, and with ErrInvalidRequest when the registry's engine
// cannot compensate (it does not implement Compensator).
func (i *Instance[O]) Compensate(ctx context.Context) error {
	return i.change(ctx, func(e Engine, ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
		c, ok := e.(Compensator)
		if !ok {
			return nil, fmt.Errorf("%w: the engine bound to the registry cannot compensate instances", ErrInvalidRequest)
		}
		return c.Compensate(ctx, workflowName, id)
	})
}

// HasCompensation reports whether the configuration carries a compensation
// (set by Compensate, CompensateWithInvoke, CompensationOptions or
// DoWithCompensation).
func (c StepConfig) HasCompensation() bool { return c.compensation != nil }
