-- +goose Up
-- Awaitable child workflows: see the Postgres migration 00013_invoke.sql
-- for what each column means.
ALTER TABLE workflow_instance ADD COLUMN parent_workflow_name TEXT;
ALTER TABLE workflow_instance ADD COLUMN parent_instance_id TEXT;
ALTER TABLE workflow_instance ADD COLUMN parent_run_number INTEGER;
ALTER TABLE workflow_instance ADD COLUMN parent_step_key TEXT;
ALTER TABLE workflow_instance ADD COLUMN parent_policy TEXT
    CHECK (parent_policy IS NULL OR parent_policy IN ('terminate', 'abandon'));

CREATE INDEX workflow_instance_parent_idx
    ON workflow_instance (parent_workflow_name, parent_instance_id, created_at, instance_id)
    WHERE parent_instance_id IS NOT NULL;

-- An Invoke step's row has its own type, 'invoke'. SQLite cannot change a
-- CHECK constraint in place: workflow_step is rebuilt with the new check
-- (every column, id and row kept; nothing references the table). The old
-- table is renamed away first, so that the new one keeps its name as
-- written (a renamed table's stored SQL quotes its new name).
ALTER TABLE workflow_step RENAME TO workflow_step_old;
DROP INDEX workflow_step_run_id_idx;
CREATE TABLE workflow_step (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name   TEXT    NOT NULL,
    instance_id     TEXT    NOT NULL,
    run_number      INTEGER NOT NULL,
    step_key        TEXT    NOT NULL,
    type            TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL DEFAULT 0,
    timeout_ms      INTEGER NOT NULL DEFAULT 0,
    next_retry_at   INTEGER,
    wake_at         INTEGER,
    wait_event_type TEXT,
    result          TEXT,
    error_name      TEXT,
    error_message   TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    completed_at    INTEGER,
    started_at      INTEGER,
    CONSTRAINT workflow_step_key_unique UNIQUE (workflow_name, instance_id, run_number, step_key),
    CONSTRAINT workflow_step_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_step_type_check CHECK (type IN ('do', 'sleep', 'waitForEvent', 'invoke')),
    CONSTRAINT workflow_step_status_check CHECK (status IN ('complete', 'errored', 'retrying', 'waiting')),
    CONSTRAINT workflow_step_result_check CHECK (result IS NULL OR json_valid(result))
) STRICT;
INSERT INTO workflow_step (
    id, workflow_name, instance_id, run_number, step_key, type, status, attempts, max_attempts,
    timeout_ms, next_retry_at, wake_at, wait_event_type, result, error_name, error_message,
    created_at, updated_at, completed_at, started_at
)
SELECT id, workflow_name, instance_id, run_number, step_key, type, status, attempts, max_attempts,
    timeout_ms, next_retry_at, wake_at, wait_event_type, result, error_name, error_message,
    created_at, updated_at, completed_at, started_at
FROM workflow_step_old;
DROP TABLE workflow_step_old;
CREATE INDEX workflow_step_run_id_idx
    ON workflow_step (workflow_name, instance_id, run_number, id);

-- +goose Down
-- workflow_step keeps the check that allows 'invoke': a rebuild back would
-- refuse the rows of invoke steps.
DROP INDEX workflow_instance_parent_idx;
ALTER TABLE workflow_instance DROP COLUMN parent_policy;
ALTER TABLE workflow_instance DROP COLUMN parent_step_key;
ALTER TABLE workflow_instance DROP COLUMN parent_run_number;
ALTER TABLE workflow_instance DROP COLUMN parent_instance_id;
ALTER TABLE workflow_instance DROP COLUMN parent_workflow_name;
