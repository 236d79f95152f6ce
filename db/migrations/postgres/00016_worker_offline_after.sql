-- +goose Up

-- Each worker records how long it may go without a heartbeat before the
-- reapers of other runners mark it offline and release its tasks: its own
-- OfflineAfter, in microseconds. A runner starts no step once that time
-- has passed since its last heartbeat (as it starts none once its task's
-- lease has passed), so no reaper may use a shorter threshold than the one
-- the worker keeps itself to. NULL (a row an older version wrote) falls back
-- to the reaper's own threshold. Adding a nullable column without a default
-- rewrites nothing.
ALTER TABLE workflow_worker ADD COLUMN offline_after_us bigint;

-- +goose Down
ALTER TABLE workflow_worker DROP COLUMN offline_after_us;
