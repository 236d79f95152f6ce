-- name: InstanceInsert :one
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    namespace, queue, priority, dedupe_key
) VALUES (
    @workflow_name, @instance_id, 'queued', @params, sqlc.narg('metadata'), 1, @now, @now,
    CAST(@namespace AS TEXT), CAST(@queue AS TEXT), CAST(@priority AS INTEGER), sqlc.narg('dedupe_key')
)
RETURNING *;

-- name: InstanceInsertIfAbsent :one
-- InstanceInsertIfAbsent inserts a queued instance unless the id is taken
-- or an active instance of the namespace and workflow holds its dedupe key,
-- in which case it returns no row.
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    namespace, queue, priority, dedupe_key
) VALUES (
    @workflow_name, @instance_id, 'queued', @params, sqlc.narg('metadata'), 1, @now, @now,
    CAST(@namespace AS TEXT), CAST(@queue AS TEXT), CAST(@priority AS INTEGER), sqlc.narg('dedupe_key')
)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: InstanceInsertStartedIfAbsent :one
-- InstanceInsertStartedIfAbsent inserts the instance of an eager start,
-- running and started as a claim would leave it, unless the id is taken, in
-- which case it returns no row.
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    started_at, namespace, queue, priority, dedupe_key
) VALUES (
    @workflow_name, @instance_id, 'running', @params, sqlc.narg('metadata'), 1, @now, @now, @now,
    CAST(@namespace AS TEXT), CAST(@queue AS TEXT), CAST(@priority AS INTEGER), sqlc.narg('dedupe_key')
)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: TaskInsertLeased :one
-- TaskInsertLeased inserts the first task of an eager start: processing and
-- leased to lock_owner at version 1 with attempts 1, as a claim would leave it.
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status,
    lock_owner, locked_until, version, attempts, queue, instance_priority
) VALUES (
    @workflow_name, @instance_id, 1, 'run', 1, @now, 'processing',
    CAST(@lock_owner AS TEXT), CAST(@locked_until AS INTEGER), 1, 1,
    CAST(@queue AS TEXT), CAST(@instance_priority AS INTEGER)
)
RETURNING *;

-- name: InstanceGet :one
-- An empty namespace finds the instance in any namespace; another finds it
-- only in that one.
SELECT * FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND (CAST(@namespace AS TEXT) = '' OR namespace = CAST(@namespace AS TEXT));

-- name: InstanceGetByDedupeKey :one
-- InstanceGetByDedupeKey returns the active instance that holds a dedupe key.
SELECT * FROM workflow_instance
WHERE namespace = @namespace AND workflow_name = @workflow_name AND dedupe_key = @dedupe_key
    AND status NOT IN ('complete', 'errored', 'terminated');

-- name: InstanceList :many
-- InstanceList pages through every workflow's instances, newest update
-- first. statuses is a JSON array of statuses, or NULL for every status; the
-- cursor is the key of the last row of the previous page (for the first page
-- one past every row). The redundant updated_at bound lets the index seek.
SELECT * FROM workflow_instance
WHERE (CAST(sqlc.narg('statuses') AS TEXT) IS NULL
        OR status IN (SELECT value FROM json_each(sqlc.narg('statuses'))))
    AND (CAST(sqlc.narg('namespace') AS TEXT) IS NULL OR namespace = CAST(sqlc.narg('namespace') AS TEXT))
    AND (CAST(sqlc.narg('queue') AS TEXT) IS NULL OR queue = CAST(sqlc.narg('queue') AS TEXT))
    AND updated_at <= CAST(@cursor_updated_at AS INTEGER)
    AND (updated_at, workflow_name, instance_id) < (
        CAST(@cursor_updated_at AS INTEGER),
        CAST(@cursor_workflow_name AS TEXT),
        CAST(@cursor_instance_id AS TEXT))
ORDER BY updated_at DESC, workflow_name DESC, instance_id DESC
LIMIT @max;

