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

-- name: EventListBounded :many
-- EventListBounded is EventList (of one run, or of every run when
-- @run_number is 0) with a byte budget on the payloads it reads, as
-- InstanceListBounded has: an event past the budget comes without its
-- payload, payload_omitted set.
SELECT
    p.id, p.workflow_name, p.instance_id, p.run_number, p.type,
    coalesce((CASE WHEN p.keep THEN p.payload END)::text, '')::text AS payload, p.created_at,
    p.delivered_at, p.consumed_by_step_key,
    (NOT p.keep)::boolean AS payload_omitted
FROM (
    SELECT e.*,
        coalesce(sum(coalesce(octet_length(e.payload::text), 0))
            OVER (ORDER BY e.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < @payload_budget::bigint AS keep
    FROM workflow_event e
    WHERE e.workflow_name = @workflow_name AND e.instance_id = @instance_id
        AND (@run_number::integer = 0 OR e.run_number = @run_number::integer) AND e.id > @after_id
    ORDER BY e.id
    LIMIT @max::integer
) p
ORDER BY p.id;

-- name: EventSendLock :one
-- EventSendLock is the first statement of a pipelined send: it locks the
-- instance (any run) and returns its status and run. A live instance's
-- updated_at moves; a terminal one is left as it was (the send fails).
UPDATE workflow_instance
SET updated_at = CASE WHEN status IN ('complete', 'errored', 'terminated')
    THEN updated_at ELSE coalesce(sqlc.narg('now')::timestamptz, now()) END
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND (@namespace::text = '' OR namespace = @namespace::text)
RETURNING status, run_number;

-- name: EventSendInsert :one
-- EventSendInsert buffers the event for the current run of the instance
-- EventSendLock locked, unless the instance has ended: then no row.
INSERT INTO workflow_event (workflow_name, instance_id, run_number, type, payload, created_at)
SELECT i.workflow_name, i.instance_id, i.run_number, @type::text, sqlc.narg('payload')::json,
    coalesce(sqlc.narg('now')::timestamptz, now())
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
    AND (@namespace::text = '' OR i.namespace = @namespace::text)
    AND i.status NOT IN ('complete', 'errored', 'terminated')
RETURNING *;

-- name: EventSendWake :many
-- EventSendWake is the last statement of a pipelined send: when the locked
-- instance is neither paused, pausing nor ended and its current run waits
-- for an event of the type, it makes the pending task due now as a resume,
-- records a hook entry (reason event, due when the task is) when record_hook
-- is set, and notifies the channel. With a lock_owner, when the task's
-- queue is one of lease_queues (or lease_queues is empty), it leases the
-- task instead, as a claim does (version and attempts up by one, the
-- instance running), and notifies no one.
--
-- With a delivered_result (the step result of the event EventSendInsert
-- buffered, encoded by the caller, which sends one only when the send has
-- its clock) it also delivers the event to the run it wakes, as the run
-- would consume it, following transition.DeliverAtSend: the first step of
-- the run waiting for the type (oldest first) completes with that result
-- and the event is marked consumed by it, so that the resumed run finds the
-- step complete and goes on without a checkpoint of its own. It does so
-- only when that event is the run's one undelivered event of the type, the
-- one the run would consume first; otherwise the run consumes the oldest
-- itself.
--
-- It returns the woken task, if any, and the key of the step the event was
-- delivered to ('' when none).
WITH woken AS (
    -- The lease goes only to a runner that serves the task's queue
    -- (lease_queues); otherwise the task is made due for a claim.
    UPDATE workflow_task t
    SET run_at = least(t.run_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        kind = @kind::text,
        priority = @priority::smallint,
        status = CASE WHEN (sqlc.narg('lock_owner')::text IS NOT NULL
            AND (cardinality(@lease_queues::text[]) = 0 OR t.queue = ANY(@lease_queues::text[]))) THEN 'processing' ELSE t.status END,
        lock_owner = CASE WHEN (sqlc.narg('lock_owner')::text IS NOT NULL
            AND (cardinality(@lease_queues::text[]) = 0 OR t.queue = ANY(@lease_queues::text[]))) THEN sqlc.narg('lock_owner')::text ELSE t.lock_owner END,
        locked_until = CASE WHEN (sqlc.narg('lock_owner')::text IS NOT NULL
            AND (cardinality(@lease_queues::text[]) = 0 OR t.queue = ANY(@lease_queues::text[]))) THEN sqlc.narg('locked_until')::timestamptz ELSE t.locked_until END,
        version = t.version + CASE WHEN (sqlc.narg('lock_owner')::text IS NOT NULL
            AND (cardinality(@lease_queues::text[]) = 0 OR t.queue = ANY(@lease_queues::text[]))) THEN 1 ELSE 0 END,
        attempts = t.attempts + CASE WHEN (sqlc.narg('lock_owner')::text IS NOT NULL
            AND (cardinality(@lease_queues::text[]) = 0 OR t.queue = ANY(@lease_queues::text[]))) THEN 1 ELSE 0 END
    WHERE t.workflow_name = @workflow_name AND t.instance_id = @instance_id
        AND t.status = 'pending'
        AND EXISTS (
            SELECT 1
            FROM workflow_instance i
            JOIN workflow_step s
                ON s.workflow_name = i.workflow_name AND s.instance_id = i.instance_id
                AND s.run_number = i.run_number
            WHERE i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
                AND (@namespace::text = '' OR i.namespace = @namespace::text)
                AND i.status = ANY(@wake_statuses::text[])
                AND s.type IN ('waitForEvent', 'invoke') AND s.status = 'waiting'
                AND s.wait_event_type = @type::text
        )
    RETURNING t.*
),
started AS (
    UPDATE workflow_instance i
    SET status = 'running',
        started_at = coalesce(i.started_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM woken w
    WHERE w.status = 'processing'
        AND i.workflow_name = w.workflow_name AND i.instance_id = w.instance_id
        AND i.status IN ('queued', 'waiting')
    RETURNING 1
),
hook AS (
    INSERT INTO workflow_hook_outbox (
        workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
    )
    SELECT w.workflow_name, w.instance_id, 'event', w.run_at,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now())
    FROM woken w
    WHERE @record_hook::boolean
    RETURNING 1
),
target AS (
    SELECT s.run_number, s.step_key
    FROM woken w
    JOIN workflow_step s
        ON s.workflow_name = w.workflow_name AND s.instance_id = w.instance_id
        AND s.run_number = w.run_number
    WHERE sqlc.narg('delivered_result')::json IS NOT NULL
        AND s.type IN ('waitForEvent', 'invoke') AND s.status = 'waiting'
        AND s.wait_event_type = @type::text
    ORDER BY s.created_at, s.step_key
    LIMIT 1
),
only_event AS (
    SELECT max(e.id) AS id
    FROM target g
    JOIN workflow_event e
        ON e.workflow_name = @workflow_name AND e.instance_id = @instance_id
        AND e.run_number = g.run_number AND e.type = @type::text
        AND e.delivered_at IS NULL
    HAVING count(*) = 1
),
consumed AS (
    UPDATE workflow_event e
    SET delivered_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        consumed_by_step_key = g.step_key
    FROM target g, only_event o
    WHERE e.id = o.id
    RETURNING e.id
),
delivered AS (
    UPDATE workflow_step s
    SET status = 'complete',
        result = sqlc.narg('delivered_result')::json,
        next_retry_at = NULL,
        error_name = NULL,
        error_message = NULL,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        completed_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM target g, only_event o
    WHERE s.workflow_name = @workflow_name AND s.instance_id = @instance_id
        AND s.run_number = g.run_number AND s.step_key = g.step_key
    RETURNING s.step_key
)
SELECT w.id, w.workflow_name, w.instance_id, w.run_number, w.kind, w.priority, w.run_at, w.status,
    w.lock_owner, w.locked_until, w.version, w.attempts, w.last_error, w.lease_losses,
    w.queue, w.instance_priority,
    (SELECT count(*) FROM (
        SELECT pg_notify(@channel::text, w.workflow_name)
        WHERE w.status = 'pending'
    ) AS notified)::int AS notified,
    coalesce((SELECT d.step_key FROM delivered d), '')::text AS delivered_step_key
FROM woken w;
