-- +goose Up
-- Every list index of workflow_instance begins with workflow_name or holds
-- it, so each could serve a lookup of one instance by (workflow_name,
-- instance_id) as well as the primary key could: on tables that were never
-- analyzed (a new database, or autovacuum off) the planner costs them the
-- same, and a plan cached then (the generic plan of a prepared statement,
-- and the foreign-key checks of every step and task insert) may keep
-- walking all of a workflow's entries in a list index for each lookup until
-- statistics change. Made partial on a condition no lookup states and every
-- list query does (updated_at > '-infinity', true of every row), they can
-- only serve the lists, and the primary key is the one index left for a
-- lookup, whatever the statistics say.
--
-- The indexes are rebuilt in this migration's transaction, which holds
-- writes to workflow_instance back while it builds them: on a large table,
-- run it when the engine is stopped or quiet. (CREATE INDEX CONCURRENTLY
-- would let writes go on, but waits for every older transaction in the
-- database, and cannot run in a transaction.)
DROP INDEX workflow_instance_name_status_updated_idx;
CREATE INDEX workflow_instance_name_status_updated_idx
    ON workflow_instance (workflow_name, status, updated_at, instance_id)
    WHERE updated_at > '-infinity'::timestamptz;
DROP INDEX workflow_instance_name_updated_idx;
CREATE INDEX workflow_instance_name_updated_idx
    ON workflow_instance (workflow_name, updated_at, instance_id)
    WHERE updated_at > '-infinity'::timestamptz;
DROP INDEX workflow_instance_updated_idx;
CREATE INDEX workflow_instance_updated_idx
    ON workflow_instance (updated_at, workflow_name, instance_id)
    WHERE updated_at > '-infinity'::timestamptz;

-- +goose Down
DROP INDEX workflow_instance_name_status_updated_idx;
CREATE INDEX workflow_instance_name_status_updated_idx
    ON workflow_instance (workflow_name, status, updated_at, instance_id);
DROP INDEX workflow_instance_name_updated_idx;
CREATE INDEX workflow_instance_name_updated_idx
    ON workflow_instance (workflow_name, updated_at, instance_id);
DROP INDEX workflow_instance_updated_idx;
CREATE INDEX workflow_instance_updated_idx
    ON workflow_instance (updated_at, workflow_name, instance_id);
