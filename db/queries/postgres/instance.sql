-- name: InstanceInsert :one
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    namespace, queue, priority
) VALUES (
    @workflow_name, @instance_id, 'queued', @params, sqlc.narg('metadata')::json, 1,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    @namespace::text, @queue::text, @priority::integer
)
RETURNING *;

-- name: InstanceInsertDedupe :one
-- InstanceInsertDedupe is InstanceInsert of a create with a dedupe key: it
-- inserts nothing, and returns no row, when an active instance of the
-- namespace and workflow holds the key (workflow_instance_dedupe_idx). A
-- concurrent create of the same key waits for the other to commit, so two
-- of them make one instance.
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    namespace, queue, priority, dedupe_key
) VALUES (
    @workflow_name, @instance_id, 'queued', @params, sqlc.narg('metadata')::json, 1,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    @namespace::text, @queue::text, @priority::integer, @dedupe_key::text
)
ON CONFLICT (namespace, workflow_name, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status NOT IN ('complete', 'errored', 'terminated')
    DO NOTHING
RETURNING *;

-- name: InstanceGetByDedupeKey :one
-- InstanceGetByDedupeKey returns the active instance that holds a dedupe key.
SELECT * FROM workflow_instance
WHERE namespace = @namespace AND workflow_name = @workflow_name AND dedupe_key = @dedupe_key
    AND status NOT IN ('complete', 'errored', 'terminated');

-- name: InstanceGetByDedupeKeys :many
-- InstanceGetByDedupeKeys returns the active instances that hold the dedupe
-- keys (a batch create's).
SELECT * FROM workflow_instance
WHERE namespace = @namespace AND workflow_name = @workflow_name
    AND dedupe_key = ANY(@dedupe_keys::text[])
    AND status NOT IN ('complete', 'errored', 'terminated');

-- name: InstanceInsertLeased :one
-- InstanceInsertLeased is the create of an eager start: it inserts the
-- instance running and started, and its first task processing and leased to
-- lock_owner at version 1 with attempts 1, as a claim would leave them. The
-- task shares the instance's creation time as its run_at.
WITH inst AS (
    INSERT INTO workflow_instance (
        workflow_name, instance_id, status, params, metadata, run_number,
        created_at, updated_at, started_at, namespace, queue, priority
    ) VALUES (
        @workflow_name, @instance_id, 'running', @params, sqlc.narg('metadata')::json, 1,
        coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now()),
        @namespace::text, @queue::text, @priority::integer
    )
    RETURNING *
),
task AS (
    INSERT INTO workflow_task (
        workflow_name, instance_id, run_number, kind, priority, run_at, status,
        lock_owner, locked_until, version, attempts, queue, instance_priority
    )
    SELECT inst.workflow_name, inst.instance_id, 1, 'run', 1, inst.created_at, 'processing',
        @lock_owner::text, @locked_until::timestamptz, 1, 1, inst.queue, inst.priority
    FROM inst
    RETURNING id
)
SELECT inst.workflow_name, inst.instance_id, inst.status, inst.params, inst.output,
    inst.error_name, inst.error_message, inst.pause_requested, inst.run_number,
    inst.created_at, inst.updated_at, inst.started_at, inst.completed_at,
    inst.retention_until, inst.metadata, inst.namespace, inst.queue, inst.priority,
    inst.dedupe_key, task.id AS task_id
FROM inst, task;

-- name: InstanceInsertMany :many
-- InstanceInsertMany inserts the instances whose ids are free and whose
-- dedupe keys (an empty one is none) no active instance of the namespace and
-- workflow holds; those named in started_ids (an eager start) are inserted
-- running and started.
INSERT INTO workflow_instance (
    workflow_name, instance_id, status, params, metadata, run_number, created_at, updated_at,
    started_at, namespace, queue, priority, dedupe_key
)
SELECT
    @workflow_name, item.instance_id,
    CASE WHEN item.instance_id = ANY(@started_ids::text[]) THEN 'running' ELSE 'queued' END,
    item.params, item.metadata, 1,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    CASE WHEN item.instance_id = ANY(@started_ids::text[])
        THEN coalesce(sqlc.narg('now')::timestamptz, now()) END,
    @namespace::text, item.queue, item.priority, nullif(item.dedupe_key, '')
FROM (
    SELECT unnest(@instance_ids::text[]) AS instance_id,
        unnest(@params::json[]) AS params,
        unnest(@metadata::json[]) AS metadata,
        unnest(@dedupe_keys::text[]) AS dedupe_key,
        unnest(@queues::text[]) AS queue,
        unnest(@priorities::integer[]) AS priority
) AS item
-- No conflict target: a taken id and a held dedupe key both skip the item.
ON CONFLICT DO NOTHING
RETURNING *;

-- name: InstanceGet :one
-- An empty namespace finds the instance in any namespace; another finds it
-- only in that one.
SELECT * FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND (@namespace::text = '' OR namespace = @namespace::text);

-- name: InstanceGetForUpdate :one
SELECT * FROM workflow_instance
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND (@namespace::text = '' OR namespace = @namespace::text)
FOR NO KEY UPDATE;

-- name: InstanceList :many
-- The list indexes are partial on updated_at > '-infinity' (true of every
-- row; see migration 00007), so the list states it to use them.
SELECT * FROM workflow_instance
WHERE updated_at > '-infinity'::timestamptz
    AND (sqlc.narg('workflow_name')::text IS NULL OR workflow_name = sqlc.narg('workflow_name')::text)
    AND (coalesce(cardinality(sqlc.narg('statuses')::text[]), 0) = 0
        OR status = ANY(sqlc.narg('statuses')::text[]))
    AND (sqlc.narg('namespace')::text IS NULL OR namespace = sqlc.narg('namespace')::text)
    AND (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue')::text)
    AND (sqlc.narg('cursor_updated_at')::timestamptz IS NULL
        OR (updated_at, workflow_name, instance_id) < (
            sqlc.narg('cursor_updated_at')::timestamptz,
            sqlc.narg('cursor_workflow_name')::text,
            sqlc.narg('cursor_instance_id')::text))
ORDER BY updated_at DESC, workflow_name DESC, instance_id DESC
LIMIT @max;

-- name: InstanceListBounded :many
-- InstanceListBounded is InstanceList with a byte budget on the payloads
-- (params, output, metadata, error_message) it reads: a row carries them
-- (keep) only while the payloads of the rows before it in the page add up
-- to less than @payload_budget bytes, and none with @omit_payloads; a row
-- past the budget comes without them, payloads_omitted set. The window
-- sums each row's sizes (their lengths in bytes, which the server measures
-- by reading them) over the rows before it; a payload it does not keep is
-- never sent.
SELECT
    p.workflow_name, p.instance_id, p.status,
    coalesce((CASE WHEN p.keep THEN p.params END)::text, '')::text AS params,
    coalesce((CASE WHEN p.keep THEN p.output END)::text, '')::text AS output, p.error_name,
    coalesce(CASE WHEN p.keep THEN p.error_message END, '')::text AS error_message,
    p.pause_requested, p.run_number, p.created_at, p.updated_at, p.started_at,
    p.completed_at, p.retention_until,
    coalesce((CASE WHEN p.keep THEN p.metadata END)::text, '')::text AS metadata, p.namespace, p.queue,
    p.priority, p.dedupe_key, p.limited, p.deadline_at, p.run_attempt,
    p.parent_workflow_name, p.parent_instance_id, p.parent_run_number,
    p.parent_step_key, p.parent_policy, p.trace_context,
    (NOT p.keep)::boolean AS payloads_omitted
FROM (
    SELECT i.*,
        NOT @omit_payloads::boolean AND coalesce(sum(
            CASE WHEN @omit_payloads::boolean THEN 0 ELSE
                coalesce(octet_length(i.params::text), 0) + coalesce(octet_length(i.output::text), 0)
                + coalesce(octet_length(i.metadata::text), 0) + coalesce(octet_length(i.error_message), 0)
            END) OVER (ORDER BY i.updated_at DESC, i.workflow_name DESC, i.instance_id DESC
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < @payload_budget::bigint AS keep
    FROM workflow_instance i
    WHERE i.updated_at > '-infinity'::timestamptz
        AND (sqlc.narg('workflow_name')::text IS NULL OR i.workflow_name = sqlc.narg('workflow_name')::text)
        AND (coalesce(cardinality(sqlc.narg('statuses')::text[]), 0) = 0
            OR i.status = ANY(sqlc.narg('statuses')::text[]))
        AND (sqlc.narg('namespace')::text IS NULL OR i.namespace = sqlc.narg('namespace')::text)
        AND (sqlc.narg('queue')::text IS NULL OR i.queue = sqlc.narg('queue')::text)
        AND (sqlc.narg('cursor_updated_at')::timestamptz IS NULL
            OR (i.updated_at, i.workflow_name, i.instance_id) < (
                sqlc.narg('cursor_updated_at')::timestamptz,
                sqlc.narg('cursor_workflow_name')::text,
                sqlc.narg('cursor_instance_id')::text))
    ORDER BY i.updated_at DESC, i.workflow_name DESC, i.instance_id DESC
    LIMIT @max
) p
ORDER BY p.updated_at DESC, p.workflow_name DESC, p.instance_id DESC;

-- name: InstanceChangeApply :one
-- InstanceChangeApply applies the plan of a management transition
-- (transition.ChangePlan: pause, resume, terminate, restart) to an instance
-- the caller's transaction holds locked, in one statement: the instance
-- takes status and pause_requested (a new run with new_run: run number + 1,
-- output, error and times cleared; completed_at is set when status is
-- terminal), the task is deleted (task_op 'delete') or made pending and due
-- now as kind with a new version (task_op 'requeue'; its attempts, last
-- error and lease losses cleared with reset_attempts), a hook entry of
-- hook_reason ('' for none) is recorded, due when the task is, and the
-- channel notified when notify is set. It returns the instance after it.
WITH inst AS (
    UPDATE workflow_instance i
    SET status = @status::text,
        pause_requested = @pause_requested::boolean,
        run_number = i.run_number + CASE WHEN @new_run::boolean THEN 1 ELSE 0 END,
        output = CASE WHEN @new_run::boolean THEN NULL ELSE i.output END,
        error_name = CASE WHEN @new_run::boolean THEN NULL ELSE i.error_name END,
        error_message = CASE WHEN @new_run::boolean THEN NULL ELSE i.error_message END,
        started_at = CASE WHEN @new_run::boolean THEN NULL ELSE i.started_at END,
        run_attempt = CASE WHEN @new_run::boolean THEN 1 ELSE i.run_attempt END,
        completed_at = CASE
            WHEN @new_run::boolean THEN NULL
            WHEN @status::text IN ('complete', 'errored', 'terminated') THEN coalesce(sqlc.narg('now')::timestamptz, now())
            ELSE i.completed_at END,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
    RETURNING i.*
),
deleted AS (
    DELETE FROM workflow_task t
    WHERE @task_op::text = 'delete'
        AND t.workflow_name = @workflow_name AND t.instance_id = @instance_id
    RETURNING 1
),
requeued AS (
    INSERT INTO workflow_task (
        workflow_name, instance_id, run_number, kind, priority, run_at, status, version, attempts,
        queue, instance_priority
    )
    SELECT i.workflow_name, i.instance_id, i.run_number, @kind::text, @priority::smallint,
        coalesce(sqlc.narg('now')::timestamptz, now()), 'pending', 1, 0,
        i.queue, i.priority
    FROM inst i
    WHERE @task_op::text = 'requeue'
    ON CONFLICT (workflow_name, instance_id) DO UPDATE
    SET run_number = excluded.run_number,
        kind = excluded.kind,
        priority = excluded.priority,
        run_at = excluded.run_at,
        status = 'pending',
        lock_owner = NULL,
        locked_until = NULL,
        version = workflow_task.version + 1,
        attempts = CASE WHEN @reset_attempts::boolean THEN 0 ELSE workflow_task.attempts END,
        lease_losses = CASE WHEN @reset_attempts::boolean THEN 0 ELSE workflow_task.lease_losses END,
        last_error = CASE WHEN @reset_attempts::boolean THEN NULL ELSE workflow_task.last_error END
    RETURNING run_at
),
hook AS (
    INSERT INTO workflow_hook_outbox (
        workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
    )
    SELECT i.workflow_name, i.instance_id, @hook_reason::text, coalesce(r.run_at, t.run_at),
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now())
    FROM inst i
    LEFT JOIN requeued r ON true
    LEFT JOIN workflow_task t
        ON t.workflow_name = i.workflow_name AND t.instance_id = i.instance_id
    WHERE @hook_reason::text <> '' AND coalesce(r.run_at, t.run_at) IS NOT NULL
    RETURNING 1
)
SELECT i.workflow_name, i.instance_id, i.status, i.params, i.output, i.error_name, i.error_message,
    i.pause_requested, i.run_number, i.created_at, i.updated_at, i.started_at, i.completed_at,
    i.retention_until, i.metadata, i.namespace, i.queue, i.priority, i.dedupe_key,
    i.deadline_at, i.run_attempt,
    (SELECT count(*) FROM (
        SELECT pg_notify(@channel::text, @workflow_name::text) WHERE @notify::boolean
    ) AS notified)::int AS notified
FROM inst i;

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
        lock_owner, locked_until, version, attempts, queue, instance_priority
    )
    SELECT @workflow_name, item.instance_id, 1, 'run', 1,
        coalesce(sqlc.narg('now')::timestamptz, now()),
        CASE WHEN item.leased THEN 'processing' ELSE 'pending' END,
        CASE WHEN item.leased THEN @lock_owner::text END,
        CASE WHEN item.leased THEN @locked_until::timestamptz END,
        CASE WHEN item.leased THEN 1 ELSE 0 END,
        CASE WHEN item.leased THEN 1 ELSE 0 END,
        item.queue, item.instance_priority
    FROM (
        SELECT u.instance_id, u.queue, u.instance_priority,
            u.instance_id = ANY(@leased_ids::text[]) AS leased
        FROM (
            SELECT unnest(@instance_ids::text[]) AS instance_id,
                unnest(@queues::text[]) AS queue,
                unnest(@instance_priorities::smallint[]) AS instance_priority
        ) AS u
    ) AS item
    RETURNING *
)
SELECT * FROM inserted WHERE status = 'processing';

