-- +goose Up
-- Fleet control: every instance has a namespace, runs on a task queue, has a
-- claim priority and may carry a dedupe key (see the Postgres migration
-- 00010_queues_namespaces.sql). Existing instances are in namespace and
-- queue 'default' at priority 0, without a dedupe key. Instance ids stay
-- unique per workflow across namespaces (the primary key is unchanged).
ALTER TABLE workflow_instance ADD COLUMN namespace TEXT NOT NULL DEFAULT 'default';
ALTER TABLE workflow_instance ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
-- The range of workflow.MinPriority..workflow.MaxPriority.
ALTER TABLE workflow_instance ADD COLUMN priority INTEGER NOT NULL DEFAULT 0
    CONSTRAINT workflow_instance_priority_check CHECK (priority BETWEEN -1000 AND 1000);
ALTER TABLE workflow_instance ADD COLUMN dedupe_key TEXT;

-- Dedupe: at most one active (non-terminal) instance per namespace, workflow
-- and dedupe key; a terminal instance leaves the index and frees its key.
CREATE UNIQUE INDEX workflow_instance_dedupe_idx
    ON workflow_instance (namespace, workflow_name, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status NOT IN ('complete', 'errored', 'terminated');

-- The task carries its instance's queue and priority, written when the task
-- row is inserted, so that a claim filters and orders on the task's index.
ALTER TABLE workflow_task ADD COLUMN queue TEXT NOT NULL DEFAULT 'default';
ALTER TABLE workflow_task ADD COLUMN instance_priority INTEGER NOT NULL DEFAULT 0;

-- Claim order: higher instance priority first, then resuming work before
-- new runs, then oldest run_at, then id.
DROP INDEX workflow_task_pending_idx;
CREATE INDEX workflow_task_pending_idx
    ON workflow_task (instance_priority DESC, priority, run_at, id)
    WHERE status = 'pending';

-- +goose Down
DROP INDEX workflow_task_pending_idx;
CREATE INDEX workflow_task_pending_idx
    ON workflow_task (priority, run_at, id)
    WHERE status = 'pending';
ALTER TABLE workflow_task DROP COLUMN instance_priority;
ALTER TABLE workflow_task DROP COLUMN queue;
DROP INDEX workflow_instance_dedupe_idx;
ALTER TABLE workflow_instance DROP COLUMN dedupe_key;
ALTER TABLE workflow_instance DROP COLUMN priority;
ALTER TABLE workflow_instance DROP COLUMN queue;
ALTER TABLE workflow_instance DROP COLUMN namespace;
