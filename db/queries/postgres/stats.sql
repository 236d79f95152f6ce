-- name: StatsInstanceCounts :many
-- StatsInstanceCounts counts the instances by workflow and status: an
-- index-only scan of workflow_instance_name_status_updated_idx, whose
-- leading columns are the groups.
SELECT workflow_name, status, count(*) AS count
FROM workflow_instance
GROUP BY workflow_name, status
ORDER BY workflow_name, status;

-- name: StatsGauges :one
-- StatsGauges reads the other gauges in one statement, each part on a
-- partial index: workflow_task_pending_idx (ready), _processing_idx
-- (leased), workflow_hook_outbox_claim_idx (backlog),
-- workflow_schedule_due_idx (oldest due schedule) and
-- workflow_worker_heartbeat_idx (workers not offline). oldest_due_schedule
-- is the Unix epoch when no schedule is due.
SELECT
    (SELECT count(*) FROM workflow_task t
        WHERE t.status = 'pending' AND t.run_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::bigint AS tasks_ready,
    (SELECT count(*) FROM workflow_task t WHERE t.status = 'processing')::bigint AS tasks_leased,
    (SELECT count(*) FROM workflow_hook_outbox o WHERE o.delivered_at IS NULL)::bigint AS outbox_backlog,
    coalesce((SELECT min(s.next_fire_at) FROM workflow_schedule s
        WHERE s.enabled AND s.next_fire_at <= coalesce(sqlc.narg('now')::timestamptz, now())),
        'epoch'::timestamptz)::timestamptz AS oldest_due_schedule,
    (SELECT count(*) FROM workflow_worker w WHERE w.status <> 'offline' AND w.status = 'online')::bigint AS workers_online;

-- name: StatsEnded :many
-- StatsEnded counts the instances that ended (complete, errored,
-- terminated) from @since to @until by workflow, status and bucket of
-- @bucket_ms milliseconds from @since, in @namespace ('' for every one),
-- reading at most @max of them: a terminal instance's updated_at is when
-- it ended, and workflow_instance_updated_idx finds them. No payload is
-- read.
SELECT e.workflow_name, e.status,
    floor(extract(epoch FROM e.updated_at - @since::timestamptz) * 1000 / @bucket_ms::bigint)::integer AS bucket,
    count(*) AS count
FROM (
    SELECT i.workflow_name, i.status, i.updated_at FROM workflow_instance i
    WHERE i.updated_at > '-infinity'::timestamptz
        AND i.updated_at >= @since::timestamptz AND i.updated_at <= @until::timestamptz
        AND i.status IN ('complete', 'errored', 'terminated')
        AND (@namespace::text = '' OR i.namespace = @namespace::text)
    LIMIT @max::integer
) e
GROUP BY e.workflow_name, e.status, bucket
ORDER BY e.workflow_name, e.status, bucket;
