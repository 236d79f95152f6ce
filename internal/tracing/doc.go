// Package tracing is the engine's one encoding of a trace context as it is
// stored with an instance (db.Instance.TraceContext): the W3C trace context
// fields (traceparent, tracestate) of a span, as a JSON object. The client
// encodes its caller's span when it creates an instance; the runner decodes
// it as the remote parent of every run span of that instance. It also holds
// the attribute keys the runner's spans use (docs/tracing.md).
//
// It knows the OpenTelemetry API and nothing of the engine's packages.
package tracing
