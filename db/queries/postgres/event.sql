-- name: EventInsert :one
INSERT INTO workflow_event (workflow_name, instance_id, run_number, type, payload, created_at)
VALUES (
    @workflow_name, @instance_id, @run_number, @type, @payload,
    coalesce(sqlc.narg('now')::timestamptz, now())
)
RETURNING *;

-- name: EventConsumeOldest :one
-- EventConsumeOldest marks the oldest undelivered event of a type as consumed
-- by a step. The caller holds the instance lock, so no other consumer races.
UPDATE workflow_event
SET delivered_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    consumed_by_step_key = @step_key::text
WHERE id = (
    SELECT e.id FROM workflow_event e
    WHERE e.workflow_name = @workflow_name AND e.instance_id = @instance_id
        AND e.run_number = @run_number AND e.type = @type
        AND e.delivered_at IS NULL
    ORDER BY e.id
    LIMIT 1
    FOR UPDATE
)
RETURNING *;

-- name: EventSuspendDue :one
-- EventSuspendDue reports whether a run that suspends until next_run_at, or
-- until an event of one of the types arrives, is due at once.
SELECT ((@next_run_at::timestamptz <= coalesce(sqlc.narg('now')::timestamptz, now()))
    OR EXISTS (
        SELECT 1 FROM workflow_event
        WHERE workflow_name = @workflow_name AND instance_id = @instance_id
            AND run_number = @run_number AND type = ANY(@types::text[])
            AND delivered_at IS NULL
    ))::boolean AS due;

-- name: EventList :many
-- EventList pages through the events of every run of an instance in id
-- order, after_id excluded; a NULL max lists every event.
SELECT * FROM workflow_event
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND id > @after_id
ORDER BY id
LIMIT sqlc.narg('max')::integer;

-- name: EventListRun :many
-- EventListRun is EventList for the events of one run.
SELECT * FROM workflow_event
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND id > @after_id
ORDER BY id
LIMIT sqlc.narg('max')::integer;
