-- name: EventInsert :one
INSERT INTO workflow_event (workflow_name, instance_id, run_number, type, payload, created_at)
VALUES (@workflow_name, @instance_id, @run_number, @type, @payload, @now)
RETURNING *;

-- name: EventConsumeOldest :one
-- EventConsumeOldest marks the oldest undelivered event of a type as consumed
-- by a step. The caller's write transaction excludes every other writer, so
-- no other consumer races.
UPDATE workflow_event
SET delivered_at = CAST(@now AS INTEGER),
    consumed_by_step_key = CAST(@step_key AS TEXT)
WHERE id = (
    SELECT e.id FROM workflow_event e
    WHERE e.workflow_name = @workflow_name AND e.instance_id = @instance_id
        AND e.run_number = @run_number AND e.type = @type
        AND e.delivered_at IS NULL
    ORDER BY e.id
    LIMIT 1
)
RETURNING *;

-- name: EventBuffered :one
-- EventBuffered reports whether an undelivered event of one of the types (a
-- JSON array) is buffered for the run: the fact that makes a suspended task
-- due at once (see transition.TaskWrite.Due).
SELECT CAST(EXISTS (
        SELECT 1 FROM workflow_event
        WHERE workflow_name = @workflow_name AND instance_id = @instance_id
            AND run_number = @run_number
            AND type IN (SELECT value FROM json_each(CAST(@types AS TEXT)))
            AND delivered_at IS NULL
    ) AS INTEGER) AS buffered;

-- name: EventUndeliveredCount :one
-- EventUndeliveredCount counts the undelivered events of a type buffered
-- for the run: the fact transition.DeliverAtSend decides on.
SELECT count(*) FROM workflow_event
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND type = @type
    AND delivered_at IS NULL;

-- name: EventList :many
-- EventList pages through the events of every run of an instance in id
-- order, after_id excluded; a negative max lists every event.
SELECT * FROM workflow_event
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND id > CAST(@after_id AS INTEGER)
ORDER BY id
LIMIT @max;

-- name: EventListRun :many
-- EventListRun is EventList for the events of one run.
SELECT * FROM workflow_event
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND id > CAST(@after_id AS INTEGER)
ORDER BY id
LIMIT @max;

-- name: EventListBounded :many
-- EventListBounded is EventList (of one run, or of every run when
-- @run_number is 0) with a byte budget on the payloads it reads, as
-- InstanceListBounded has: an event past the budget comes without its
-- payload, payload_omitted set.
WITH page AS (
    SELECT w.id,
        coalesce(sum(coalesce(octet_length(w.payload), 0))
            OVER (ORDER BY w.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < CAST(@payload_budget AS INTEGER) AS keep
    FROM workflow_event w
    WHERE w.workflow_name = @workflow_name AND w.instance_id = @instance_id
        AND (CAST(@run_number AS INTEGER) = 0 OR w.run_number = CAST(@run_number AS INTEGER))
        AND w.id > CAST(@after_id AS INTEGER)
    ORDER BY w.id
    LIMIT @max
)
SELECT
    e.id, e.workflow_name, e.instance_id, e.run_number, e.type,
    CAST(coalesce(CASE WHEN page.keep THEN e.payload END, '') AS TEXT) AS payload, e.created_at,
    e.delivered_at, e.consumed_by_step_key,
    CAST(NOT page.keep AS INTEGER) AS payload_omitted
FROM page
JOIN workflow_event e ON e.id = page.id
ORDER BY page.id;
