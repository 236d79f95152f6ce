-- One transaction per step: claim the oldest due task, update the instance,
-- insert the step with its result, give the task back due now. The Go code
-- runs these statements in one write transaction (BEGIN IMMEDIATE on the
-- single write connection, as db/sqlite's store does), so no other writer
-- can see the claimed row and there is nothing to skip (the SQLite store's
-- claim has no SKIP LOCKED either). The RETURNING columns become the
-- parameters of the same name of the later statements (pgbench's \gset).
-- Parameters: :now (microseconds since the Unix epoch), :key (a unique step
-- key), :result (the 254-byte JSON result of a steps10 step).
UPDATE ceiling_task
SET status = 'processing', lock_owner = 'ceiling', locked_until = :now + 30000000,
    version = version + 1, attempts = attempts + 1
WHERE id = (
    SELECT id FROM ceiling_task
    WHERE status = 'pending' AND run_at <= :now
    ORDER BY priority, run_at, id
    LIMIT 1
)
RETURNING id AS tid, instance_id AS iid;
UPDATE ceiling_instance SET status = 'running', updated_at = :now
WHERE workflow_name = 'ceiling' AND instance_id = :iid;
INSERT INTO ceiling_step (workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at)
VALUES ('ceiling', :iid, 1, :key, 'do', 'complete', 1, 6, :result, :now, :now, :now);
UPDATE ceiling_task
SET status = 'pending', run_at = :now, lock_owner = NULL, locked_until = NULL
WHERE id = :tid;
