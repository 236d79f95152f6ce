-- name: WorkerUpsert :one
-- WorkerUpsert registers a worker, or registers the same row again (a
-- restart under the same id): online, with fresh times and totals, and no
-- drain request.
INSERT INTO workflow_worker (
    worker_id, hostname, pid, version, labels, queues, workflows, max_concurrency,
    registered_at, last_heartbeat_at, offline_after_us
) VALUES (
    @worker_id, @hostname, @pid, @version, @labels::jsonb, @queues::text[], @workflows::text[],
    @max_concurrency, @now::timestamptz, @now::timestamptz, sqlc.narg('offline_after_us')::bigint
)
ON CONFLICT (worker_id) DO UPDATE
SET hostname = excluded.hostname,
    pid = excluded.pid,
    version = excluded.version,
    labels = excluded.labels,
    queues = excluded.queues,
    workflows = excluded.workflows,
    max_concurrency = excluded.max_concurrency,
    active_count = 0,
    completed_total = 0,
    failed_total = 0,
    registered_at = excluded.registered_at,
    last_heartbeat_at = excluded.last_heartbeat_at,
    offline_after_us = excluded.offline_after_us,
    status = 'online',
    drain_requested_at = NULL,
    deregistered_at = NULL
RETURNING *;

-- name: WorkerHeartbeat :one
-- WorkerHeartbeat records a live worker's heartbeat; no row when the worker
-- is offline or unknown. The heartbeat time never moves back: a late
-- answer to an earlier heartbeat cannot shorten the time the worker counts
-- on before a reaper may mark it offline.
UPDATE workflow_worker
SET last_heartbeat_at = GREATEST(last_heartbeat_at, @now::timestamptz),
    active_count = @active_count,
    completed_total = @completed_total,
    failed_total = @failed_total
WHERE worker_id = @worker_id AND status <> 'offline'
RETURNING *;

-- name: WorkerDeregister :one
UPDATE workflow_worker
SET status = 'offline',
    active_count = 0,
    last_heartbeat_at = @now::timestamptz,
    deregistered_at = @now::timestamptz
WHERE worker_id = @worker_id
RETURNING *;

-- name: WorkerGet :one
SELECT * FROM workflow_worker WHERE worker_id = @worker_id;

-- name: WorkerGetForUpdate :one
SELECT * FROM workflow_worker WHERE worker_id = @worker_id FOR UPDATE;

-- name: WorkerSetDraining :one
UPDATE workflow_worker
SET status = 'draining',
    drain_requested_at = coalesce(drain_requested_at, @now::timestamptz)
WHERE worker_id = @worker_id
RETURNING *;

-- name: WorkerList :many
-- WorkerList pages through the workers by id, of one status and serving
-- one queue when those are given.
SELECT * FROM workflow_worker
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status')::text)
    AND (sqlc.narg('queue')::text IS NULL OR sqlc.narg('queue')::text = ANY(queues))
    AND worker_id > @after_id
ORDER BY worker_id
LIMIT @max;

-- name: WorkerMarkOffline :many
-- WorkerMarkOffline marks offline the workers still online or draining
-- whose last heartbeat is older than their own offline_after_us (the
-- threshold of the reaper for rows without one) at now, on the partial
-- index of the reaper.
UPDATE workflow_worker
SET status = 'offline', active_count = 0
WHERE status <> 'offline'
    AND last_heartbeat_at + make_interval(secs => coalesce(offline_after_us, @reaper_offline_after_us::bigint) / 1000000.0) < @now::timestamptz
RETURNING worker_id;

-- name: TaskReleaseOwned :execrows
-- TaskReleaseOwned gives every task the named owners hold back to the
-- queue, due now, with a new version so that the old holder's fenced
-- writes (heartbeat, checkpoint, release) fail, and a lease loss counted
-- as for an expired lease. It locks the tasks in id order. Without an
-- index on lock_owner it walks the processing tasks
-- (workflow_task_processing_idx); it runs only when a worker was reaped or
-- registered again, never on the claim or checkpoint path.
UPDATE workflow_task
SET status = 'pending',
    run_at = LEAST(run_at, @now::timestamptz),
    lock_owner = NULL,
    locked_until = NULL,
    version = version + 1,
    lease_losses = lease_losses + 1,
    last_error = @reason::text
WHERE id IN (
    SELECT t.id FROM workflow_task t
    WHERE t.status = 'processing' AND t.lock_owner = ANY(@owners::text[])
    ORDER BY t.id
    FOR UPDATE
);

-- name: WorkerLog :exec
-- WorkerLog writes a lifecycle event (docs/events.md) of each named
-- worker, in the transaction of the change of status it records: no
-- workflow or instance, the worker in worker_id.
INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, attempt, detail, at, worker_id)
SELECT @type::text, '', '', 0, 0, NULLIF(@detail::text, ''), @at::timestamptz, w.id
FROM unnest(@worker_ids::text[]) AS w(id);
