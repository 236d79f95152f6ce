-- A checkpoint only: update the instance and insert the step in one write
-- transaction, no queue work. Parameters: :iid (a random seeded instance,
-- 1 to 1000), :now, :key, :result (see step_tx.sql).
UPDATE ceiling_instance SET updated_at = :now
WHERE workflow_name = 'ceiling' AND instance_id = :iid;
INSERT INTO ceiling_step (workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at)
VALUES ('ceiling', :iid, 1, :key, 'do', 'complete', 1, 6, :result, :now, :now, :now);
