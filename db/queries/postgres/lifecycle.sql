-- name: LifecycleInsert :exec
-- LifecycleInsert writes lifecycle events (docs/events.md) in the
-- transaction of the transition they record, one multi-row insert. The
-- arrays are parallel; '' is NULL for step keys and details, and the zero
-- time (year 1) is now (the database clock, or the transition's now).
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at)
SELECT e.type, e.workflow_name, e.instance_id, e.run_number, NULLIF(e.step_key, ''), e.attempt,
    NULLIF(e.detail, ''),
    coalesce(NULLIF(e.at, '0001-01-01 00:00:00+00'::timestamptz), sqlc.narg('now')::timestamptz, now())
FROM (
    SELECT unnest(@types::text[]) AS type,
        unnest(@workflow_names::text[]) AS workflow_name,
        unnest(@instance_ids::text[]) AS instance_id,
        unnest(@run_numbers::int[]) AS run_number,
        unnest(@step_keys::text[]) AS step_key,
        unnest(@attempts::int[]) AS attempt,
        unnest(@details::text[]) AS detail,
        unnest(@ats::timestamptz[]) AS at
) AS e;

-- name: LifecycleInsertHeld :exec
-- LifecycleInsertHeld is LifecycleInsert guarded by a checkpoint's fence:
-- it writes only while the task is still held at the version (see
-- CheckpointSteps), so a fenced-out checkpoint writes no event.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at)
SELECT e.type, e.workflow_name, e.instance_id, e.run_number, NULLIF(e.step_key, ''), e.attempt,
    NULLIF(e.detail, ''),
    coalesce(NULLIF(e.at, '0001-01-01 00:00:00+00'::timestamptz), sqlc.narg('now')::timestamptz, now())
FROM (
    SELECT unnest(@types::text[]) AS type,
        unnest(@workflow_names::text[]) AS workflow_name,
        unnest(@instance_ids::text[]) AS instance_id,
        unnest(@run_numbers::int[]) AS run_number,
        unnest(@step_keys::text[]) AS step_key,
        unnest(@attempts::int[]) AS attempt,
        unnest(@details::text[]) AS detail,
        unnest(@ats::timestamptz[]) AS at
) AS e
WHERE EXISTS (
    SELECT 1 FROM workflow_task t
    WHERE t.id = @task_id AND t.version = @version AND t.status = 'processing'
);

-- name: LifecycleInsertSent :exec
-- LifecycleInsertSent logs event.received for a send, after EventSendInsert
-- in the same transaction and on the same condition (the instance
-- EventSendLock locked, in the namespace, not ended), with the run the
-- event was buffered for.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, attempt, detail, at)
SELECT 'event.received', i.workflow_name, i.instance_id, i.run_number, 0, @type::text,
    coalesce(sqlc.narg('now')::timestamptz, now())
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
    AND (@namespace::text = '' OR i.namespace = @namespace::text)
    AND i.status NOT IN ('complete', 'errored', 'terminated');

-- name: LifecycleList :many
-- LifecycleList returns a page of events in id order after a cursor, each
-- filter applying when set: the instance's through
-- lifecycle_event_instance_idx, a worker's through lifecycle_event_worker_idx,
-- the others along the primary key.
SELECT * FROM lifecycle_event e
WHERE e.id > @after_id
    AND (@workflow_name::text = '' OR e.workflow_name = @workflow_name::text)
    AND (@instance_id::text = '' OR e.instance_id = @instance_id::text)
    AND (@worker_id::text = '' OR e.worker_id = @worker_id::text)
    AND (cardinality(@types::text[]) = 0 OR e.type = ANY(@types::text[]))
    AND (sqlc.narg('since')::timestamptz IS NULL OR e.at >= sqlc.narg('since')::timestamptz)
    AND (sqlc.narg('until')::timestamptz IS NULL OR e.at < sqlc.narg('until')::timestamptz)
ORDER BY e.id
LIMIT @max;

-- name: LifecycleListNewest :many
-- LifecycleListNewest is LifecycleList newest first: a page of events in
-- descending id order before a cursor (0: from the newest), along the same
-- indexes backwards.
SELECT * FROM lifecycle_event e
WHERE (@before_id::bigint = 0 OR e.id < @before_id::bigint)
    AND e.id > @after_id
    AND (@workflow_name::text = '' OR e.workflow_name = @workflow_name::text)
    AND (@instance_id::text = '' OR e.instance_id = @instance_id::text)
    AND (@worker_id::text = '' OR e.worker_id = @worker_id::text)
    AND (cardinality(@types::text[]) = 0 OR e.type = ANY(@types::text[]))
    AND (sqlc.narg('since')::timestamptz IS NULL OR e.at >= sqlc.narg('since')::timestamptz)
    AND (sqlc.narg('until')::timestamptz IS NULL OR e.at < sqlc.narg('until')::timestamptz)
ORDER BY e.id DESC
LIMIT @max;

-- name: LifecyclePrune :execrows
-- LifecyclePrune deletes a batch of the oldest events before a time,
-- found through lifecycle_event_at_idx and deleted by primary key.
DELETE FROM lifecycle_event
WHERE id = ANY(ARRAY(
    SELECT e.id FROM lifecycle_event e
    WHERE e.at < @before::timestamptz
    ORDER BY e.at
    LIMIT @max
));

-- name: LifecycleLastID :one
-- LifecycleLastID is the id of the newest event, 0 when there is none.
SELECT coalesce(max(id), 0)::bigint AS id FROM lifecycle_event;
