-- Scratch tables for the pgbench ceiling: copies of the engine's own tables
-- (columns, defaults, checks and indexes; storage options are copied by the
-- Go code), in the run's schema, seeded with 1000 running instances, each
-- with a task due now.
DROP TABLE IF EXISTS ceiling_step, ceiling_task, ceiling_instance;
DROP SEQUENCE IF EXISTS ceiling_step_key;
CREATE TABLE ceiling_instance (LIKE workflow_instance INCLUDING ALL);
CREATE TABLE ceiling_step (LIKE workflow_step INCLUDING ALL);
ALTER TABLE ceiling_step ADD FOREIGN KEY (workflow_name, instance_id)
    REFERENCES ceiling_instance (workflow_name, instance_id) ON DELETE CASCADE;
CREATE TABLE ceiling_task (LIKE workflow_task INCLUDING ALL);
ALTER TABLE ceiling_task ADD FOREIGN KEY (workflow_name, instance_id)
    REFERENCES ceiling_instance (workflow_name, instance_id) ON DELETE CASCADE;
CREATE SEQUENCE ceiling_step_key;
INSERT INTO ceiling_instance (workflow_name, instance_id, status, params, created_at, updated_at, started_at)
SELECT 'ceiling', g::text, 'running', 'null', now(), now(), now() FROM generate_series(1, 1000) g;
INSERT INTO ceiling_task (workflow_name, instance_id, run_number, kind, priority, run_at, status)
SELECT 'ceiling', g::text, 1, 'run', 1, now(), 'pending' FROM generate_series(1, 1000) g;
ANALYZE ceiling_instance, ceiling_task;
