-- +goose Up
-- The lifecycle event log: see the Postgres migration 00015_lifecycle_event.sql.
-- Times are unix microseconds, as in every other table.
--
-- What every transition pays for is kept small: type is a small integer
-- (the codes are in db/sqlite/lifecycle.go, lifecycleTypeCodes), and the
-- one index is on (instance_id, id), for an instance's events; the
-- workflow name is checked on the rows it finds.
--
-- Unlike Postgres, the table has no index on at and its id is a plain
-- rowid, not AUTOINCREMENT: on SQLite's single writer each of those is
-- work in every transition's transaction (a second index to update, and
-- sqlite_sequence read and written by every insert). Ids still only grow:
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
    at INTEGER NOT NULL
) STRICT;
CREATE INDEX lifecycle_event_instance_idx ON lifecycle_event (instance_id, id);

-- +goose Down
DROP TABLE lifecycle_event;
