-- +goose Up

-- One row per workflow instance. JSON columns are json, not jsonb, so the
-- text comes back byte for byte as written: replay must see exactly what the
-- first run saw.
CREATE TABLE workflow_instance (
    workflow_name   text        NOT NULL,
    instance_id     text        NOT NULL,
    status          text        NOT NULL,
    params          json,
    output          json,
    error_name      text,
    error_message   text,
    pause_requested boolean     NOT NULL DEFAULT false,
    run_number      integer     NOT NULL DEFAULT 1,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    started_at      timestamptz,
    completed_at    timestamptz,
    retention_until timestamptz,
    PRIMARY KEY (workflow_name, instance_id),
    CONSTRAINT workflow_instance_status_check CHECK (status IN (
        'queued', 'running', 'waiting', 'waitingForPause', 'paused',
        'complete', 'errored', 'terminated'
    )),
    CONSTRAINT workflow_instance_run_number_check CHECK (run_number >= 1)
);

-- Lists filtered by workflow and status, newest update first.
CREATE INDEX workflow_instance_name_status_updated_idx
    ON workflow_instance (workflow_name, status, updated_at, instance_id);
-- Lists of one workflow without a status filter.
CREATE INDEX workflow_instance_name_updated_idx
    ON workflow_instance (workflow_name, updated_at, instance_id);
-- The unfiltered list order (keyset pagination).
CREATE INDEX workflow_instance_updated_idx
    ON workflow_instance (updated_at, workflow_name, instance_id);

-- One row per checkpointed step of an instance run; id is the creation order.
CREATE TABLE workflow_step (
    id              bigserial   PRIMARY KEY,
    workflow_name   text        NOT NULL,
    instance_id     text        NOT NULL,
    run_number      integer     NOT NULL,
    step_key        text        NOT NULL,
    type            text        NOT NULL,
    status          text        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 0,
    timeout_ms      bigint      NOT NULL DEFAULT 0,
    next_retry_at   timestamptz,
    wake_at         timestamptz,
    wait_event_type text,
    result          json,
    error_name      text,
    error_message   text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    CONSTRAINT workflow_step_key_unique UNIQUE (workflow_name, instance_id, run_number, step_key),
    CONSTRAINT workflow_step_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_step_type_check CHECK (type IN ('do', 'sleep', 'waitForEvent')),
    CONSTRAINT workflow_step_status_check CHECK (status IN ('complete', 'errored', 'retrying', 'waiting'))
);

-- Events sent to an instance run, buffered until a waitForEvent consumes them;
-- id is the delivery order (oldest first).
CREATE TABLE workflow_event (
    id                   bigserial   PRIMARY KEY,
    workflow_name        text        NOT NULL,
    instance_id          text        NOT NULL,
    run_number           integer     NOT NULL,
    type                 text        NOT NULL,
    payload              json,
    created_at           timestamptz NOT NULL,
    delivered_at         timestamptz,
    consumed_by_step_key text,
    CONSTRAINT workflow_event_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE
);

-- Finding the oldest undelivered event of a type for a run.
CREATE INDEX workflow_event_undelivered_idx
    ON workflow_event (workflow_name, instance_id, run_number, type, id)
    WHERE delivered_at IS NULL;
-- History of an instance, oldest first.
CREATE INDEX workflow_event_instance_idx
    ON workflow_event (workflow_name, instance_id, run_number, id);

-- The durable internal queue: at most one row per instance. Rows are updated
-- often (claim, heartbeat, release), so pages keep free room for new row
-- versions (HOT whenever no indexed column changes).
CREATE TABLE workflow_task (
    id            bigserial   PRIMARY KEY,
    workflow_name text        NOT NULL,
    instance_id   text        NOT NULL,
    run_number    integer     NOT NULL,
    kind          text        NOT NULL,
    priority      smallint    NOT NULL,
    run_at        timestamptz NOT NULL,
    status        text        NOT NULL,
    lock_owner    text,
    locked_until  timestamptz,
    version       bigint      NOT NULL DEFAULT 0,
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    CONSTRAINT workflow_task_instance_unique UNIQUE (workflow_name, instance_id),
    CONSTRAINT workflow_task_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_task_kind_check CHECK (kind IN ('run', 'resume', 'wake', 'retry')),
    CONSTRAINT workflow_task_status_check CHECK (status IN ('pending', 'processing')),
    CONSTRAINT workflow_task_lock_check CHECK (status = 'pending' OR locked_until IS NOT NULL)
) WITH (fillfactor = 70);

-- Claiming due pending tasks: resuming work first, then oldest run_at.
CREATE INDEX workflow_task_pending_idx
    ON workflow_task (priority, run_at, id)
    WHERE status = 'pending';
-- Reclaiming processing tasks whose lease expired.
CREATE INDEX workflow_task_processing_idx
    ON workflow_task (locked_until)
    WHERE status = 'processing';

-- +goose Down
DROP TABLE workflow_task;
DROP TABLE workflow_event;
DROP TABLE workflow_step;
DROP TABLE workflow_instance;
