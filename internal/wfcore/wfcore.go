// Package wfcore is what the engine (runner, client, schedules, flows) uses
// of package workflow beyond the authoring API: the registered workflows as
// the runner runs them, step names as the runner keys them, a step's
// resolved configuration and the context of a step attempt. Workflow authors
// never need these, so package workflow does not export them; it hands them
// over through the hooks of internal/wfhook, which this package wraps with
// workflow's types.
package wfcore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/duraflow/duraflow/internal/wfhook"
	"github.com/duraflow/duraflow/workflow"
)

// RawEvent is the untyped input the runner hands to a Runnable.
type RawEvent = wfhook.RawEvent

// Runnable is a registered workflow as the runner sees it: typed decoding and
// encoding are done inside. The step passed to Execute must be a
// workflow.Step (or nil, when the workflow takes no steps).
type Runnable = wfhook.Runnable

// Lookup returns the workflow registered under name.
func Lookup(r *workflow.Registry, name string) (Runnable, bool) {
	return wfhook.LookupFunc(r, name)
}

// LookupRun returns the workflow registered under name, as Lookup does,
// and its own bound on the steps of a run (workflow.WithMaxStepsPerRun), 0
// when the host's applies. The definition's bound stays when a runnable
// overrides the workflow (Override).
func LookupRun(r *workflow.Registry, name string) (w Runnable, maxSteps int, ok bool) {
	return wfhook.LookupRunFunc(r, name)
}

// Override makes r run for every instance of the workflow name (registered
// or not) instead of the registered workflow; a nil r ends the
// substitution. The registered definition (queue, retries, limits) stays.
// The test harness mocks child workflows with it.
func Override(r *workflow.Registry, name string, w Runnable) {
	wfhook.OverrideFunc(r, name, w)
}

// CheckParams decodes params as the workflow registered under name would
// when it runs, and returns an error wrapping workflow.ErrInvalidRequest
// with the decoder's message when they do not decode. A workflow that is
// not registered in r, or that cannot check its params (a flow, a mock),
// passes.
func CheckParams(r *workflow.Registry, name string, params json.RawMessage) error {
	w, ok := wfhook.LookupFunc(r, name)
	if !ok {
		return nil
	}
	pc, ok := w.(wfhook.ParamsChecker)
	if !ok {
		return nil
	}
	if err := pc.CheckParams(params); err != nil {
		return fmt.Errorf("%w: %v", workflow.ErrInvalidRequest, err)
	}
	return nil
}

// Registered reports whether a workflow is registered under name.
func Registered(r *workflow.Registry, name string) bool {
	_, ok := wfhook.LookupFunc(r, name)
	return ok
}

// NormalizeStepName trims a step name and checks it: 1 to
// workflow.MaxStepNameLength characters with no control characters. The
// trimmed name is the step's identity. It fails with
// workflow.ErrInvalidStepName.
func NormalizeStepName(name string) (string, error) {
	key := strings.TrimSpace(name)
	if key == "" {
		return "", fmt.Errorf("%w: empty", workflow.ErrInvalidStepName)
	}
	if !utf8.ValidString(key) {
		return "", fmt.Errorf("%w: %q is not valid UTF-8", workflow.ErrInvalidStepName, wfhook.Truncate(key))
	}
	if utf8.RuneCountInString(key) > workflow.MaxStepNameLength {
		return "", fmt.Errorf("%w: %q is longer than %d characters", workflow.ErrInvalidStepName, wfhook.Truncate(key), workflow.MaxStepNameLength)
	}
	if strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("%w: %q contains control characters", workflow.ErrInvalidStepName, wfhook.Truncate(key))
	}
	return key, nil
}

// NewStepConfig applies opts to an empty configuration and fills defaults.
func NewStepConfig(opts ...workflow.StepOption) workflow.StepConfig {
	return RawStepConfig(opts...).Resolved()
}

// RawStepConfig is the configuration opts set, without the defaults
// NewStepConfig fills in: what an author asked for.
func RawStepConfig(opts ...workflow.StepOption) workflow.StepConfig {
	var c workflow.StepConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// ContextWithStepInfo returns a context carrying info, which
// workflow.StepInfoFromContext and workflow.Attempt read. The runner calls
// it for every attempt.
func ContextWithStepInfo(ctx context.Context, info workflow.StepInfo) context.Context {
	return context.WithValue(ctx, wfhook.StepInfoKey{}, info)
}

// Compensation is a step's compensation: Func undoes the step given its
// recorded result, or Invoke describes the child workflow that undoes it
// (workflow.CompensateWithInvoke); Options configure the compensation step.
type Compensation struct {
	Func    func(ctx context.Context, result json.RawMessage) error
	Invoke  workflow.InvokeCompensationFunc
	Options []workflow.StepOption
}

// CompensationOf returns the compensation workflow.Compensate,
// workflow.CompensateWithInvoke or workflow.DoWithCompensation recorded in
// cfg, if any.
func CompensationOf(cfg workflow.StepConfig) (Compensation, bool) {
	if !cfg.HasCompensation() || wfhook.CompensationOfFunc == nil {
		return Compensation{}, false
	}
	c, ok := wfhook.CompensationOfFunc(cfg)
	if !ok {
		return Compensation{}, false
	}
	opts := make([]workflow.StepOption, 0, len(c.Options))
	for _, o := range c.Options {
		if so, ok := o.(workflow.StepOption); ok {
			opts = append(opts, so)
		}
	}
	out := Compensation{Func: c.Func, Options: opts}
	out.Invoke, _ = c.Invoke.(workflow.InvokeCompensationFunc)
	return out, true
}
