-- +goose Up
-- An Invoke step starts at most one child per run: a unique index on the
-- parent step a child names. A replay of the step after a crash, or a
-- runner that lost its lease racing the one that holds it, cannot start a
-- second child whatever id it picks: the second create fails on this index
-- (and on no other), and the engine answers it with the step's child. So
-- the ids the engine picks for children need not be derived from the
-- parent: they are random, and no caller can take one first. Only child
-- rows enter the index (partial), so a create without a parent pays
-- nothing. A table where one step started two children (possible only with
-- an InvokeOptions.ID that changed from one replay to the next) fails this
-- migration; find them with
--   SELECT parent_workflow_name, parent_instance_id, parent_run_number, parent_step_key, count(*)
--   FROM workflow_instance WHERE parent_instance_id IS NOT NULL
--   GROUP BY 1, 2, 3, 4 HAVING count(*) > 1;
CREATE UNIQUE INDEX workflow_instance_parent_step_idx
    ON workflow_instance (parent_workflow_name, parent_instance_id, parent_run_number, parent_step_key)
    WHERE parent_instance_id IS NOT NULL;

-- +goose Down
DROP INDEX workflow_instance_parent_step_idx;
