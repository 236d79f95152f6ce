-- +goose Up
-- The lifecycle event log (docs/events.md): one row per thing that happened
-- to an instance (created, step started, completed, failed, retrying,
-- waiting, event received, paused, resumed, terminated, restarted,
-- completed, errored), written in the transaction of the transition it
-- records, and one per change of a worker's status (online, draining,
-- offline), whose worker_id names the worker (NULL for the others) and
-- whose workflow_name and instance_id are empty. Lists page by id, an
-- instance's through lifecycle_event_instance_idx; the partial
-- lifecycle_event_worker_idx holds only the few worker events. Every index
-- an instance event enters is written by every transition, so there is none
-- on at: rows are pruned by age in small batches along the primary key
-- (LifecyclePrune).
CREATE TABLE lifecycle_event (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type text NOT NULL,
    workflow_name text NOT NULL,
    instance_id text NOT NULL,
    run_number int NOT NULL,
    step_key text,
    attempt int NOT NULL DEFAULT 0,
    detail text,
    at timestamptz NOT NULL,
    worker_id text,
    -- A step attempt's step.started and its outcome, always written
    -- together, are one row: the outcome's, with the attempt's start here
    -- (db/lifecycle_rows.go: the row's events have ids 2*id-1 and 2*id).
    started_at timestamptz
);
CREATE INDEX lifecycle_event_instance_idx ON lifecycle_event (instance_id, id);
CREATE INDEX lifecycle_event_worker_idx ON lifecycle_event (worker_id, id) WHERE worker_id IS NOT NULL;

-- +goose Down
DROP TABLE lifecycle_event;
