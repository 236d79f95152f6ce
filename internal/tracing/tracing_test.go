package tracing_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/internal/tracing"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	s := tracing.Encode(ctx)
	require.Contains(t, s, `"traceparent":"00-01020300000000000000000000000000-0405060000000000-01"`)

	got := trace.SpanContextFromContext(tracing.Context(context.Background(), s))
	require.True(t, got.IsRemote())
	require.Equal(t, sc.TraceID(), got.TraceID())
	require.Equal(t, sc.SpanID(), got.SpanID())
	require.True(t, got.IsSampled())
}

func TestNoContext(t *testing.T) {
	t.Parallel()
	require.Empty(t, tracing.Encode(context.Background()), "no span: nothing to store")
	ctx := context.Background()
	require.Equal(t, ctx, tracing.Context(ctx, ""))
	require.False(t, trace.SpanContextFromContext(tracing.Context(ctx, "not json")).IsValid())
	require.False(t, trace.SpanContextFromContext(tracing.Context(ctx, `{"traceparent":"garbage"}`)).IsValid())
}
