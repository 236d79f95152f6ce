-- +goose Up
-- The task queue and the hook outbox are small tables whose rows are updated
-- and deleted all the time. With the default settings autovacuum waits for
-- 20% of a table to be dead rows, which on a busy small table means dead
-- tuples pile up between runs and claims slow down; vacuum them after a
-- fixed number of dead rows instead, and without throttling.
ALTER TABLE workflow_task SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE workflow_hook_outbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- +goose Down
ALTER TABLE workflow_task RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay
);
ALTER TABLE workflow_hook_outbox RESET (
    autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold,
    autovacuum_analyze_scale_factor, autovacuum_vacuum_cost_delay
);
