-- name: LifecycleInsert :exec
-- LifecycleInsert writes one lifecycle event (docs/events.md) in the
-- transaction of the transition it records.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at)
VALUES (@type, @workflow_name, @instance_id, @run_number, sqlc.narg('step_key'), @attempt, sqlc.narg('detail'), @at);

-- name: LifecycleList :many
-- LifecycleList returns a page of events in id order after a cursor, each
-- filter applying when set.
SELECT * FROM lifecycle_event e
WHERE e.id > @after_id
    AND (CAST(@workflow_name AS TEXT) = '' OR e.workflow_name = @workflow_name)
    AND (CAST(@instance_id AS TEXT) = '' OR e.instance_id = @instance_id)
    AND (CAST(@worker_id AS TEXT) = '' OR e.worker_id = @worker_id)
    AND (CAST(@types AS TEXT) = '' OR e.type IN (SELECT value FROM json_each(@types)))
    AND (CAST(sqlc.narg('since') AS INTEGER) IS NULL OR e.at >= CAST(sqlc.narg('since') AS INTEGER))
    AND (CAST(sqlc.narg('until') AS INTEGER) IS NULL OR e.at < CAST(sqlc.narg('until') AS INTEGER))
ORDER BY e.id
LIMIT @max;

-- name: LifecycleListNewest :many
-- LifecycleListNewest is LifecycleList newest first: a page of events in
-- descending id order before a cursor (0: from the newest).
SELECT * FROM lifecycle_event e
WHERE (CAST(@before_id AS INTEGER) = 0 OR e.id < CAST(@before_id AS INTEGER))
    AND e.id > @after_id
    AND (CAST(@workflow_name AS TEXT) = '' OR e.workflow_name = @workflow_name)
    AND (CAST(@instance_id AS TEXT) = '' OR e.instance_id = @instance_id)
    AND (CAST(@worker_id AS TEXT) = '' OR e.worker_id = @worker_id)
    AND (CAST(@types AS TEXT) = '' OR e.type IN (SELECT value FROM json_each(@types)))
    AND (CAST(sqlc.narg('since') AS INTEGER) IS NULL OR e.at >= CAST(sqlc.narg('since') AS INTEGER))
    AND (CAST(sqlc.narg('until') AS INTEGER) IS NULL OR e.at < CAST(sqlc.narg('until') AS INTEGER))
ORDER BY e.id DESC
LIMIT @max;

-- name: LifecyclePrune :execrows
-- LifecyclePrune deletes a batch of the oldest events before a time.
DELETE FROM lifecycle_event
WHERE id IN (
    SELECT e.id FROM lifecycle_event e
    WHERE e.at < CAST(@before AS INTEGER)
    ORDER BY e.at
    LIMIT @max
);

-- name: LifecycleLastID :one
-- LifecycleLastID is the id of the newest event, 0 when there is none.
SELECT CAST(coalesce(max(id), 0) AS INTEGER) AS id FROM lifecycle_event;

-- name: LifecycleInsertPair :exec
-- LifecycleInsertPair writes two lifecycle events in one statement: a
-- step's start and its outcome, the common pair of a checkpoint, for half
-- the statements of two LifecycleInserts.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at)
VALUES (@type1, @workflow_name1, @instance_id1, @run_number1, sqlc.narg('step_key1'), @attempt1, sqlc.narg('detail1'), @at1),
    (@type2, @workflow_name2, @instance_id2, @run_number2, sqlc.narg('step_key2'), @attempt2, sqlc.narg('detail2'), @at2);
