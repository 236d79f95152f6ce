-- One transaction per step: claim the oldest due task (SKIP LOCKED), update
-- the instance, insert the step with its result, give the task back due now.
BEGIN;
WITH due AS (
    SELECT id FROM ceiling_task
    WHERE status = 'pending' AND run_at <= now()
    ORDER BY priority, run_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE ceiling_task t
SET status = 'processing', lock_owner = 'pgbench', locked_until = now() + interval '30 seconds',
    version = t.version + 1, attempts = t.attempts + 1
FROM due WHERE t.id = due.id
RETURNING t.id AS tid, t.instance_id AS iid \gset
UPDATE ceiling_instance SET status = 'running', updated_at = now()
WHERE workflow_name = 'ceiling' AND instance_id = :iid::text;
INSERT INTO ceiling_step (workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at)
VALUES ('ceiling', :iid::text, 1, 's' || nextval('ceiling_step_key'), 'do', 'complete',
    1, 6, :result::json, now(), now(), now());
UPDATE ceiling_task
SET status = 'pending', run_at = now(), lock_owner = NULL, locked_until = NULL
WHERE id = :tid;
END;
