-- name: StepCompleteWithEvent :exec
-- StepCompleteWithEvent writes the waitForEvent step that consumed an event.
-- An existing row (the wait) keeps its attempts, timeout and wake_at.
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    wait_event_type, result, created_at, updated_at, completed_at
) VALUES (
    @workflow_name, @instance_id, @run_number, @step_key, 'waitForEvent', 'complete',
    @wait_event_type, @result,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
)
ON CONFLICT (workflow_name, instance_id, run_number, step_key) DO UPDATE
SET type = excluded.type,
    status = excluded.status,
    next_retry_at = NULL,
    wait_event_type = excluded.wait_event_type,
    result = excluded.result,
    error_name = NULL,
    error_message = NULL,
    updated_at = excluded.updated_at,
    completed_at = excluded.completed_at;

-- name: StepList :many
-- StepList pages through the steps of one run in id (creation) order,
-- after_id excluded; a NULL max lists every step.
SELECT * FROM workflow_step
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND id > @after_id
ORDER BY id
LIMIT sqlc.narg('max')::integer;

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
