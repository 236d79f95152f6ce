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

-- name: StatsEnded :many
-- StatsEnded counts the instances that ended (complete, errored,
-- terminated) from @since to @until (microseconds) by workflow, status and
-- bucket of @bucket_us microseconds from @since, in @namespace ('' for
-- every one), reading at most @max of them: a terminal instance's
-- updated_at is when it ended, and workflow_instance_updated_idx finds
-- them. No payload is read.
SELECT e.workflow_name, e.status,
    CAST((e.updated_at - CAST(@since AS INTEGER)) / CAST(@bucket_us AS INTEGER) AS INTEGER) AS bucket,
    count(*) AS count
FROM (
    SELECT i.workflow_name, i.status, i.updated_at FROM workflow_instance i
    WHERE i.updated_at >= CAST(@since AS INTEGER) AND i.updated_at <= CAST(@until AS INTEGER)
        AND i.status IN ('complete', 'errored', 'terminated')
        AND (CAST(@namespace AS TEXT) = '' OR i.namespace = CAST(@namespace AS TEXT))
    LIMIT @max
) e
GROUP BY e.workflow_name, e.status, bucket
ORDER BY e.workflow_name, e.status, bucket;