-- name: InstanceListWorkflow :many
-- InstanceListWorkflow is InstanceList for the instances of one workflow.
SELECT * FROM workflow_instance
WHERE workflow_name = @workflow_name
    AND (CAST(sqlc.narg('statuses') AS TEXT) IS NULL
        OR status IN (SELECT value FROM json_each(sqlc.narg('statuses'))))
    AND (CAST(sqlc.narg('namespace') AS TEXT) IS NULL OR namespace = CAST(sqlc.narg('namespace') AS TEXT))
    AND (CAST(sqlc.narg('queue') AS TEXT) IS NULL OR queue = CAST(sqlc.narg('queue') AS TEXT))
    AND updated_at <= CAST(@cursor_updated_at AS INTEGER)
    AND (updated_at, workflow_name, instance_id) < (
        CAST(@cursor_updated_at AS INTEGER),
        CAST(@cursor_workflow_name AS TEXT),
        CAST(@cursor_instance_id AS TEXT))
ORDER BY updated_at DESC, workflow_name DESC, instance_id DESC
LIMIT @max;

-- name: InstanceListBounded :many
-- InstanceListBounded is InstanceList with a byte budget on the payloads
-- (params, output, metadata, error_message) it reads: a row carries them
-- (keep) only while the payloads of the rows before it in the page add up
-- to less than @payload_budget bytes, and none with @omit_payloads; a row
-- past the budget comes without them, payloads_omitted set. The page's
-- keys and sizes come first (octet_length reads a value's size, not the
-- value), then its rows by primary key: a payload it does not keep is
-- never read.
WITH page AS (
    SELECT w.workflow_name, w.instance_id, w.updated_at,
        CAST(@omit_payloads AS INTEGER) = 0 AND coalesce(sum(
            CASE WHEN CAST(@omit_payloads AS INTEGER) <> 0 THEN 0 ELSE
                coalesce(octet_length(w.params), 0) + coalesce(octet_length(w.output), 0)
                + coalesce(octet_length(w.metadata), 0) + coalesce(octet_length(w.error_message), 0)
            END) OVER (ORDER BY w.updated_at DESC, w.workflow_name DESC, w.instance_id DESC
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < CAST(@payload_budget AS INTEGER) AS keep
    FROM workflow_instance w
    WHERE (CAST(sqlc.narg('statuses') AS TEXT) IS NULL
            OR w.status IN (SELECT value FROM json_each(sqlc.narg('statuses'))))
        AND (CAST(sqlc.narg('namespace') AS TEXT) IS NULL OR w.namespace = CAST(sqlc.narg('namespace') AS TEXT))
        AND (CAST(sqlc.narg('queue') AS TEXT) IS NULL OR w.queue = CAST(sqlc.narg('queue') AS TEXT))
        AND w.updated_at <= CAST(@cursor_updated_at AS INTEGER)
        AND (w.updated_at, w.workflow_name, w.instance_id) < (
            CAST(@cursor_updated_at AS INTEGER),
            CAST(@cursor_workflow_name AS TEXT),
            CAST(@cursor_instance_id AS TEXT))
    ORDER BY w.updated_at DESC, w.workflow_name DESC, w.instance_id DESC
    LIMIT @max
)
SELECT
    i.workflow_name, i.instance_id, i.status,
    CAST(coalesce(CASE WHEN page.keep THEN i.params END, '') AS TEXT) AS params,
    CAST(coalesce(CASE WHEN page.keep THEN i.output END, '') AS TEXT) AS output, i.error_name,
    CAST(coalesce(CASE WHEN page.keep THEN i.error_message END, '') AS TEXT) AS error_message,
    i.pause_requested, i.run_number, i.created_at, i.updated_at, i.started_at,
    i.completed_at, i.retention_until,
    CAST(coalesce(CASE WHEN page.keep THEN i.metadata END, '') AS TEXT) AS metadata, i.namespace, i.queue,
    i.priority, i.dedupe_key, i.limited, i.deadline_at, i.run_attempt,
    i.parent_workflow_name, i.parent_instance_id, i.parent_run_number,
    i.parent_step_key, i.parent_policy, i.trace_context,
    CAST(NOT page.keep AS INTEGER) AS payloads_omitted
FROM page
JOIN workflow_instance i ON i.workflow_name = page.workflow_name AND i.instance_id = page.instance_id
ORDER BY page.updated_at DESC, page.workflow_name DESC, page.instance_id DESC;

-- name: InstanceListWorkflowBounded :many
-- InstanceListWorkflowBounded is InstanceListBounded for the instances of
-- one workflow.
WITH page AS (
    SELECT w.workflow_name, w.instance_id, w.updated_at,
        CAST(@omit_payloads AS INTEGER) = 0 AND coalesce(sum(
            CASE WHEN CAST(@omit_payloads AS INTEGER) <> 0 THEN 0 ELSE
                coalesce(octet_length(w.params), 0) + coalesce(octet_length(w.output), 0)
                + coalesce(octet_length(w.metadata), 0) + coalesce(octet_length(w.error_message), 0)
            END) OVER (ORDER BY w.updated_at DESC, w.workflow_name DESC, w.instance_id DESC
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < CAST(@payload_budget AS INTEGER) AS keep
    FROM workflow_instance w
    WHERE w.workflow_name = @workflow_name
        AND (CAST(sqlc.narg('statuses') AS TEXT) IS NULL
            OR w.status IN (SELECT value FROM json_each(sqlc.narg('statuses'))))
        AND (CAST(sqlc.narg('namespace') AS TEXT) IS NULL OR w.namespace = CAST(sqlc.narg('namespace') AS TEXT))
        AND (CAST(sqlc.narg('queue') AS TEXT) IS NULL OR w.queue = CAST(sqlc.narg('queue') AS TEXT))
        AND w.updated_at <= CAST(@cursor_updated_at AS INTEGER)
        AND (w.updated_at, w.workflow_name, w.instance_id) < (
            CAST(@cursor_updated_at AS INTEGER),
            CAST(@cursor_workflow_name AS TEXT),
            CAST(@cursor_instance_id AS TEXT))
    ORDER BY w.updated_at DESC, w.workflow_name DESC, w.instance_id DESC
    LIMIT @max
)
SELECT
    i.workflow_name, i.instance_id, i.status,
    CAST(coalesce(CASE WHEN page.keep THEN i.params END, '') AS TEXT) AS params,
    CAST(coalesce(CASE WHEN page.keep THEN i.output END, '') AS TEXT) AS output, i.error_name,
    CAST(coalesce(CASE WHEN page.keep THEN i.error_message END, '') AS TEXT) AS error_message,
    i.pause_requested, i.run_number, i.created_at, i.updated_at, i.started_at,
    i.completed_at, i.retention_until,
    CAST(coalesce(CASE WHEN page.keep THEN i.metadata END, '') AS TEXT) AS metadata, i.namespace, i.queue,
    i.priority, i.dedupe_key, i.limited, i.deadline_at, i.run_attempt,
    i.parent_workflow_name, i.parent_instance_id, i.parent_run_number,
    i.parent_step_key, i.parent_policy, i.trace_context,
    CAST(NOT page.keep AS INTEGER) AS payloads_omitted
FROM page
JOIN workflow_instance i ON i.workflow_name = page.workflow_name AND i.instance_id = page.instance_id
ORDER BY page.updated_at DESC, page.workflow_name DESC, page.instance_id DESC;

-- name: InstanceSetStatus :one
-- InstanceSetStatus is the pause/resume/terminate transition of an instance
-- the caller's write transaction holds; completed_at is set only when the new
-- status is terminal.
UPDATE workflow_instance
SET status = @status,
    pause_requested = @pause_requested,
    completed_at = CASE @status
        WHEN 'complete' THEN @now
        WHEN 'errored' THEN @now
        WHEN 'terminated' THEN @now
        ELSE completed_at END,
    updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
RETURNING *;

-- name: InstanceTransition :exec
-- InstanceTransition is InstanceSetStatus of a checkpoint, which needs no
-- row back.
UPDATE workflow_instance
SET status = @status,
    pause_requested = @pause_requested,
    completed_at = CASE @status
        WHEN 'complete' THEN @now
        WHEN 'errored' THEN @now
        WHEN 'terminated' THEN @now
        ELSE completed_at END,
    updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: InstanceRestart :one
UPDATE workflow_instance
SET run_number = run_number + 1,
    status = 'queued',
    output = NULL,
    error_name = NULL,
    error_message = NULL,
    started_at = NULL,
    completed_at = NULL,
    pause_requested = 0,
    run_attempt = 1,
    updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
RETURNING *;

-- name: InstanceTouch :one
-- InstanceTouch marks an instance (any run) updated for a change that
-- follows, such as buffering an event.
UPDATE workflow_instance
SET updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND (CAST(@namespace AS TEXT) = '' OR namespace = CAST(@namespace AS TEXT))
RETURNING status, run_number;

-- name: InstanceStartClaimed :exec
-- InstanceStartClaimed marks the queued or waiting instances of just-claimed
-- tasks (task_ids is a JSON array of task ids) running.
UPDATE workflow_instance
SET status = 'running',
    started_at = coalesce(started_at, @now),
    updated_at = @now
WHERE status IN ('queued', 'waiting')
    AND (workflow_name, instance_id) IN (
        SELECT t.workflow_name, t.instance_id FROM workflow_task t
        WHERE t.id IN (SELECT value FROM json_each(CAST(@task_ids AS TEXT))));

-- name: InstanceComplete :exec
UPDATE workflow_instance
SET status = 'complete',
    output = @output,
    -- A run that completes after a workflow retry drops the failed
    -- attempt's error (as Postgres's CheckpointBatch does).
    error_name = NULL,
    error_message = NULL,
    pause_requested = 0,
    completed_at = CAST(@now AS INTEGER),
    updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: InstanceFail :exec
UPDATE workflow_instance
SET status = 'errored',
    error_name = @error_name,
    error_message = @error_message,
    pause_requested = 0,
    completed_at = CAST(@now AS INTEGER),
    updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: CheckpointFence :one
-- CheckpointFence is the fence of a checkpoint, inside its write
-- transaction: the instance's status and pause request when its run is
-- current and its task still held at the version; no row means the fence
-- failed (the instance was restarted or is gone, or the task moved on).
SELECT i.status, i.pause_requested
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
    AND i.run_number = @run_number
    AND EXISTS (
        SELECT 1 FROM workflow_task t
        WHERE t.id = @task_id AND t.version = @version AND t.status = 'processing'
    );

-- name: InstanceListFresh :many
-- InstanceListFresh returns the instances of just-claimed tasks (task_ids is
-- a JSON array of task ids) that never started: queued with no started_at,
-- so no step of their run exists.
SELECT * FROM workflow_instance
WHERE status = 'queued' AND started_at IS NULL
    AND (workflow_name, instance_id) IN (
        SELECT t.workflow_name, t.instance_id FROM workflow_task t
        WHERE t.id IN (SELECT value FROM json_each(CAST(@task_ids AS TEXT))));

-- name: InstanceSetDeadline :exec
-- InstanceSetDeadline writes the deadline of an instance the create of the
-- same transaction inserted: only creates that set a deadline run it.
UPDATE workflow_instance
SET deadline_at = @deadline_at
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: InstanceRetryRun :exec
-- InstanceRetryRun starts the next attempt of a failed run (a workflow
-- retry) in a fenced suspend checkpoint: run_attempt goes up by one and the
-- run's error is recorded until it ends. Only a workflow retry runs it.
UPDATE workflow_instance
SET run_attempt = run_attempt + 1,
    error_name = sqlc.narg('error_name'),
    error_message = sqlc.narg('error_message')
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number;

-- name: InstanceSetTraceContext :exec
-- InstanceSetTraceContext writes the trace context of an instance the
-- create of the same transaction inserted: only creates made with tracing
-- on, inside a span, run it.
UPDATE workflow_instance
SET trace_context = @trace_context
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;
