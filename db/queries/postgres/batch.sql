-- name: CheckpointBatchLock :many
-- CheckpointBatchLock is the fence of a group commit: it locks the instances
-- of a batch of checkpoints in key order (the lock order of every writer is
-- instance before task, and sorted keys keep concurrent batches from
-- deadlocking) and reports, for each instance whose run is current and not
-- terminal, whether its task is still held at the checkpoint's version. While
-- the instance row is locked no claim, restart, resume or terminate can move
-- the task's version, so the answer holds until commit.
SELECT i.workflow_name, i.instance_id, i.status, i.pause_requested,
    EXISTS (
        SELECT 1 FROM workflow_task t
        WHERE t.id = u.task_id AND t.version = u.version AND t.status = 'processing'
    ) AS held
FROM (
    SELECT unnest(@workflow_names::text[]) AS workflow_name,
        unnest(@instance_ids::text[]) AS instance_id,
        unnest(@run_numbers::int[]) AS run_number,
        unnest(@task_ids::bigint[]) AS task_id,
        unnest(@versions::bigint[]) AS version
) AS u
JOIN workflow_instance i
    ON i.workflow_name = u.workflow_name AND i.instance_id = u.instance_id
WHERE i.run_number = u.run_number
    AND i.status NOT IN ('complete', 'errored', 'terminated')
ORDER BY i.workflow_name, i.instance_id
FOR NO KEY UPDATE OF i;

-- name: CheckpointBatchWrite :exec
-- CheckpointBatchWrite commits the writes of the fenced checkpoints of a
-- batch in one statement: every instance's updated_at, every task's renewed
-- lease, and every step row. Nullable step columns travel as '' or the
-- zero time (year 1) in the arrays and are stored as NULL.
WITH touched AS (
    UPDATE workflow_instance i
    SET updated_at = @now::timestamptz
    FROM (
        SELECT unnest(@workflow_names::text[]) AS workflow_name,
            unnest(@instance_ids::text[]) AS instance_id
    ) AS u
    WHERE i.workflow_name = u.workflow_name AND i.instance_id = u.instance_id
    RETURNING 1
), extended AS (
    UPDATE workflow_task t
    SET locked_until = u.locked_until
    FROM (
        SELECT unnest(@task_ids::bigint[]) AS id,
            unnest(@locked_until::timestamptz[]) AS locked_until
    ) AS u
    WHERE t.id = u.id
    RETURNING 1
)
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, timeout_ms, next_retry_at, wake_at, wait_event_type,
    result, error_name, error_message, created_at, updated_at, completed_at
)
SELECT s.workflow_name, s.instance_id, s.run_number, s.step_key, s.type, s.status,
    s.attempts, s.max_attempts, s.timeout_ms,
    NULLIF(s.next_retry_at, '0001-01-01 00:00:00+00'::timestamptz),
    NULLIF(s.wake_at, '0001-01-01 00:00:00+00'::timestamptz),
    NULLIF(s.wait_event_type, ''),
    NULLIF(s.result, '')::json,
    NULLIF(s.error_name, ''),
    NULLIF(s.error_message, ''),
    @now::timestamptz, @now::timestamptz,
    CASE WHEN s.status IN ('complete', 'errored') THEN @now::timestamptz END
FROM (
    SELECT unnest(@s_workflow_names::text[]) AS workflow_name,
        unnest(@s_instance_ids::text[]) AS instance_id,
        unnest(@s_run_numbers::int[]) AS run_number,
        unnest(@s_step_keys::text[]) AS step_key,
        unnest(@s_types::text[]) AS type,
        unnest(@s_statuses::text[]) AS status,
        unnest(@s_attempts::int[]) AS attempts,
        unnest(@s_max_attempts::int[]) AS max_attempts,
        unnest(@s_timeouts_ms::bigint[]) AS timeout_ms,
        unnest(@s_next_retry_at::timestamptz[]) AS next_retry_at,
        unnest(@s_wake_at::timestamptz[]) AS wake_at,
        unnest(@s_wait_event_types::text[]) AS wait_event_type,
        unnest(@s_results::text[]) AS result,
        unnest(@s_error_names::text[]) AS error_name,
        unnest(@s_error_messages::text[]) AS error_message
) AS s
ON CONFLICT (workflow_name, instance_id, run_number, step_key) DO UPDATE
SET type = excluded.type,
    status = excluded.status,
    attempts = excluded.attempts,
    max_attempts = excluded.max_attempts,
    timeout_ms = excluded.timeout_ms,
    next_retry_at = excluded.next_retry_at,
    wake_at = excluded.wake_at,
    wait_event_type = excluded.wait_event_type,
    result = excluded.result,
    error_name = excluded.error_name,
    error_message = excluded.error_message,
    updated_at = excluded.updated_at,
    completed_at = excluded.completed_at;
