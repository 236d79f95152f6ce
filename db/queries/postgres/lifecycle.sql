-- name: LifecycleInsert :exec
-- LifecycleInsert writes lifecycle events (docs/events.md) in the
-- transaction of the transition they record, one multi-row insert. The
-- arrays are parallel; '' is NULL for step keys and details, and the zero
-- time (year 1) is now (the database clock, or the transition's now).
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at, started_at)
SELECT e.type, e.workflow_name, e.instance_id, e.run_number, NULLIF(e.step_key, ''), e.attempt,
    NULLIF(e.detail, ''),
    coalesce(NULLIF(e.at, '0001-01-01 00:00:00+00'::timestamptz), sqlc.narg('now')::timestamptz, now()),
    NULLIF(e.started_at, '0001-01-01 00:00:00+00'::timestamptz)
FROM (
    SELECT unnest(@types::text[]) AS type,
        unnest(@workflow_names::text[]) AS workflow_name,
        unnest(@instance_ids::text[]) AS instance_id,
        unnest(@run_numbers::int[]) AS run_number,
        unnest(@step_keys::text[]) AS step_key,
        unnest(@attempts::int[]) AS attempt,
        unnest(@details::text[]) AS detail,
        unnest(@ats::timestamptz[]) AS at,
            unnest(@started_ats::timestamptz[]) AS started_at
) AS e;

-- name: LifecycleInsertHeld :exec
-- LifecycleInsertHeld is LifecycleInsert guarded by a checkpoint's fence:
-- it writes only while the task is still held at the version (see
-- CheckpointSteps), so a fenced-out checkpoint writes no event.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at, started_at)
SELECT e.type, e.workflow_name, e.instance_id, e.run_number, NULLIF(e.step_key, ''), e.attempt,
    NULLIF(e.detail, ''),
    coalesce(NULLIF(e.at, '0001-01-01 00:00:00+00'::timestamptz), sqlc.narg('now')::timestamptz, now()),
    NULLIF(e.started_at, '0001-01-01 00:00:00+00'::timestamptz)
FROM (
    SELECT unnest(@types::text[]) AS type,
        unnest(@workflow_names::text[]) AS workflow_name,
        unnest(@instance_ids::text[]) AS instance_id,
        unnest(@run_numbers::int[]) AS run_number,
        unnest(@step_keys::text[]) AS step_key,
        unnest(@attempts::int[]) AS attempt,
        unnest(@details::text[]) AS detail,
        unnest(@ats::timestamptz[]) AS at,
            unnest(@started_ats::timestamptz[]) AS started_at
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
-- filter applying when set, along the primary key (an instance's events
-- are LifecycleListInstance's).
SELECT * FROM lifecycle_event e
WHERE e.id > @after_id
    AND (@workflow_name::text = '' OR e.workflow_name = @workflow_name::text)
    AND (@worker_id::text = '' OR e.worker_id = @worker_id::text)
    AND (cardinality(@types::text[]) = 0 OR e.type = ANY(@types::text[])
        OR (@with_started::boolean AND e.started_at IS NOT NULL))
    AND (sqlc.narg('since')::timestamptz IS NULL OR e.at >= sqlc.narg('since')::timestamptz
        OR e.started_at >= sqlc.narg('since')::timestamptz)
    AND (sqlc.narg('until')::timestamptz IS NULL OR e.at < sqlc.narg('until')::timestamptz
        OR e.started_at < sqlc.narg('until')::timestamptz)
ORDER BY e.id
LIMIT @max;

-- name: LifecycleListNewest :many
-- LifecycleListNewest is LifecycleList newest first: a page of events in
-- descending id order before a cursor (0: from the newest).
SELECT * FROM lifecycle_event e
WHERE (@before_id::bigint = 0 OR e.id < @before_id::bigint)
    AND e.id > @after_id
    AND (@workflow_name::text = '' OR e.workflow_name = @workflow_name::text)
    AND (@worker_id::text = '' OR e.worker_id = @worker_id::text)
    AND (cardinality(@types::text[]) = 0 OR e.type = ANY(@types::text[])
        OR (@with_started::boolean AND e.started_at IS NOT NULL))
    AND (sqlc.narg('since')::timestamptz IS NULL OR e.at >= sqlc.narg('since')::timestamptz
        OR e.started_at >= sqlc.narg('since')::timestamptz)
    AND (sqlc.narg('until')::timestamptz IS NULL OR e.at < sqlc.narg('until')::timestamptz
        OR e.started_at < sqlc.narg('until')::timestamptz)
ORDER BY e.id DESC
LIMIT @max;

-- name: LifecycleListInstance :many
-- LifecycleListInstance is LifecycleList of one instance's events, through
-- lifecycle_event_instance_idx.
SELECT * FROM lifecycle_event e
WHERE e.instance_id = @instance_id::text AND e.id > @after_id
    AND e.workflow_name = @workflow_name::text
    AND (@worker_id::text = '' OR e.worker_id = @worker_id::text)
    AND (cardinality(@types::text[]) = 0 OR e.type = ANY(@types::text[])
        OR (@with_started::boolean AND e.started_at IS NOT NULL))
    AND (sqlc.narg('since')::timestamptz IS NULL OR e.at >= sqlc.narg('since')::timestamptz
        OR e.started_at >= sqlc.narg('since')::timestamptz)
    AND (sqlc.narg('until')::timestamptz IS NULL OR e.at < sqlc.narg('until')::timestamptz
        OR e.started_at < sqlc.narg('until')::timestamptz)
ORDER BY e.id
LIMIT @max;

-- name: LifecycleListInstanceNewest :many
-- LifecycleListInstanceNewest is LifecycleListNewest of one instance's
-- events, through lifecycle_event_instance_idx.
SELECT * FROM lifecycle_event e
WHERE e.instance_id = @instance_id::text
    AND e.id < @before_id::bigint AND e.id > @after_id
    AND e.workflow_name = @workflow_name::text
    AND (@worker_id::text = '' OR e.worker_id = @worker_id::text)
    AND (cardinality(@types::text[]) = 0 OR e.type = ANY(@types::text[])
        OR (@with_started::boolean AND e.started_at IS NOT NULL))
    AND (sqlc.narg('since')::timestamptz IS NULL OR e.at >= sqlc.narg('since')::timestamptz
        OR e.started_at >= sqlc.narg('since')::timestamptz)
    AND (sqlc.narg('until')::timestamptz IS NULL OR e.at < sqlc.narg('until')::timestamptz
        OR e.started_at < sqlc.narg('until')::timestamptz)
ORDER BY e.id DESC
LIMIT @max;

-- name: LifecyclePrune :execrows
-- LifecyclePrune deletes up to @max events before a time, the oldest by id
-- first, looking at no more than the @scan_rows oldest events (four times @max) (there is no
-- index on at: a batch never walks the log), by primary key. Ids are taken
-- at insert and at is near it (the transaction's time; a step.started's is
-- the attempt's start, and runners' clocks may differ), so an old event is
-- passed over only while @scan_rows younger ones come before it.
DELETE FROM lifecycle_event
WHERE id = ANY(ARRAY(
    SELECT w.id FROM (
        SELECT e.id, e.at FROM lifecycle_event e ORDER BY e.id LIMIT @scan_rows::int
    ) AS w
    WHERE w.at < @before::timestamptz
    LIMIT @max
));

-- name: LifecycleLastID :one
-- LifecycleLastID is the id of the newest event, 0 when there is none.
SELECT coalesce(max(id), 0)::bigint AS id FROM lifecycle_event;
