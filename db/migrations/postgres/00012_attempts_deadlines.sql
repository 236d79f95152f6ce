-- +goose Up
-- Retries and deadlines (fleet control). Every statement adds a column with
-- a constant default or NULL (no table rewrite) or a new table, so it is
-- correct after any of the other fleet-control migrations.

-- deadline_at: when the instance errors with DeadlineExceeded if it has not
-- ended (NULL: no deadline). run_attempt: the run of the current run number
-- a workflow retry started, from 1.
ALTER TABLE workflow_instance ADD COLUMN deadline_at timestamptz;
ALTER TABLE workflow_instance ADD COLUMN run_attempt integer NOT NULL DEFAULT 1;

-- started_at: when the step's latest attempt started, carried by the step
-- write the checkpoint makes anyway.
ALTER TABLE workflow_step ADD COLUMN started_at timestamptz;

-- running_steps: the steps the holder of the task runs now, as the runner's
-- lease heartbeat last wrote them ({"version": v, "steps": [...]}); read
-- only when v is the task's version and the lease holds.
ALTER TABLE workflow_task ADD COLUMN running_steps json;

-- One row per failed attempt of a step, written by the checkpoint that
-- records the failure (a retry or the final error). The last attempt of a
-- step that completed is its step row (started_at, completed_at).
CREATE TABLE workflow_step_attempt (
    id            bigserial   PRIMARY KEY,
    workflow_name text        NOT NULL,
    instance_id   text        NOT NULL,
    run_number    integer     NOT NULL,
    run_attempt   integer     NOT NULL,
    step_key      text        NOT NULL,
    attempt       integer     NOT NULL,
    started_at    timestamptz,
    ended_at      timestamptz NOT NULL,
    error_name    text,
    error_message text,
    CONSTRAINT workflow_step_attempt_unique
        UNIQUE (workflow_name, instance_id, run_number, run_attempt, step_key, attempt),
    CONSTRAINT workflow_step_attempt_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE workflow_step_attempt;
ALTER TABLE workflow_task DROP COLUMN running_steps;
ALTER TABLE workflow_step DROP COLUMN started_at;
ALTER TABLE workflow_instance DROP COLUMN run_attempt;
ALTER TABLE workflow_instance DROP COLUMN deadline_at;
