-- +goose Up
-- OpenTelemetry tracing: see the Postgres migration 00014_trace.sql.
ALTER TABLE workflow_instance ADD COLUMN trace_context TEXT;

-- +goose Down
ALTER TABLE workflow_instance DROP COLUMN trace_context;
