package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// tracingEnabled reports whether the standard OpenTelemetry variables ask
// for traces to be exported: OTEL_TRACES_EXPORTER set to otlp, or an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or its traces form) set while
// OTEL_TRACES_EXPORTER is not "none". Tracing is off otherwise.
func tracingEnabled(getenv func(string) string) (bool, error) {
	switch exp := strings.TrimSpace(strings.ToLower(getenv("OTEL_TRACES_EXPORTER"))); exp {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (over HTTP) and none are supported", exp)
	}
}

// newTracerProvider builds the OTLP/HTTP exporter and a batching tracer
// provider from the standard OTEL_ variables (endpoint, headers, timeout,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER), or
// returns nil when they do not turn tracing on.
func newTracerProvider(ctx context.Context) (*sdktrace.TracerProvider, error) {
	on, err := tracingEnabled(os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("building the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("duraflow")))
	if err != nil {
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	// The variables (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) win over
	// the default service name.
	if env, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		if merged, err := resource.Merge(res, env); err == nil {
			res = merged
		}
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
