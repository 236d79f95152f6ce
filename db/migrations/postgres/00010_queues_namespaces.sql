-- +goose Up
-- Fleet control: every instance has a namespace, runs on a task queue, has a
-- claim priority and may carry a dedupe key. Adding columns with constant
-- defaults rewrites nothing; existing instances are in namespace and queue
-- 'default' at priority 0, without a dedupe key.
--
-- Instance ids stay unique per workflow across namespaces: the primary key
-- (workflow_name, instance_id) is unchanged, and a namespace only scopes
-- who may see and touch an instance.
ALTER TABLE workflow_instance
    ADD COLUMN namespace  text    NOT NULL DEFAULT 'default',
    ADD COLUMN queue      text    NOT NULL DEFAULT 'default',
    ADD COLUMN priority   integer NOT NULL DEFAULT 0,
    ADD COLUMN dedupe_key text;
-- The range of workflow.MinPriority..workflow.MaxPriority. NOT VALID then
-- VALIDATE: the check of existing rows (all 0) does not block writes.
ALTER TABLE workflow_instance
    ADD CONSTRAINT workflow_instance_priority_check CHECK (priority BETWEEN -1000 AND 1000) NOT VALID;
ALTER TABLE workflow_instance VALIDATE CONSTRAINT workflow_instance_priority_check;

-- Dedupe: at most one active (non-terminal) instance per namespace, workflow
-- and dedupe key. A terminal instance leaves the index, which frees its key.
-- Built in the migration's transaction: on a large workflow_instance it
-- holds writes back while it scans the table (only rows with a key enter).
CREATE UNIQUE INDEX workflow_instance_dedupe_idx
    ON workflow_instance (namespace, workflow_name, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status NOT IN ('complete', 'errored', 'terminated');

-- The task carries its instance's queue and priority (both fixed for the
-- life of the instance), written when the task row is inserted, so that a
-- claim filters and orders on the task's own index.
ALTER TABLE workflow_task
    ADD COLUMN queue             text     NOT NULL DEFAULT 'default',
    ADD COLUMN instance_priority smallint NOT NULL DEFAULT 0;

-- Claim order: higher instance priority first, then resuming work before
-- new runs (priority is the kind's, 0 or 1), then oldest run_at, then id.
-- The task table is small (one row per live instance), so the rebuild in
-- the migration's transaction is short.
DROP INDEX workflow_task_pending_idx;
CREATE INDEX workflow_task_pending_idx
    ON workflow_task (instance_priority DESC, priority, run_at, id)
    WHERE status = 'pending';

-- +goose Down
DROP INDEX workflow_task_pending_idx;
CREATE INDEX workflow_task_pending_idx
    ON workflow_task (priority, run_at, id)
    WHERE status = 'pending';
ALTER TABLE workflow_task DROP COLUMN instance_priority, DROP COLUMN queue;
DROP INDEX workflow_instance_dedupe_idx;
ALTER TABLE workflow_instance
    DROP CONSTRAINT workflow_instance_priority_check,
    DROP COLUMN dedupe_key,
    DROP COLUMN priority,
    DROP COLUMN queue,
    DROP COLUMN namespace;
