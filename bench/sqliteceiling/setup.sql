-- Seed of the SQLite ceiling's tables. The tables themselves are copies of
-- the engine's own (columns, STRICT types, defaults, checks, foreign keys and
-- indexes): the Go code reads their CREATE statements from the run's
-- database file and replays them, renamed workflow_* -> ceiling_*, in a
-- sibling file of the same directory. This seeds 1000 running instances,
-- each with a task due now. :now is the clock in microseconds since the Unix
-- epoch, the engine's stored form of a time.
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1000)
INSERT INTO ceiling_instance (workflow_name, instance_id, status, params, created_at, updated_at, started_at)
SELECT 'ceiling', CAST(n AS TEXT), 'running', 'null', :now, :now, :now FROM g;
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1000)
INSERT INTO ceiling_task (workflow_name, instance_id, run_number, kind, priority, run_at, status)
SELECT 'ceiling', CAST(n AS TEXT), 1, 'run', 1, :now, 'pending' FROM g;
