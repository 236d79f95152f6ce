-- A checkpoint only: update the instance and insert the step in one
-- transaction, no queue work.
\set iid random(1, 1000)
BEGIN;
UPDATE ceiling_instance SET updated_at = now()
WHERE workflow_name = 'ceiling' AND instance_id = :iid::text;
INSERT INTO ceiling_step (workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at)
VALUES ('ceiling', :iid::text, 1, 's' || nextval('ceiling_step_key'), 'do', 'complete',
    1, 6, :result::json, now(), now(), now());
END;
