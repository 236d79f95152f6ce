-- +goose Up

-- The SQLite schema mirrors the Postgres one table for table, column for
-- column, as STRICT tables so that a value of the wrong type is rejected
-- instead of stored. Types map as follows:
--
--   timestamptz  INTEGER microseconds since the Unix epoch, UTC. Ordering and
--                comparison in SQL are integer ones, and a value reads back
--                exactly as the store wrote it (db/sqlite converts in one place).
--   json         TEXT, checked with json_valid and kept byte for byte: replay
--                must see exactly what the first run saw.
--   boolean      INTEGER 0 or 1.
--   bigserial    INTEGER PRIMARY KEY AUTOINCREMENT, so that ids, like Postgres
--                sequence values, are never handed out twice.

-- One row per workflow instance.
CREATE TABLE workflow_instance (
    workflow_name   TEXT    NOT NULL,
    instance_id     TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    params          TEXT,
    output          TEXT,
    error_name      TEXT,
    error_message   TEXT,
    pause_requested INTEGER NOT NULL DEFAULT 0,
    run_number      INTEGER NOT NULL DEFAULT 1,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    started_at      INTEGER,
    completed_at    INTEGER,
    retention_until INTEGER,
    PRIMARY KEY (workflow_name, instance_id),
    CONSTRAINT workflow_instance_status_check CHECK (status IN (
        'queued', 'running', 'waiting', 'waitingForPause', 'paused',
        'complete', 'errored', 'terminated'
    )),
    CONSTRAINT workflow_instance_run_number_check CHECK (run_number >= 1),
    CONSTRAINT workflow_instance_pause_requested_check CHECK (pause_requested IN (0, 1)),
    CONSTRAINT workflow_instance_params_check CHECK (params IS NULL OR json_valid(params)),
    CONSTRAINT workflow_instance_output_check CHECK (output IS NULL OR json_valid(output))
) STRICT;

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
    CONSTRAINT workflow_step_key_unique UNIQUE (workflow_name, instance_id, run_number, step_key),
    CONSTRAINT workflow_step_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_step_type_check CHECK (type IN ('do', 'sleep', 'waitForEvent')),
    CONSTRAINT workflow_step_status_check CHECK (status IN ('complete', 'errored', 'retrying', 'waiting')),
    CONSTRAINT workflow_step_result_check CHECK (result IS NULL OR json_valid(result))
) STRICT;

-- Events sent to an instance run, buffered until a waitForEvent consumes them;
-- id is the delivery order (oldest first).
CREATE TABLE workflow_event (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name        TEXT    NOT NULL,
    instance_id          TEXT    NOT NULL,
    run_number           INTEGER NOT NULL,
    type                 TEXT    NOT NULL,
    payload              TEXT,
    created_at           INTEGER NOT NULL,
    delivered_at         INTEGER,
    consumed_by_step_key TEXT,
    CONSTRAINT workflow_event_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_event_payload_check CHECK (payload IS NULL OR json_valid(payload))
) STRICT;

-- Finding the oldest undelivered event of a type for a run.
CREATE INDEX workflow_event_undelivered_idx
    ON workflow_event (workflow_name, instance_id, run_number, type, id)
    WHERE delivered_at IS NULL;
-- History of an instance, oldest first.
CREATE INDEX workflow_event_instance_idx
    ON workflow_event (workflow_name, instance_id, run_number, id);

-- The durable internal queue: at most one row per instance.
CREATE TABLE workflow_task (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    run_number    INTEGER NOT NULL,
    kind          TEXT    NOT NULL,
    priority      INTEGER NOT NULL,
    run_at        INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    lock_owner    TEXT,
    locked_until  INTEGER,
    version       INTEGER NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    CONSTRAINT workflow_task_instance_unique UNIQUE (workflow_name, instance_id),
    CONSTRAINT workflow_task_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_task_kind_check CHECK (kind IN ('run', 'resume', 'wake', 'retry')),
    CONSTRAINT workflow_task_priority_check CHECK (priority IN (0, 1)),
    CONSTRAINT workflow_task_status_check CHECK (status IN ('pending', 'processing')),
    CONSTRAINT workflow_task_lock_check CHECK (status = 'pending' OR locked_until IS NOT NULL)
) STRICT;

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