-- name: InstanceSetDeadlines :exec
-- InstanceSetDeadlines writes the deadlines of instances a create of the
-- same transaction inserted: only creates that set a deadline run it.
UPDATE workflow_instance i
SET deadline_at = d.deadline_at
FROM (
    SELECT unnest(@instance_ids::text[]) AS instance_id,
        unnest(@deadlines::timestamptz[]) AS deadline_at
) AS d
WHERE i.workflow_name = @workflow_name AND i.instance_id = d.instance_id;

-- name: InstanceRetryRun :exec
-- InstanceRetryRun starts the next attempt of a failed run (a workflow
-- retry) in a suspend checkpoint, when the task is still held at the
-- version: run_attempt goes up by one, the run's error is recorded until
-- it ends, and the step rows of reset_steps are deleted so the next attempt
-- runs them again. Only a workflow retry runs it.
WITH inst AS (
    UPDATE workflow_instance i
    SET run_attempt = i.run_attempt + 1,
        error_name = NULLIF(@error_name::text, ''),
        error_message = NULLIF(@error_message::text, '')
    WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
        AND i.run_number = @run_number
        AND EXISTS (
            SELECT 1 FROM workflow_task t
            WHERE t.id = @task_id AND t.version = @version AND t.status = 'processing'
        )
    RETURNING i.workflow_name
)
DELETE FROM workflow_step s
USING inst
WHERE s.workflow_name = @workflow_name AND s.instance_id = @instance_id
    AND s.run_number = @run_number AND s.step_key = ANY(@reset_steps::text[]);

-- name: InstanceSetTraceContexts :exec
-- InstanceSetTraceContexts writes the trace context of instances a create
-- of the same transaction inserted: only creates made with tracing on,
-- inside a span, run it.
UPDATE workflow_instance i
SET trace_context = @trace_context::text
WHERE i.workflow_name = @workflow_name AND i.instance_id = ANY(@instance_ids::text[]);
