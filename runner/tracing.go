package runner

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/tracing"
	"github.com/duraflow/duraflow/workflow"
)

// Tracing (docs/tracing.md). A runner without Config.TracerProvider has a
// nil tracer, and every function here returns at its first line: no span,
// no attribute, no allocation on the hot path.

// startRunSpan starts the span of one run pass (the execution of a claimed
// task) as a child of the trace context the instance's create stored, and
// returns ctx with it; nil and ctx when tracing is off.
//
// The stored context is the run span's parent, not a link: every pass of
// an instance, hours or days apart, then sits in the creator's trace, under
// the request that started it, which is the picture an operator looks for
// ("what did this request cause?"). A pass of an instance created with no
// span is a root.
func (r *Runner) startRunSpan(ctx context.Context, task *db.Task, inst *db.Instance) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, nil
	}
	parent := tracing.Context(ctx, inst.TraceContext)
	ctx, span := r.tracer.Start(parent, "run "+inst.WorkflowName,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String(tracing.AttrWorkflow, inst.WorkflowName),
			attribute.String(tracing.AttrInstanceID, inst.ID),
			attribute.Int(tracing.AttrRunNumber, inst.RunNumber),
			attribute.Int(tracing.AttrRunAttempt, inst.RunAttempt),
			attribute.String(tracing.AttrTaskKind, string(task.Kind)),
			attribute.Int64(tracing.AttrTaskAttempt, int64(task.Attempts)),
		),
	)
	return ctx, span
}

// endRunSpan ends the run span with the outcome the run's last checkpoint
// committed (none when it committed none: a lost lease, a release).
func (e *execution) endRunSpan() {
	if e.span == nil {
		return
	}
	e.span.End()
}

// traceOutcome records the committed outcome of the run pass on its span.
func (e *execution) traceOutcome(p *db.CheckpointParams) {
	if e.span == nil {
		return
	}
	var outcome string
	switch p.Outcome {
	case db.OutcomeSuspend:
		outcome = "suspend"
	case db.OutcomePark:
		outcome = "park"
	case db.OutcomeComplete:
		outcome = "complete"
	case db.OutcomeError:
		outcome = "error"
		e.span.SetAttributes(attribute.String(tracing.AttrErrorName, p.ErrorName))
		e.span.SetStatus(codes.Error, p.ErrorMessage)
	default:
		outcome = "continue"
	}
	e.span.SetAttributes(attribute.String(tracing.AttrOutcome, outcome))
}

// traceAbandon records on the run span that the pass gave its task back
// without an outcome (a lost lease, a store failure, a stop).
func (e *execution) traceAbandon(cause error) {
	if e.span == nil {
		return
	}
	e.span.AddEvent("abandoned", trace.WithAttributes(attribute.String("duraflow.cause", cause.Error())))
}

// startStepSpan starts the span of one step attempt that runs (not a
// replayed result) under the run span; nil when tracing is off.
func (e *execution) startStepSpan(key string, typ db.StepType, attempt int) trace.Span {
	if e.span == nil {
		return nil
	}
	_, span := e.r.tracer.Start(trace.ContextWithSpan(context.Background(), e.span), "step "+key,
		trace.WithAttributes(
			attribute.String(tracing.AttrWorkflow, e.inst.WorkflowName),
			attribute.String(tracing.AttrInstanceID, e.inst.ID),
			attribute.Int(tracing.AttrRunNumber, e.inst.RunNumber),
			attribute.String(tracing.AttrStep, key),
			attribute.String(tracing.AttrStepType, string(typ)),
			attribute.Int(tracing.AttrStepAttempt, attempt),
		),
	)
	return span
}

// endStepSpan ends a step attempt's span, with err recorded and the status
// Error when the attempt failed.
func endStepSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetAttributes(attribute.String(tracing.AttrErrorName, workflow.ErrorName(err)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceWait adds an event to the run span for a wait that suspends the
// run: a sleep, an event wait, a retry delay or a child's end.
func (e *execution) traceWait(w *wait, write *db.StepWrite) {
	if e.span == nil {
		return
	}
	name := "wait"
	attrs := make([]attribute.KeyValue, 0, 4)
	if write != nil {
		attrs = append(attrs, attribute.String(tracing.AttrStep, write.Key), attribute.String(tracing.AttrStepType, string(write.Type)))
		switch write.Type {
		case db.StepTypeSleep:
			name = "sleep"
		case db.StepTypeWaitForEvent:
			name = "waitForEvent"
			attrs = append(attrs, attribute.String(tracing.AttrEventType, write.WaitEventType))
		case db.StepTypeInvoke:
			name = "invoke.wait"
		case db.StepTypeDo:
			name = "retry"
		}
	}
	if w != nil {
		if w.kind == db.TaskKindRetry && write == nil {
			name = "retry.wait"
		}
		attrs = append(attrs, attribute.String(tracing.AttrWakeAt, w.at.UTC().Format(time.RFC3339Nano)))
	}
	e.span.AddEvent(name, trace.WithAttributes(attrs...))
}
