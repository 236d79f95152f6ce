-- +goose Up

-- The worker registry: one row per runner (worker_id is the runner's ID, the
-- lock_owner of the tasks it holds). A runner registers when it starts (an
-- upsert: the same id, which a restart of the same host and pid gets again,
-- re-registers the same row), heartbeats on an interval with its active
-- count and totals, and deregisters on a clean stop (status offline,
-- deregistered_at set). A reaper marks a worker whose heartbeat is older
-- than its threshold offline (deregistered_at stays NULL) and releases the
-- tasks it held at once. A drain request (drain_requested_at) sets the
-- status draining; the worker sees it at its next heartbeat. Types map as
-- in 00001_init.sql; labels is a JSON object, queues and workflows JSON
-- arrays of strings.
CREATE TABLE workflow_worker (
    worker_id          TEXT    NOT NULL PRIMARY KEY,
    hostname           TEXT    NOT NULL,
    pid                INTEGER NOT NULL,
    version            TEXT    NOT NULL DEFAULT '',
    labels             TEXT    NOT NULL DEFAULT '{}',
    queues             TEXT    NOT NULL DEFAULT '[]',
    workflows          TEXT    NOT NULL DEFAULT '[]',
    max_concurrency    INTEGER NOT NULL,
    active_count       INTEGER NOT NULL DEFAULT 0,
    completed_total    INTEGER NOT NULL DEFAULT 0,
    failed_total       INTEGER NOT NULL DEFAULT 0,
    registered_at      INTEGER NOT NULL,
    last_heartbeat_at  INTEGER NOT NULL,
    status             TEXT    NOT NULL DEFAULT 'online',
    drain_requested_at INTEGER,
    deregistered_at    INTEGER,
    CONSTRAINT workflow_worker_status_check CHECK (status IN ('online', 'draining', 'offline')),
    CONSTRAINT workflow_worker_max_concurrency_check CHECK (max_concurrency >= 1),
    CONSTRAINT workflow_worker_active_check CHECK (active_count >= 0),
    CONSTRAINT workflow_worker_labels_check CHECK (json_valid(labels) AND json_type(labels) = 'object'),
    CONSTRAINT workflow_worker_queues_check CHECK (json_valid(queues) AND json_type(queues) = 'array'),
    CONSTRAINT workflow_worker_workflows_check CHECK (json_valid(workflows) AND json_type(workflows) = 'array')
) STRICT;

-- The reaper: workers still online or draining whose heartbeat is oldest.
CREATE INDEX workflow_worker_heartbeat_idx
    ON workflow_worker (last_heartbeat_at)
    WHERE status <> 'offline';

-- +goose Down
DROP TABLE workflow_worker;
