-- name: InstanceInsert :one
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at
) VALUES (
    @workflow_name, @instance_id, 'queued', @params, sqlc.narg('metadata')::json, 1,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
)
RETURNING *;

-- name: InstanceInsertLeased :one
-- InstanceInsertLeased is the create of an eager start: it inserts the
-- instance running and started, and its first task processing and leased to
-- lock_owner at version 1 with attempts 1, as a claim would leave them. The
-- task shares the instance's creation time as its run_at.
WITH inst AS (
    INSERT INTO workflow_instance (
        workflow_name, instance_id, status, params, metadata, run_number,
        created_at, updated_at, started_at
    ) VALUES (
        @workflow_name, @instance_id, 'running', @params, sqlc.narg('metadata')::json, 1,
        coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now())
    )
    RETURNING *
),
task AS (
    INSERT INTO workflow_task (
        workflow_name, instance_id, run_number, kind, priority, run_at, status,
        lock_owner, locked_until, version, attempts
    )
    SELECT inst.workflow_name, inst.instance_id, 1, 'run', 1, inst.created_at, 'processing',
        @lock_owner::text, @locked_until::timestamptz, 1, 1
    FROM inst
    RETURNING id
)
SELECT inst.workflow_name, inst.instance_id, inst.status, inst.params, inst.output,
    inst.error_name, inst.error_message, inst.pause_requested, inst.run_number,
    inst.created_at, inst.updated_at, inst.started_at, inst.completed_at,
    inst.retention_until, inst.metadata, task.id AS task_id
FROM inst, task;

-- name: InstanceInsertMany :many
-- InstanceInsertMany inserts the instances whose ids are free; those named
-- in started_ids (an eager start) are inserted running and started.
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    started_at
)
SELECT
    @workflow_name, item.instance_id,
    CASE WHEN item.instance_id = ANY(@started_ids::text[]) THEN 'running' ELSE 'queued' END,
    item.params, item.metadata, 1,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    CASE WHEN item.instance_id = ANY(@started_ids::text[])
        THEN coalesce(sqlc.narg('now')::timestamptz, now()) END
FROM (
    SELECT unnest(@instance_ids::text[]) AS instance_id,
        unnest(@params::json[]) AS params,
        unnest(@metadata::json[]) AS metadata
) AS item
ON CONFLICT (workflow_name, instance_id) DO NOTHING
RETURNING *;

-- name: InstanceGet :one
SELECT * FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: InstanceGetForUpdate :one
SELECT * FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
FOR NO KEY UPDATE;

-- name: InstanceList :many
-- The list indexes are partial on updated_at > '-infinity' (true of every
-- row; see migration 00007), so the list states it to use them.
SELECT * FROM workflow_instance
WHERE updated_at > '-infinity'::timestamptz
    AND (sqlc.narg('workflow_name')::text IS NULL OR workflow_name = sqlc.narg('workflow_name')::text)
    AND (coalesce(cardinality(sqlc.narg('statuses')::text[]), 0) = 0
        OR status = ANY(sqlc.narg('statuses')::text[]))
    AND (sqlc.narg('cursor_updated_at')::timestamptz IS NULL
        OR (updated_at, workflow_name, instance_id) < (
            sqlc.narg('cursor_updated_at')::timestamptz,
            sqlc.narg('cursor_workflow_name')::text,
            sqlc.narg('cursor_instance_id')::text))
ORDER BY updated_at DESC, workflow_name DESC, instance_id DESC
LIMIT @max;

-- name: InstanceSetStatus :one
-- InstanceSetStatus is the pause/resume/terminate transition of a locked
-- instance; completed_at is set only when the new status is terminal.
UPDATE workflow_instance
SET status = @status,
    pause_requested = @pause_requested,
    completed_at = CASE WHEN @status::text IN ('complete', 'errored', 'terminated')
        THEN coalesce(sqlc.narg('now')::timestamptz, now()) ELSE completed_at END,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
RETURNING *;

-- name: InstanceRestart :one
UPDATE workflow_instance
SET run_number = run_number + 1,
    status = 'queued',
    output = NULL,
    error_name = NULL,
    error_message = NULL,
    started_at = NULL,
    completed_at = NULL,
    pause_requested = false,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
RETURNING *;

-- name: InstanceLockRun :one
-- InstanceLockRun locks an instance for a checkpoint of one run; no row
-- means the instance was restarted (or is gone). It does not write the row:
-- updated_at moves with the status transition the checkpoint makes, if any,
-- not with its step rows.
SELECT status, pause_requested
FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number
FOR NO KEY UPDATE;

-- name: TaskInsertManyLeased :many
-- TaskInsertManyLeased inserts the first tasks of a batch create in which
-- some instances start eagerly: the tasks of leased_ids are processing and
-- leased to lock_owner at version 1 with attempts 1, as a claim would leave
-- them; the others are pending and due now. It returns the leased ones.
WITH inserted AS (
    INSERT INTO workflow_task (
        workflow_name, instance_id, run_number, kind, priority, run_at, status,
        lock_owner, locked_until, version, attempts
    )
    SELECT @workflow_name, item.instance_id, 1, 'run', 1,
        coalesce(sqlc.narg('now')::timestamptz, now()),
        CASE WHEN item.leased THEN 'processing' ELSE 'pending' END,
        CASE WHEN item.leased THEN @lock_owner::text END,
        CASE WHEN item.leased THEN @locked_until::timestamptz END,
        CASE WHEN item.leased THEN 1 ELSE 0 END,
        CASE WHEN item.leased THEN 1 ELSE 0 END
    FROM (
        SELECT u.instance_id, u.instance_id = ANY(@leased_ids::text[]) AS leased
        FROM unnest(@instance_ids::text[]) AS u (instance_id)
    ) AS item
    RETURNING *
)
SELECT * FROM inserted WHERE status = 'processing';
