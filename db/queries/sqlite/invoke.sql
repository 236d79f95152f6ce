-- name: InstanceSetParent :exec
-- InstanceSetParent records the parent of a child an Invoke step created,
-- in the create's transaction: only creates with a parent run it.
UPDATE workflow_instance
SET parent_workflow_name = CAST(@parent_workflow_name AS TEXT),
    parent_instance_id = CAST(@parent_instance_id AS TEXT),
    parent_run_number = CAST(@parent_run_number AS INTEGER),
    parent_step_key = CAST(@parent_step_key AS TEXT),
    parent_policy = CAST(@parent_policy AS TEXT)
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: InstanceParentMatches :one
-- InstanceParentMatches reports whether the child's parent columns name the
-- parent step a notify targets: the delivery of a child's end (its last
-- checkpoint, its terminate) checks it in its transaction, so that nothing
-- but the child an Invoke step created reaches that step.
SELECT EXISTS (
    SELECT 1 FROM workflow_instance
    WHERE workflow_name = @workflow_name AND instance_id = @instance_id
        AND parent_workflow_name = CAST(@parent_workflow_name AS TEXT)
        AND parent_instance_id = CAST(@parent_instance_id AS TEXT)
        AND parent_run_number = CAST(@parent_run_number AS INTEGER)
        AND parent_step_key = CAST(@parent_step_key AS TEXT)
) AS matches;

-- name: InstanceDepth :one
-- InstanceDepth counts the ancestors of an instance along its parent
-- columns (0 for an instance that no step invoked), at most max_depth: the
-- nesting an Invoke step's child would add to. An ancestor deleted since
-- ends the chain.
WITH RECURSIVE chain (workflow_name, instance_id, depth) AS (
    SELECT i.parent_workflow_name, i.parent_instance_id, 1
    FROM workflow_instance i
    WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
        AND i.parent_instance_id IS NOT NULL
    UNION ALL
    SELECT i.parent_workflow_name, i.parent_instance_id, c.depth + 1
    FROM chain c
    JOIN workflow_instance i
        ON i.workflow_name = c.workflow_name AND i.instance_id = c.instance_id
    WHERE i.parent_instance_id IS NOT NULL AND c.depth < CAST(@max_depth AS INTEGER)
)
SELECT CAST(coalesce(max(depth), 0) AS INTEGER) AS depth FROM chain;

-- name: InstanceChildren :many
-- InstanceChildren lists the children of an instance, oldest first.
SELECT * FROM workflow_instance
WHERE parent_workflow_name = CAST(@parent_workflow_name AS TEXT)
    AND parent_instance_id = CAST(@parent_instance_id AS TEXT)
ORDER BY created_at, instance_id;

-- name: InstanceChildOf :one
-- InstanceChildOf returns the child an Invoke step started in one run of
-- its parent (at most one: workflow_instance_parent_step_idx).
SELECT * FROM workflow_instance
WHERE parent_workflow_name = CAST(@parent_workflow_name AS TEXT)
    AND parent_instance_id = CAST(@parent_instance_id AS TEXT)
    AND parent_run_number = CAST(@parent_run_number AS INTEGER)
    AND parent_step_key = CAST(@parent_step_key AS TEXT);

-- name: InstanceChildrenToTerminate :many
-- InstanceChildrenToTerminate lists the children of an instance that a
-- terminate of the parent terminates: not terminal, with policy terminate.
SELECT workflow_name, instance_id FROM workflow_instance
WHERE parent_workflow_name = CAST(@parent_workflow_name AS TEXT)
    AND parent_instance_id = CAST(@parent_instance_id AS TEXT)
    AND parent_policy = 'terminate'
    AND status NOT IN ('complete', 'errored', 'terminated')
ORDER BY created_at, instance_id;
