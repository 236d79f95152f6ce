package tracing

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the engine's tracers.
const ScopeName = "github.com/duraflow/duraflow"

// Attribute keys of the engine's spans. Every one carries the duraflow.
// prefix.
const (
	AttrWorkflow    = "duraflow.workflow"
	AttrInstanceID  = "duraflow.instance_id"
	AttrRunNumber   = "duraflow.run_number"
	AttrRunAttempt  = "duraflow.run_attempt"
	AttrTaskKind    = "duraflow.task.kind"
	AttrTaskAttempt = "duraflow.task.attempt"
	AttrOutcome     = "duraflow.outcome"
	AttrStep        = "duraflow.step"
	AttrStepType    = "duraflow.step.type"
	AttrStepAttempt = "duraflow.step.attempt"
	AttrErrorName   = "duraflow.error.name"
	AttrWakeAt      = "duraflow.wake_at"
	AttrEventType   = "duraflow.event_type"
	AttrChildID     = "duraflow.child.instance_id"
	AttrChildName   = "duraflow.child.workflow"
)

// w3c is the propagator of the stored form: W3C trace context, whatever
// propagator the process configured globally, so that a stored context
// reads the same in every process.
var w3c propagation.TraceContext

// Encode returns the stored form of the span context of ctx's span; "" when
// ctx carries no valid span context (nothing is stored then).
func Encode(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	if carrier["traceparent"] == "" {
		return ""
	}
	b, err := json.Marshal(map[string]string(carrier))
	if err != nil {
		return ""
	}
	return string(b)
}

// Context returns ctx with the span context stored in s as its remote
// parent; ctx as it is when s is empty or unreadable (a trace context is
// an aid, never a reason to fail a run).
func Context(ctx context.Context, s string) context.Context {
	if s == "" {
		return ctx
	}
	var carrier map[string]string
	if err := json.Unmarshal([]byte(s), &carrier); err != nil {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier(carrier))
}
