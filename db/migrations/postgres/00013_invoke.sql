-- +goose Up
-- Awaitable child workflows (docs/children.md). A child an Invoke step
-- started records its parent: the parent's workflow, id, run and the step
-- that waits for it, and what happens to it when the parent is terminated
-- (parent_policy 'terminate', the default, or 'abandon'). An instance that
-- no step invoked keeps them NULL and pays nothing: no statement of the
-- claim or checkpoint path runs for them (the claim returns a fresh run's
-- columns from the row it has). Adding nullable columns rewrites nothing.
ALTER TABLE workflow_instance ADD COLUMN parent_workflow_name text;
ALTER TABLE workflow_instance ADD COLUMN parent_instance_id text;
ALTER TABLE workflow_instance ADD COLUMN parent_run_number integer;
ALTER TABLE workflow_instance ADD COLUMN parent_step_key text;
ALTER TABLE workflow_instance ADD COLUMN parent_policy text;
ALTER TABLE workflow_instance ADD CONSTRAINT workflow_instance_parent_policy_check
    CHECK (parent_policy IS NULL OR parent_policy IN ('terminate', 'abandon'));

-- A parent's children (history, the terminate cascade), oldest first.
CREATE INDEX workflow_instance_parent_idx
    ON workflow_instance (parent_workflow_name, parent_instance_id, created_at, instance_id)
    WHERE parent_instance_id IS NOT NULL;

-- An Invoke step's row has its own type: it waits for its child's end as a
-- waitForEvent step waits for an event (wait_event_type is the reserved
-- '@invoke/<run>/<step>'). The check is added NOT VALID and validated
-- apart, so that the table is not locked against writes while it is read.
ALTER TABLE workflow_step DROP CONSTRAINT workflow_step_type_check;
ALTER TABLE workflow_step ADD CONSTRAINT workflow_step_type_check
    CHECK (type IN ('do', 'sleep', 'waitForEvent', 'invoke')) NOT VALID;
ALTER TABLE workflow_step VALIDATE CONSTRAINT workflow_step_type_check;

-- +goose Down
ALTER TABLE workflow_step DROP CONSTRAINT workflow_step_type_check;
ALTER TABLE workflow_step ADD CONSTRAINT workflow_step_type_check
    CHECK (type IN ('do', 'sleep', 'waitForEvent'));
DROP INDEX workflow_instance_parent_idx;
ALTER TABLE workflow_instance DROP CONSTRAINT workflow_instance_parent_policy_check;
ALTER TABLE workflow_instance DROP COLUMN parent_policy;
ALTER TABLE workflow_instance DROP COLUMN parent_step_key;
ALTER TABLE workflow_instance DROP COLUMN parent_run_number;
ALTER TABLE workflow_instance DROP COLUMN parent_instance_id;
ALTER TABLE workflow_instance DROP COLUMN parent_workflow_name;
