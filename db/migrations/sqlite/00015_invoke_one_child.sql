-- +goose Up
-- An Invoke step starts at most one child per run: see the Postgres
-- migration 00016_invoke_one_child.sql.
CREATE UNIQUE INDEX workflow_instance_parent_step_idx
    ON workflow_instance (parent_workflow_name, parent_instance_id, parent_run_number, parent_step_key)
    WHERE parent_instance_id IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instance_parent_step_idx;
