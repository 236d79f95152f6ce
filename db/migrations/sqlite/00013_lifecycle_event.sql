-- +goose Up
-- The lifecycle event log: see the Postgres migration 00015_lifecycle_event.sql.
-- Times are unix microseconds, as in every other table.
CREATE TABLE lifecycle_event (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL,
    workflow_name TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    run_number INTEGER NOT NULL,
    step_key TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    detail TEXT,
    at INTEGER NOT NULL,
    worker_id TEXT
) STRICT;
CREATE INDEX lifecycle_event_instance_idx ON lifecycle_event (workflow_name, instance_id, id);
CREATE INDEX lifecycle_event_at_idx ON lifecycle_event (at);
CREATE INDEX lifecycle_event_worker_idx ON lifecycle_event (worker_id, id) WHERE worker_id IS NOT NULL;

-- +goose Down
DROP TABLE lifecycle_event;
