-- Ten step rows in one multi-row INSERT, one commit: what group commit and
-- batching can reach.
\set iid random(1, 1000)
INSERT INTO ceiling_step (workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at)
SELECT 'ceiling', :iid::text, 1, 's' || nextval('ceiling_step_key'), 'do', 'complete',
    1, 6, :result::json, now(), now(), now()
FROM generate_series(1, 10);
