package duraflow_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// newTracing is a tracer provider that records every span in memory.
func newTracing(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spanAttr is the value of a span's attribute key, invalid when absent.
func spanAttr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// spansNamed returns the ended spans whose name starts with prefix.
func spansNamed(exp *tracetest.InMemoryExporter, prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingSpansNestAndLinkToCreator runs a workflow of three steps, one
// of which fails once and is retried, and a sleep that suspends it, on each
// backend, with the create made inside a span: every run pass (three: the
// first, the one after the retry delay, the one after the sleep) is a child
// of the creator's span, every step attempt a child of its pass, with the
// attributes and the error recorded.
func TestTracingSpansNestAndLinkToCreator(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		tp, exp := newTracing(t)
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithTracerProvider(tp), testharness.WithJitter(0.5))
		var failed atomic.Bool
		wf := workflow.MustRegister(h.Registry, "traced", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			_, err := workflow.Do(step, "b", func(context.Context) (int, error) {
				if !failed.Swap(true) {
					return 0, errors.New("flaky")
				}
				return 2, nil
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: 3, Delay: time.Minute, Backoff: workflow.BackoffConstant}))
			if err != nil {
				return "", err
			}
			if err := step.Sleep("nap", time.Hour); err != nil {
				return "", err
			}
			return workflow.Do(step, "c", func(ctx context.Context) (string, error) {
				if !trace.SpanContextFromContext(ctx).IsValid() {
					return "", workflow.NonRetryable(errors.New("the step's context carries no span"))
				}
				return "done", nil
			})
		})

		ctx, creator := tp.Tracer("test").Start(h.Context(), "handle request")
		_, err := wf.Create(ctx, workflow.CreateOptions[any]{ID: "t1"})
		require.NoError(t, err)
		creator.End()
		h.RunUntilIdle()
		h.RequireStatus("traced", "t1", dftype.StatusComplete)

		creatorSC := creator.SpanContext()
		runs := spansNamed(exp, "run traced")
		require.Len(t, runs, 3, "three passes: the first, after the retry delay, after the sleep")
		runIDs := map[trace.SpanID]bool{}
		for _, r := range runs {
			require.Equal(t, creatorSC.TraceID(), r.SpanContext.TraceID(), "every pass is in the creator's trace")
			require.Equal(t, creatorSC.SpanID(), r.Parent.SpanID(), "every pass is a child of the creator's span")
			require.Equal(t, trace.SpanKindConsumer, r.SpanKind)
			require.Equal(t, "traced", spanAttr(r, "duraflow.workflow").AsString())
			require.Equal(t, "t1", spanAttr(r, "duraflow.instance_id").AsString())
			require.Equal(t, int64(1), spanAttr(r, "duraflow.run_number").AsInt64())
			runIDs[r.SpanContext.SpanID()] = true
		}
		outcomes := []string{}
		for _, r := range runs {
			outcomes = append(outcomes, spanAttr(r, "duraflow.outcome").AsString())
		}
		require.Equal(t, []string{"suspend", "suspend", "complete"}, outcomes)
		eventNames := func(s tracetest.SpanStub) []string {
			var names []string
			for _, ev := range s.Events {
				names = append(names, ev.Name)
			}
			return names
		}
		require.Contains(t, eventNames(runs[0]), "retry", "the retry delay is an event of the first pass")
		require.Contains(t, eventNames(runs[1]), "sleep", "the sleep is an event of the second pass")

		steps := spansNamed(exp, "step ")
		byName := map[string][]tracetest.SpanStub{}
		for _, s := range steps {
			require.True(t, runIDs[s.Parent.SpanID()], "step span %s is a child of a run span", s.Name)
			require.Equal(t, creatorSC.TraceID(), s.SpanContext.TraceID())
			require.Equal(t, "traced", spanAttr(s, "duraflow.workflow").AsString())
			require.Equal(t, "do", spanAttr(s, "duraflow.step.type").AsString())
			byName[spanAttr(s, "duraflow.step").AsString()] = append(byName[spanAttr(s, "duraflow.step").AsString()], s)
		}
		require.Len(t, byName["a"], 1, "a runs once: its result is replayed afterwards")
		require.Len(t, byName["c"], 1)
		require.Len(t, byName["b"], 2, "b's two attempts")
		first, second := byName["b"][0], byName["b"][1]
		require.Equal(t, int64(1), spanAttr(first, "duraflow.step.attempt").AsInt64())
		require.Equal(t, codes.Error, first.Status.Code)
		require.Equal(t, "flaky", first.Status.Description)
		require.Equal(t, "exception", first.Events[0].Name, "the error is recorded")
		require.Equal(t, int64(2), spanAttr(second, "duraflow.step.attempt").AsInt64())
		require.Equal(t, codes.Unset, second.Status.Code)
		require.Equal(t, runs[0].SpanContext.SpanID(), first.Parent.SpanID(), "the failed attempt is under the first pass")
		require.Equal(t, runs[1].SpanContext.SpanID(), second.Parent.SpanID(), "the retry is under the second pass")
		require.Equal(t, runs[2].SpanContext.SpanID(), byName["c"][0].Parent.SpanID(), "c is under the pass after the sleep")
	})
}

