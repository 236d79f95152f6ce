-- name: OutboxRecord :exec
-- OutboxRecord records a hook for the instance's task as it stands in the
-- caller's transaction: run_at is the task's.
INSERT INTO workflow_hook_outbox (
    workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
)
SELECT t.workflow_name, t.instance_id, @reason::text, t.run_at,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
FROM workflow_task t
WHERE t.workflow_name = @workflow_name AND t.instance_id = @instance_id;

-- name: OutboxRecordMany :exec
-- OutboxRecordMany is OutboxRecord for several instances of one workflow,
-- recorded in the order of instance_ids.
INSERT INTO workflow_hook_outbox (
    workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
)
SELECT t.workflow_name, t.instance_id, @reason::text, t.run_at,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
FROM unnest(@instance_ids::text[]) WITH ORDINALITY AS item (instance_id, n)
JOIN workflow_task t
    ON t.workflow_name = @workflow_name AND t.instance_id = item.instance_id
ORDER BY item.n;

-- name: OutboxClaim :many
-- OutboxClaim leases due undelivered entries in one statement, longest due
-- first; rows another claim holds locked are skipped, never waited on.
WITH due AS (
    SELECT o.id
    FROM workflow_hook_outbox o
    WHERE o.delivered_at IS NULL
        AND o.next_attempt_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND (o.locked_until IS NULL
            OR o.locked_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY o.next_attempt_at, o.id
    LIMIT @max
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE workflow_hook_outbox o
    SET locked_until = @locked_until::timestamptz,
        version = o.version + 1,
        attempts = o.attempts + 1
    FROM due
    WHERE o.id = due.id
    RETURNING o.*
)
SELECT id, workflow_name, instance_id, reason, run_at, created_at, attempts,
    last_error, next_attempt_at, locked_until, version, delivered_at
FROM claimed
ORDER BY next_attempt_at, id;

-- name: OutboxDelivered :execrows
UPDATE workflow_hook_outbox
SET delivered_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    locked_until = NULL
WHERE id = @id AND version = @version
    AND delivered_at IS NULL AND locked_until IS NOT NULL;

-- name: OutboxRetry :execrows
UPDATE workflow_hook_outbox
SET next_attempt_at = @next_attempt_at::timestamptz,
    last_error = sqlc.narg('last_error'),
    locked_until = NULL
WHERE id = @id AND version = @version
    AND delivered_at IS NULL AND locked_until IS NOT NULL;

-- name: OutboxPrune :execrows
-- OutboxPrune deletes a batch of entries delivered before a time, found
-- through the delivered index and deleted by primary key, whatever the
-- size of the table.
DELETE FROM workflow_hook_outbox
WHERE id = ANY(ARRAY(
    SELECT o.id FROM workflow_hook_outbox o
    WHERE o.delivered_at IS NOT NULL AND o.delivered_at < @delivered_before::timestamptz
    ORDER BY o.delivered_at
    LIMIT @max
    FOR UPDATE SKIP LOCKED
));

-- name: WakeNotify :exec
-- WakeNotify tells LISTENing runners that work of the workflow is due. It is
-- transactional: the notification goes out when the transaction commits and
-- never when it rolls back.
SELECT pg_notify(@channel::text, @workflow_name::text);
