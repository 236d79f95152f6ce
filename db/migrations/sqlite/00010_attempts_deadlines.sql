-- +goose Up
-- Retries and deadlines (fleet control): see the Postgres migration
-- 00012_attempts_deadlines.sql for what each column means. Times are Unix
-- microseconds, as in every table.
ALTER TABLE workflow_instance ADD COLUMN deadline_at INTEGER;
ALTER TABLE workflow_instance ADD COLUMN run_attempt INTEGER NOT NULL DEFAULT 1;
ALTER TABLE workflow_step ADD COLUMN started_at INTEGER;
ALTER TABLE workflow_task ADD COLUMN running_steps TEXT;

CREATE TABLE workflow_step_attempt (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    run_number    INTEGER NOT NULL,
    run_attempt   INTEGER NOT NULL,
    step_key      TEXT    NOT NULL,
    attempt       INTEGER NOT NULL,
    started_at    INTEGER,
    ended_at      INTEGER NOT NULL,
    error_name    TEXT,
    error_message TEXT,
    CONSTRAINT workflow_step_attempt_unique
        UNIQUE (workflow_name, instance_id, run_number, run_attempt, step_key, attempt),
    CONSTRAINT workflow_step_attempt_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE
) STRICT;

-- +goose Down
DROP TABLE workflow_step_attempt;
ALTER TABLE workflow_task DROP COLUMN running_steps;
ALTER TABLE workflow_step DROP COLUMN started_at;
ALTER TABLE workflow_instance DROP COLUMN run_attempt;
ALTER TABLE workflow_instance DROP COLUMN deadline_at;
