// Package wfhook is the leaf through which package workflow lets the engine
// (package wfcore, and through it the runner and the client) reach what the
// authoring API does not export: a registry's workflows, the input a run
// gets, and the context key of a step attempt. Package workflow imports it
// and fills in its hooks at init; nothing else should use it directly:
// wfcore wraps it with workflow's types.
//
// It imports nothing of the module, so package workflow can import it.
package wfhook

import (
	"context"
	"encoding/json"
	"time"
)

// RawEvent is the untyped input the runner hands to a Runnable.
type RawEvent struct {
	Payload      json.RawMessage
	Timestamp    time.Time
	InstanceID   string
	WorkflowName string
	RunNumber    int
	Metadata     json.RawMessage
	// MaxPayloadBytes bounds the encoded output (the runner's
	// workflow.EngineLimits); 0 is workflow.MaxPayloadBytes.
	MaxPayloadBytes int
}

// Runnable is a registered workflow as the runner sees it: typed decoding and
// encoding are done inside.
type Runnable interface {
	// Name is the registered name.
	Name() string
	// Execute decodes the params, calls Run with step, a workflow.Step (or
	// nil), and encodes its output as JSON.
	Execute(ctx context.Context, event RawEvent, step any) (json.RawMessage, error)
}

// ParamsChecker is a Runnable that can check an instance's params before
// it runs: CheckParams decodes them as Execute would and returns the
// decoder's error. Go workflows (the functions workflow.Register takes) implement it.
type ParamsChecker interface {
	CheckParams(params json.RawMessage) error
}

// LookupFunc returns the workflow registered under name in registry, a
// *workflow.Registry. Package workflow sets it at init.
var LookupFunc func(registry any, name string) (Runnable, bool)

// LookupRunFunc is LookupFunc for the runner: it also returns the
// workflow's own bound on the steps of a run (workflow.WithMaxStepsPerRun),
// 0 when it has none. Package workflow sets it at init.
var LookupRunFunc func(registry any, name string) (r Runnable, maxSteps int, ok bool)

// OverrideFunc makes lookups of name in registry, a *workflow.Registry,
// return r instead of the workflow registered under the name (or instead of
// none), or, with r nil, ends the substitution. Package workflow sets it at
// init; the test harness substitutes mocked child workflows through it.
var OverrideFunc func(registry any, name string, r Runnable)

// StepInfoKey is the context key of the workflow.StepInfo of a step attempt.
type StepInfoKey struct{}

// Truncate shortens s for an error message.
func Truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// Compensation is a step's compensation as workflow.Compensate records it:
// Func undoes the step given its recorded result, or Invoke, a
// workflow.InvokeCompensationFunc, describes the child that undoes it
// (workflow.CompensateWithInvoke); Options are the compensation step's
// workflow.StepOption values.
type Compensation struct {
	Func    func(ctx context.Context, result json.RawMessage) error
	Invoke  any
	Options []any
}

// CompensationOfFunc returns the compensation recorded in cfg, a
// workflow.StepConfig. Package workflow sets it at init.
var CompensationOfFunc func(cfg any) (Compensation, bool)
