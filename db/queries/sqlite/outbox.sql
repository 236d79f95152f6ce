-- name: OutboxRecord :exec
-- OutboxRecord records a hook for the instance's task as it stands in the
-- caller's transaction: run_at is the task's.
INSERT INTO workflow_hook_outbox (
    workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
)
SELECT t.workflow_name, t.instance_id, CAST(@reason AS TEXT), t.run_at,
    CAST(@now AS INTEGER), CAST(@now AS INTEGER)
FROM workflow_task t
WHERE t.workflow_name = @workflow_name AND t.instance_id = @instance_id;

-- name: OutboxClaim :many
-- OutboxClaim leases due undelivered entries, longest due first. It runs in
-- the claim's write transaction, which excludes every other writer, so
-- there is nothing to skip.
UPDATE workflow_hook_outbox
SET locked_until = CAST(@locked_until AS INTEGER),
    version = version + 1,
    attempts = attempts + 1
WHERE id IN (
    SELECT o.id FROM workflow_hook_outbox o
    WHERE o.delivered_at IS NULL
        AND o.next_attempt_at <= CAST(@now AS INTEGER)
        AND (o.locked_until IS NULL OR o.locked_until <= CAST(@now AS INTEGER))
    ORDER BY o.next_attempt_at, o.id
    LIMIT @max
)
RETURNING *;

-- name: OutboxDelivered :execrows
UPDATE workflow_hook_outbox
SET delivered_at = CAST(@now AS INTEGER),
    locked_until = NULL
WHERE id = @id AND version = @version
    AND delivered_at IS NULL AND locked_until IS NOT NULL;

-- name: OutboxRetry :execrows
UPDATE workflow_hook_outbox
SET next_attempt_at = CAST(@next_attempt_at AS INTEGER),
    last_error = sqlc.narg('last_error'),
    locked_until = NULL
WHERE id = @id AND version = @version
    AND delivered_at IS NULL AND locked_until IS NOT NULL;

-- name: OutboxPrune :execrows
DELETE FROM workflow_hook_outbox
WHERE id IN (
    SELECT o.id FROM workflow_hook_outbox o
    WHERE o.delivered_at IS NOT NULL AND o.delivered_at < CAST(@delivered_before AS INTEGER)
    ORDER BY o.delivered_at
    LIMIT @max
);
