-- name: StepUpsert :exec
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, timeout_ms, next_retry_at, wake_at, wait_event_type,
    result, error_name, error_message, created_at, updated_at, completed_at, started_at
) VALUES (
    @workflow_name, @instance_id, @run_number, @step_key, @type, @status,
    @attempts, @max_attempts, @timeout_ms, sqlc.narg('next_retry_at'), sqlc.narg('wake_at'),
    sqlc.narg('wait_event_type'), sqlc.narg('result'), sqlc.narg('error_name'), sqlc.narg('error_message'),
    @now, @now,
    CASE @status WHEN 'complete' THEN @now WHEN 'errored' THEN @now END,
    sqlc.narg('started_at')
)
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
    completed_at = excluded.completed_at,
    started_at = excluded.started_at;

-- name: StepCompleteWithEvent :exec
-- StepCompleteWithEvent writes the step that consumed an event: a
-- waitForEvent step, or an invoke step receiving its child's end (step_type
-- is the type of a step without a row yet). An existing row (the wait)
-- keeps its type, attempts, timeout and wake_at.
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    wait_event_type, result, created_at, updated_at, completed_at
) VALUES (
    @workflow_name, @instance_id, @run_number, @step_key, CAST(@step_type AS TEXT), 'complete',
    @wait_event_type, @result, @now, @now, @now
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
-- after_id excluded, of the given statuses (a JSON array, or NULL for
-- every status); a negative max lists every step.
SELECT * FROM workflow_step
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND id > CAST(@after_id AS INTEGER)
    AND (CAST(sqlc.narg('statuses') AS TEXT) IS NULL
        OR status IN (SELECT value FROM json_each(sqlc.narg('statuses'))))
ORDER BY id
LIMIT @max;

-- name: StepListBounded :many
-- StepListBounded is StepList with a byte budget on the payloads (result,
-- error_message) it reads, as InstanceListBounded has: a step past the
-- budget comes without them, payloads_omitted set.
WITH page AS (
    SELECT w.id,
        coalesce(sum(coalesce(octet_length(w.result), 0) + coalesce(octet_length(w.error_message), 0))
            OVER (ORDER BY w.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) < CAST(@payload_budget AS INTEGER) AS keep
    FROM workflow_step w
    WHERE w.workflow_name = @workflow_name AND w.instance_id = @instance_id
        AND w.run_number = @run_number AND w.id > CAST(@after_id AS INTEGER)
        AND (CAST(sqlc.narg('statuses') AS TEXT) IS NULL
            OR w.status IN (SELECT value FROM json_each(sqlc.narg('statuses'))))
    ORDER BY w.id
    LIMIT @max
)
SELECT
    s.id, s.workflow_name, s.instance_id, s.run_number, s.step_key, s.type,
    s.status, s.attempts, s.max_attempts, s.timeout_ms, s.next_retry_at,
    s.wake_at, s.wait_event_type,
    CAST(coalesce(CASE WHEN page.keep THEN s.result END, '') AS TEXT) AS result, s.error_name,
    CAST(coalesce(CASE WHEN page.keep THEN s.error_message END, '') AS TEXT) AS error_message,
    s.created_at, s.updated_at, s.completed_at, s.started_at,
    CAST(NOT page.keep AS INTEGER) AS payloads_omitted
FROM page
JOIN workflow_step s ON s.id = page.id
ORDER BY page.id;

-- name: StepFirstWaitingForEvent :one
-- StepFirstWaitingForEvent returns the key of a run's first step (oldest
-- first) that waits for an event of the type: the step an event of that
-- type is delivered to.
SELECT step_key FROM workflow_step
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number
    AND type IN ('waitForEvent', 'invoke') AND status = 'waiting'
    AND wait_event_type = CAST(@type AS TEXT)
ORDER BY created_at, step_key
LIMIT 1;

-- name: StepAttemptRecord :exec
-- StepAttemptRecord keeps a failed attempt of a step (a retry or its final
-- error) as a row of its own, in the checkpoint that records the failure;
-- a repetition writes nothing more. Only a checkpoint with a failed attempt
-- runs it.
INSERT INTO workflow_step_attempt (
    workflow_name, instance_id, run_number, run_attempt, step_key, attempt,
    started_at, ended_at, error_name, error_message
)
SELECT i.workflow_name, i.instance_id, @run_number, i.run_attempt, @step_key, @attempt,
    sqlc.narg('started_at'), @now, sqlc.narg('error_name'), sqlc.narg('error_message')
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
ON CONFLICT (workflow_name, instance_id, run_number, run_attempt, step_key, attempt) DO NOTHING;

-- name: StepAttemptList :many
-- StepAttemptList lists the failed attempts of one run's steps, oldest first.
SELECT * FROM workflow_step_attempt
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number
ORDER BY id;

-- name: StepDelete :exec
-- StepDelete deletes a step row of a run: a workflow retry runs it again.
DELETE FROM workflow_step
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND step_key = @step_key;
