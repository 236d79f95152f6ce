-- name: LifecycleInsert :exec
-- LifecycleInsert writes one lifecycle event (docs/events.md) in the
-- transaction of the transition it records.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at, started_at)
VALUES (@type, @workflow_name, @instance_id, @run_number, sqlc.narg('step_key'), @attempt, sqlc.narg('detail'), @at, sqlc.narg('started_at'));

-- name: LifecycleList :many
-- LifecycleList returns a page of events in id order after a cursor, each
-- filter applying when set, along the primary key (an instance's events
-- are LifecycleListInstance's). @types is a JSON array of type codes.
SELECT * FROM lifecycle_event e
WHERE e.id > @after_id
    AND (CAST(@workflow_name AS TEXT) = '' OR e.workflow_name = @workflow_name)
    AND (CAST(@worker_id AS TEXT) = '' OR e.worker_id = @worker_id)
    AND (CAST(@types AS TEXT) = '' OR e.type IN (SELECT value FROM json_each(@types))
        OR (CAST(@with_started AS INTEGER) AND e.started_at IS NOT NULL))
    AND (CAST(sqlc.narg('since') AS INTEGER) IS NULL OR e.at >= CAST(sqlc.narg('since') AS INTEGER)
        OR e.started_at >= CAST(sqlc.narg('since') AS INTEGER))
    AND (CAST(sqlc.narg('until') AS INTEGER) IS NULL OR e.at < CAST(sqlc.narg('until') AS INTEGER)
        OR e.started_at < CAST(sqlc.narg('until') AS INTEGER))
ORDER BY e.id
LIMIT @max;

-- name: LifecycleListNewest :many
-- LifecycleListNewest is LifecycleList newest first: a page of events in
-- descending id order before a cursor (0: from the newest).
SELECT * FROM lifecycle_event e
WHERE (CAST(@before_id AS INTEGER) = 0 OR e.id < CAST(@before_id AS INTEGER))
    AND e.id > @after_id
    AND (CAST(@workflow_name AS TEXT) = '' OR e.workflow_name = @workflow_name)
    AND (CAST(@worker_id AS TEXT) = '' OR e.worker_id = @worker_id)
    AND (CAST(@types AS TEXT) = '' OR e.type IN (SELECT value FROM json_each(@types))
        OR (CAST(@with_started AS INTEGER) AND e.started_at IS NOT NULL))
    AND (CAST(sqlc.narg('since') AS INTEGER) IS NULL OR e.at >= CAST(sqlc.narg('since') AS INTEGER)
        OR e.started_at >= CAST(sqlc.narg('since') AS INTEGER))
    AND (CAST(sqlc.narg('until') AS INTEGER) IS NULL OR e.at < CAST(sqlc.narg('until') AS INTEGER)
        OR e.started_at < CAST(sqlc.narg('until') AS INTEGER))
ORDER BY e.id DESC
LIMIT @max;

-- name: LifecycleListInstance :many
-- LifecycleListInstance is LifecycleList of one instance's events, through
-- lifecycle_event_instance_idx.
SELECT * FROM lifecycle_event e
WHERE e.instance_id = @instance_id AND e.id > @after_id
    AND e.workflow_name = @workflow_name
    AND (CAST(@worker_id AS TEXT) = '' OR e.worker_id = @worker_id)
    AND (CAST(@types AS TEXT) = '' OR e.type IN (SELECT value FROM json_each(@types))
        OR (CAST(@with_started AS INTEGER) AND e.started_at IS NOT NULL))
    AND (CAST(sqlc.narg('since') AS INTEGER) IS NULL OR e.at >= CAST(sqlc.narg('since') AS INTEGER)
        OR e.started_at >= CAST(sqlc.narg('since') AS INTEGER))
    AND (CAST(sqlc.narg('until') AS INTEGER) IS NULL OR e.at < CAST(sqlc.narg('until') AS INTEGER)
        OR e.started_at < CAST(sqlc.narg('until') AS INTEGER))
ORDER BY e.id
LIMIT @max;

-- name: LifecycleListInstanceNewest :many
-- LifecycleListInstanceNewest is LifecycleListNewest of one instance's
-- events, through lifecycle_event_instance_idx.
SELECT * FROM lifecycle_event e
WHERE e.instance_id = @instance_id
    AND e.id < CAST(@before_id AS INTEGER) AND e.id > @after_id
    AND e.workflow_name = @workflow_name
    AND (CAST(@worker_id AS TEXT) = '' OR e.worker_id = @worker_id)
    AND (CAST(@types AS TEXT) = '' OR e.type IN (SELECT value FROM json_each(@types))
        OR (CAST(@with_started AS INTEGER) AND e.started_at IS NOT NULL))
    AND (CAST(sqlc.narg('since') AS INTEGER) IS NULL OR e.at >= CAST(sqlc.narg('since') AS INTEGER)
        OR e.started_at >= CAST(sqlc.narg('since') AS INTEGER))
    AND (CAST(sqlc.narg('until') AS INTEGER) IS NULL OR e.at < CAST(sqlc.narg('until') AS INTEGER)
        OR e.started_at < CAST(sqlc.narg('until') AS INTEGER))
ORDER BY e.id DESC
LIMIT @max;

-- name: LifecyclePrune :execrows
-- LifecyclePrune deletes up to @max events before a time, the oldest by id
-- first, looking at no more than the @scan_rows oldest events (four times @max) (there is no
-- index on at: a batch never walks the log), and never the newest event
-- (so that no id is reused: the table has no AUTOINCREMENT). Ids follow
-- commit order and at is near it (a step.started's is the attempt's start,
-- and runners' clocks may differ), so an old event is passed over only
-- while four times @max younger ones come before it.
DELETE FROM lifecycle_event
WHERE id IN (
    SELECT e.id FROM lifecycle_event e
    WHERE e.id IN (SELECT w.id FROM lifecycle_event w ORDER BY w.id LIMIT @scan_rows)
        AND e.at < CAST(@before AS INTEGER)
    ORDER BY e.id
    LIMIT @max
)
    AND id < (SELECT max(m.id) FROM lifecycle_event m);

-- name: LifecycleLastID :one
-- LifecycleLastID is the id of the newest event, 0 when there is none.
SELECT CAST(coalesce(max(id), 0) AS INTEGER) AS id FROM lifecycle_event;

-- name: LifecycleInsertPair :exec
-- LifecycleInsertPair writes two lifecycle event rows in one statement:
-- the rest of a transaction's rows after LifecycleInsert8, two at a time.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at, started_at)
VALUES (@type1, @workflow_name1, @instance_id1, @run_number1, sqlc.narg('step_key1'), @attempt1, sqlc.narg('detail1'), @at1, sqlc.narg('started_at1')),
    (@type2, @workflow_name2, @instance_id2, @run_number2, sqlc.narg('step_key2'), @attempt2, sqlc.narg('detail2'), @at2, sqlc.narg('started_at2'));

-- name: LifecycleInsert8 :exec
-- LifecycleInsert8 writes eight lifecycle events in one statement: a group
-- commit's events go eight at a time, then in pairs, then one.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at, started_at)
VALUES
    (@type1, @workflow_name1, @instance_id1, @run_number1, sqlc.narg('step_key1'), @attempt1, sqlc.narg('detail1'), @at1, sqlc.narg('started_at1')),
    (@type2, @workflow_name2, @instance_id2, @run_number2, sqlc.narg('step_key2'), @attempt2, sqlc.narg('detail2'), @at2, sqlc.narg('started_at2')),
    (@type3, @workflow_name3, @instance_id3, @run_number3, sqlc.narg('step_key3'), @attempt3, sqlc.narg('detail3'), @at3, sqlc.narg('started_at3')),
    (@type4, @workflow_name4, @instance_id4, @run_number4, sqlc.narg('step_key4'), @attempt4, sqlc.narg('detail4'), @at4, sqlc.narg('started_at4')),
    (@type5, @workflow_name5, @instance_id5, @run_number5, sqlc.narg('step_key5'), @attempt5, sqlc.narg('detail5'), @at5, sqlc.narg('started_at5')),
    (@type6, @workflow_name6, @instance_id6, @run_number6, sqlc.narg('step_key6'), @attempt6, sqlc.narg('detail6'), @at6, sqlc.narg('started_at6')),
    (@type7, @workflow_name7, @instance_id7, @run_number7, sqlc.narg('step_key7'), @attempt7, sqlc.narg('detail7'), @at7, sqlc.narg('started_at7')),
    (@type8, @workflow_name8, @instance_id8, @run_number8, sqlc.narg('step_key8'), @attempt8, sqlc.narg('detail8'), @at8, sqlc.narg('started_at8'));
