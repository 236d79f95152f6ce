-- name: StepCompleteWithEvent :exec
-- StepCompleteWithEvent writes the step that consumed an event: a
-- waitForEvent step, or an invoke step receiving its child's end (step_type
-- is the type of a step without a row yet). An existing row (the wait)
-- keeps its type, attempts, timeout and wake_at.
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    wait_event_type, result, created_at, updated_at, completed_at
) VALUES (
    @workflow_name, @instance_id, @run_number, @step_key, @step_type::text, 'complete',
    @wait_event_type, @result,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
)
ON CONFLICT (workflow_name, instance_id, run_number, step_key) DO UPDATE
SET status = excluded.status,
    next_retry_at = NULL,
    wait_event_type = excluded.wait_event_type,
    result = excluded.result,
    error_name = NULL,
    error_message = NULL,
    updated_at = excluded.updated_at,
    completed_at = excluded.completed_at;

-- name: StepList :many
-- StepList pages through the steps of one run in id (creation) order,
-- after_id excluded, of the given statuses (NULL or empty: every status);
-- a NULL max lists every step.
SELECT * FROM workflow_step
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND id > @after_id
    AND (coalesce(cardinality(sqlc.narg('statuses')::text[]), 0) = 0
        OR status = ANY(sqlc.narg('statuses')::text[]))
ORDER BY id
LIMIT sqlc.narg('max')::integer;

-- name: StepListBounded :many
-- StepListBounded is StepList with a byte budget on the payloads (result,
-- error_message) it reads, as InstanceListBounded has: a step past the
-- budget comes without them, payloads_omitted set.
SELECT
    p.id, p.workflow_name, p.instance_id, p.run_number, p.step_key, p.type,
    p.status, p.attempts, p.max_attempts, p.timeout_ms, p.next_retry_at,
    p.wake_at, p.wait_event_type, coalesce((CASE WHEN p.keep THEN p.result END)::text, '')::text AS result,
    p.error_name, coalesce(CASE WHEN p.keep THEN p.error_message END, '')::text AS error_message,
    p.created_at, p.updated_at, p.completed_at, p.started_at,
    (NOT p.keep)::boolean AS payloads_omitted
FROM (
    SELECT s.*,
        coalesce(sum(coalesce(octet_length(s.result::text), 0) + coalesce(octet_length(s.error_message), 0))
            OVER (ORDER BY s.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < @payload_budget::bigint AS keep
    FROM workflow_step s
    WHERE s.workflow_name = @workflow_name AND s.instance_id = @instance_id
        AND s.run_number = @run_number AND s.id > @after_id
        AND (coalesce(cardinality(sqlc.narg('statuses')::text[]), 0) = 0
            OR s.status = ANY(sqlc.narg('statuses')::text[]))
    ORDER BY s.id
    LIMIT @max::integer
) p
ORDER BY p.id;

-- name: StepListCurrentRun :many
-- StepListCurrentRun lists the steps of the instance's current run in id
-- (creation) order.
SELECT s.*
FROM workflow_instance i
JOIN workflow_step s
    ON s.workflow_name = i.workflow_name AND s.instance_id = i.instance_id
    AND s.run_number = i.run_number
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
ORDER BY s.id;

-- name: StepAttemptsRecord :exec
-- StepAttemptsRecord keeps the failed attempts of a checkpoint (a retry or a
-- step's final error) as rows of their own. It fences like CheckpointFence
-- (the instance's run current and not terminal, locked first, then the task
-- held at the version) so that it can go first in the checkpoint's pipeline,
-- before a statement that deletes the task. A repetition of the same
-- checkpoint writes nothing more. Only a checkpoint with a failed attempt
-- runs it.
WITH inst AS (
    SELECT i.workflow_name, i.instance_id, i.run_attempt
    FROM workflow_instance i
    WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
        AND i.run_number = @run_number
        AND i.status NOT IN ('complete', 'errored', 'terminated')
    FOR NO KEY UPDATE
),
held AS (
    SELECT inst.run_attempt
    FROM inst
    JOIN workflow_task t ON t.id = @task_id
    WHERE t.version = @version AND t.status = 'processing'
    FOR UPDATE OF t
)
INSERT INTO workflow_step_attempt (
    workflow_name, instance_id, run_number, run_attempt, step_key, attempt,
    started_at, ended_at, error_name, error_message
)
SELECT @workflow_name::text, @instance_id::text, @run_number::int, h.run_attempt, a.step_key, a.attempt,
    NULLIF(a.started_at, '0001-01-01 00:00:00+00'::timestamptz),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    NULLIF(a.error_name, ''), NULLIF(a.error_message, '')
FROM held h, (
    SELECT unnest(@step_keys::text[]) AS step_key,
        unnest(@attempts::int[]) AS attempt,
        unnest(@started_at::timestamptz[]) AS started_at,
        unnest(@error_names::text[]) AS error_name,
        unnest(@error_messages::text[]) AS error_message
) AS a
ON CONFLICT (workflow_name, instance_id, run_number, run_attempt, step_key, attempt) DO NOTHING;

-- name: StepAttemptList :many
-- StepAttemptList lists the failed attempts of one run's steps, oldest
-- first; an empty step_keys lists every step's.
SELECT * FROM workflow_step_attempt
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number
    AND (cardinality(@step_keys::text[]) = 0 OR step_key = ANY(@step_keys::text[]))
ORDER BY id;
