-- Ten step rows in one multi-row INSERT, one commit: what group commit and
-- batching can reach. Like the other shapes it runs in a write transaction
-- of its own (BEGIN IMMEDIATE … COMMIT), so one commit per ten steps.
-- Parameters: :iid, :now, :key, :result (see step_tx.sql).
INSERT INTO ceiling_step (workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, result, created_at, updated_at, completed_at)
VALUES
    ('ceiling', :iid, 1, :key || '-1', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-2', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-3', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-4', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-5', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-6', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-7', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-8', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-9', 'do', 'complete', 1, 6, :result, :now, :now, :now),
    ('ceiling', :iid, 1, :key || '-10', 'do', 'complete', 1, 6, :result, :now, :now, :now);
