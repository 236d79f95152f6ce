-- +goose Up
-- The lifecycle event log (docs/events.md): one row per thing that happened
-- to an instance (created, step started, completed, failed, retrying,
-- waiting, event received, paused, resumed, terminated, restarted,
-- completed, errored), written in the transaction of the transition it
-- records. Lists page by id, an instance's through
-- lifecycle_event_instance_idx, the one index besides the primary key: every
-- index is written by every transition, so there is none on at; rows are
-- pruned by age in small batches along the primary key (LifecyclePrune).
CREATE TABLE lifecycle_event (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type text NOT NULL,
    workflow_name text NOT NULL,
    instance_id text NOT NULL,
    run_number int NOT NULL,
    step_key text,
    attempt int NOT NULL DEFAULT 0,
    detail text,
    at timestamptz NOT NULL
);
CREATE INDEX lifecycle_event_instance_idx ON lifecycle_event (instance_id, id);

-- +goose Down
DROP TABLE lifecycle_event;
