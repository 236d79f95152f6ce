-- name: StatsInstanceCounts :many
-- StatsInstanceCounts counts the instances by workflow and status: a scan
-- of workflow_instance_name_status_updated_idx, whose leading columns are
-- the groups.
SELECT workflow_name, status, count(*) AS count
FROM workflow_instance
GROUP BY workflow_name, status
ORDER BY workflow_name, status;

-- name: StatsGauges :one
-- StatsGauges reads the other gauges in one statement, each part on a
-- partial index: workflow_task_pending_idx (ready), _processing_idx
-- (leased), workflow_hook_outbox_claim_idx (backlog),
-- workflow_schedule_due_idx (oldest due schedule) and
-- workflow_worker_heartbeat_idx (workers not offline). now is in
-- microseconds since the Unix epoch; oldest_due_schedule is 0 when no
-- schedule is due.
SELECT
    CAST((SELECT count(*) FROM workflow_task t
        WHERE t.status = 'pending' AND t.run_at <= @now) AS INTEGER) AS tasks_ready,
    CAST((SELECT count(*) FROM workflow_task t WHERE t.status = 'processing') AS INTEGER) AS tasks_leased,
    CAST((SELECT count(*) FROM workflow_hook_outbox o WHERE o.delivered_at IS NULL) AS INTEGER) AS outbox_backlog,
    CAST(coalesce((SELECT min(s.next_fire_at) FROM workflow_schedule s
        WHERE s.enabled = 1 AND s.next_fire_at <= @now), 0) AS INTEGER) AS oldest_due_schedule,
    CAST((SELECT count(*) FROM workflow_worker w WHERE w.status <> 'offline' AND w.status = 'online') AS INTEGER) AS workers_online;
