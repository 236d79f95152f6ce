-- +goose Up
-- OpenTelemetry tracing (docs/tracing.md): the trace context of the caller
-- that created an instance (the W3C traceparent and tracestate, as a JSON
-- object of the propagator's fields), so that every run pass of the
-- instance, hours later, links to the request that started it. Only
-- creates made inside a sampled-or-recorded span with tracing configured
-- write it, in a statement of their own; every other instance keeps it
-- NULL and pays nothing. Adding a nullable column rewrites nothing.
ALTER TABLE workflow_instance ADD COLUMN trace_context text;

-- +goose Down
ALTER TABLE workflow_instance DROP COLUMN trace_context;
