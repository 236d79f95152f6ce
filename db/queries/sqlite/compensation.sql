-- name: CompensationMarker :one
-- CompensationMarker returns the attempts of the run's compensation request
-- step (db.CompensationMarkerKey): 0 until the runner took it up, 1 after.
-- No row means no request.
SELECT attempts FROM workflow_step
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND step_key = @step_key;

-- name: CompensationMark :exec
-- CompensationMark records a compensation request for the run: a complete
-- do step with 0 attempts; an existing request is left as it is.
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at
) VALUES (
    @workflow_name, @instance_id, @run_number, @step_key, 'do', 'complete',
    0, 1, @result,
    @now, @now,
    @now
)
ON CONFLICT (workflow_name, instance_id, run_number, step_key) DO NOTHING;

-- name: CompensationTake :execrows
-- CompensationTake takes up the run's compensation request when it was not
-- taken yet (the caller fenced its task with CheckpointFence in the same
-- transaction): the request step counts one attempt.
UPDATE workflow_step
SET attempts = 1, updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND run_number = @run_number AND step_key = @step_key AND attempts = 0;

-- name: CompensationClearPause :exec
-- CompensationClearPause clears the pause request that carried a
-- compensation request the runner took up.
UPDATE workflow_instance
SET pause_requested = false,
    status = CASE WHEN status = 'waitingForPause' THEN 'running' ELSE status END
WHERE workflow_name = @workflow_name AND instance_id = @instance_id AND run_number = @run_number;
