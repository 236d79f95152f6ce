-- name: InstanceSetParent :exec
-- InstanceSetParent records the parent of a child an Invoke step created,
-- in the create's transaction: only creates with a parent run it.
UPDATE workflow_instance
SET parent_workflow_name = @parent_workflow_name::text,
    parent_instance_id = @parent_instance_id::text,
    parent_run_number = @parent_run_number::integer,
    parent_step_key = @parent_step_key::text,
    parent_policy = @parent_policy::text
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: InstanceParentMatches :one
-- InstanceParentMatches reports whether the child's parent columns name the
-- parent step a notify targets: the delivery of a child's end (its last
-- checkpoint, its terminate) checks it in its transaction, so that nothing
-- but the child an Invoke step created reaches that step.
SELECT EXISTS (
    SELECT 1 FROM workflow_instance
    WHERE workflow_name = @workflow_name AND instance_id = @instance_id
        AND parent_workflow_name = @parent_workflow_name::text
        AND parent_instance_id = @parent_instance_id::text
        AND parent_run_number = @parent_run_number::integer
        AND parent_step_key = @parent_step_key::text
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
    WHERE i.parent_instance_id IS NOT NULL AND c.depth < @max_depth::integer
)
SELECT coalesce(max(depth), 0)::integer AS depth FROM chain;

-- name: InstanceChildren :many
-- InstanceChildren lists the children of an instance, oldest first.
SELECT * FROM workflow_instance
WHERE parent_workflow_name = @parent_workflow_name::text
    AND parent_instance_id = @parent_instance_id::text
ORDER BY created_at, instance_id;

-- name: InstanceChildOf :one
-- InstanceChildOf returns the child an Invoke step started in one run of
-- its parent (at most one: workflow_instance_parent_step_idx).
SELECT * FROM workflow_instance
WHERE parent_workflow_name = @parent_workflow_name::text
    AND parent_instance_id = @parent_instance_id::text
    AND parent_run_number = @parent_run_number::integer
    AND parent_step_key = @parent_step_key::text;

-- name: InstanceChildrenToTerminate :many
-- InstanceChildrenToTerminate lists the children of an instance that a
-- terminate of the parent terminates: not terminal, with policy terminate.
SELECT workflow_name, instance_id FROM workflow_instance
WHERE parent_workflow_name = @parent_workflow_name::text
    AND parent_instance_id = @parent_instance_id::text
    AND parent_policy = 'terminate'
    AND status NOT IN ('complete', 'errored', 'terminated')
ORDER BY created_at, instance_id;

-- name: InstanceLockParent :exec
-- InstanceLockParent locks the parent of a child whose run ends, first in
-- the child's last checkpoint. Every transaction that locks a parent and
-- its child locks the parent first: the child's last checkpoint (this
-- statement, then the child's fence), the terminate of a child
-- (InstanceLockParentOf, then the child), and the terminate and restart
-- cascades (the parent, then each child it ends, then theirs). So they
-- cannot deadlock.
SELECT 1 FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
FOR NO KEY UPDATE;

-- name: InstanceLockParentOf :exec
-- InstanceLockParentOf locks the parent of an instance, if it has one,
-- first in the instance's terminate, which then locks the instance and
-- sends its end to the parent (see InstanceLockParent). The instance's
-- parent columns are read without a lock: they never change once its
-- create committed.
SELECT 1 FROM workflow_instance p
WHERE (p.workflow_name, p.instance_id) = (
    SELECT c.parent_workflow_name, c.parent_instance_id FROM workflow_instance c
    WHERE c.workflow_name = @workflow_name AND c.instance_id = @instance_id
        AND (@namespace::text = '' OR c.namespace = @namespace::text)
)
FOR NO KEY UPDATE OF p;