// TestTracingOffStoresNothing checks that without a tracer provider a
// create inside a span stores no trace context.
func TestTracingOffStoresNothing(t *testing.T) {
	t.Parallel()
	tp, _ := newTracing(t)
	h := testharness.New(t)
	wf := workflow.MustRegister(h.Registry, "plain", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (int, error) { return 1, nil })
	ctx, span := tp.Tracer("test").Start(h.Context(), "request")
	defer span.End()
	_, err := wf.Create(ctx, workflow.CreateOptions[any]{ID: "p1"})
	require.NoError(t, err)
	inst, err := h.Store.InstanceGet(h.Context(), db.InstanceRef{WorkflowName: "plain", ID: "p1"})
	require.NoError(t, err)
	require.Empty(t, inst.TraceContext)
}

// TestTracingInvokeChildDescendsFromStep checks, on each backend, that the
// run of a child an Invoke step started descends from that step's span.
func TestTracingInvokeChildDescendsFromStep(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		tp, exp := newTracing(t)
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithTracerProvider(tp))
		workflow.MustRegister(h.Registry, "child", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
			return workflow.Do(step, "double", func(context.Context) (int, error) { return ev.Payload * 2, nil })
		})
		parent := workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "call", workflow.InvokeOptions{Workflow: "child", Params: ev.Payload})
		})
		ctx, creator := tp.Tracer("test").Start(h.Context(), "request")
		_, err := parent.Create(ctx, workflow.CreateOptions[int]{ID: "p", Params: 21})
		require.NoError(t, err)
		creator.End()
		h.RunUntilIdle()
		h.RequireStatus("parent", "p", dftype.StatusComplete)

		invokes := spansNamed(exp, "step call")
		require.Len(t, invokes, 1)
		inv := invokes[0]
		require.Equal(t, "invoke", spanAttr(inv, "duraflow.step.type").AsString())
		require.Equal(t, "child", spanAttr(inv, "duraflow.child.workflow").AsString())
		childRuns := spansNamed(exp, "run child")
		require.NotEmpty(t, childRuns)
		for _, r := range childRuns {
			require.Equal(t, creator.SpanContext().TraceID(), r.SpanContext.TraceID(), "the child is in the creator's trace")
			require.Equal(t, inv.SpanContext.SpanID(), r.Parent.SpanID(), "the child's run is a child of the invoke step's span")
		}
		parentRuns := spansNamed(exp, "run parent")
		require.NotEmpty(t, parentRuns)
		for _, r := range parentRuns {
			require.Equal(t, creator.SpanContext().SpanID(), r.Parent.SpanID())
		}
	})
}

// TestTracingHTTPCreateLinksToTraceparent creates an instance over HTTP
// with a W3C traceparent header, on each backend: the run descends from
// the caller's span.
func TestTracingHTTPCreateLinksToTraceparent(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		tp, exp := newTracing(t)
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithTracerProvider(tp))
		workflow.MustRegister(h.Registry, "web", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "one", func(context.Context) (int, error) { return 1, nil })
		})
		api, err := httpapi.New(&httpapi.Config{Client: h.Client})
		require.NoError(t, err)
		srv := httptest.NewServer(api.Handler())
		t.Cleanup(srv.Close)

		const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		req, err := http.NewRequestWithContext(h.Context(), http.MethodPost, srv.URL+"/api/workflows/web/instances", strings.NewReader(`{"id":"w1"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-"+traceID+"-"+spanID+"-01")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		require.Equal(t, http.StatusCreated, res.StatusCode)
		h.RunUntilIdle()
		h.RequireStatus("web", "w1", dftype.StatusComplete)

		runs := spansNamed(exp, "run web")
		require.Len(t, runs, 1)
		require.Equal(t, traceID, runs[0].SpanContext.TraceID().String())
		require.Equal(t, spanID, runs[0].Parent.SpanID().String())
		require.True(t, runs[0].Parent.IsRemote())
	})
}
