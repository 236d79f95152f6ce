-- +goose Up

-- The worker registry: one row per runner (worker_id is the runner's ID, the
-- lock_owner of the tasks it holds). A runner registers when it starts (an
-- upsert: the same id, which a restart of the same host and pid gets again,
-- re-registers the same row), heartbeats on an interval with its active
-- count and totals, and deregisters on a clean stop (status offline,
-- deregistered_at set). A reaper marks a worker whose heartbeat is older
-- than its threshold offline (deregistered_at stays NULL) and releases the
-- tasks it held at once. A drain request (drain_requested_at) sets the
-- status draining; the worker sees it at its next heartbeat. The table is
-- small (one row per runner that ever ran), so it needs no index beyond
-- the reaper's.
CREATE TABLE workflow_worker (
    worker_id          text        PRIMARY KEY,
    hostname           text        NOT NULL,
    pid                integer     NOT NULL,
    version            text        NOT NULL DEFAULT '',
    labels             jsonb       NOT NULL DEFAULT '{}',
    queues             text[]      NOT NULL DEFAULT '{}',
    workflows          text[]      NOT NULL DEFAULT '{}',
    max_concurrency    integer     NOT NULL,
    active_count       integer     NOT NULL DEFAULT 0,
    completed_total    bigint      NOT NULL DEFAULT 0,
    failed_total       bigint      NOT NULL DEFAULT 0,
    registered_at      timestamptz NOT NULL,
    last_heartbeat_at  timestamptz NOT NULL,
    status             text        NOT NULL DEFAULT 'online',
    drain_requested_at timestamptz,
    deregistered_at    timestamptz,
    CONSTRAINT workflow_worker_status_check CHECK (status IN ('online', 'draining', 'offline')),
    CONSTRAINT workflow_worker_max_concurrency_check CHECK (max_concurrency >= 1),
    CONSTRAINT workflow_worker_active_check CHECK (active_count >= 0),
    CONSTRAINT workflow_worker_labels_check CHECK (jsonb_typeof(labels) = 'object')
);

-- The reaper: workers still online or draining whose heartbeat is oldest.
CREATE INDEX workflow_worker_heartbeat_idx
    ON workflow_worker (last_heartbeat_at)
    WHERE status <> 'offline';

-- +goose Down
DROP TABLE workflow_worker;
