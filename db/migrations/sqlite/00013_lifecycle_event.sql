-- +goose Up
-- The lifecycle event log: see the Postgres migration 00015_lifecycle_event.sql.
-- Times are unix microseconds, as in every other table.
--
-- A step attempt's step.started and its outcome, always written together,
-- are one row: the outcome's, with the attempt's start in started_at (see
-- db/lifecycle_rows.go: the row's events have ids 2*id-1 and 2*id).
--
-- What every transition pays for is kept small: type is a small integer
-- (the codes are in db/sqlite/lifecycle.go, lifecycleTypeCodes), and the
-- one index an instance event enters is on (instance_id, id), for an
-- instance's events; the workflow name is checked on the rows it finds.
-- Worker events (worker_id set, workflow_name and instance_id empty) are
-- also in the partial lifecycle_event_worker_idx.
--
-- As on Postgres there is no index on at, and the id is a plain rowid, not
-- AUTOINCREMENT: on SQLite's single writer each of those would be work in
-- every transition's transaction (an index to update, and sqlite_sequence
-- read and written by every insert). Ids still only grow:
-- a rowid is one past the largest present, and LifecyclePrune never
-- deletes the newest event, so no id is handed out twice. Pruning walks
-- the oldest ids instead of an index on at (ids follow commit order on the
-- single writer, and an event's at is never after its commit).
CREATE TABLE lifecycle_event (
    id INTEGER PRIMARY KEY,
    type INTEGER NOT NULL,
    workflow_name TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    run_number INTEGER NOT NULL,
    step_key TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    detail TEXT,
    at INTEGER NOT NULL,
    worker_id TEXT,
    started_at INTEGER
) STRICT;
CREATE INDEX lifecycle_event_instance_idx ON lifecycle_event (instance_id, id);
CREATE INDEX lifecycle_event_worker_idx ON lifecycle_event (worker_id, id) WHERE worker_id IS NOT NULL;

-- +goose Down
DROP TABLE lifecycle_event;
