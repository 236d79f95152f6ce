-- name: TaskInsert :exec
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
    queue, instance_priority
) VALUES (
    @workflow_name, @instance_id, 1, 'run', 1,
    coalesce(sqlc.narg('now')::timestamptz, now()), 'pending', 0,
    @queue::text, @instance_priority::smallint
);

-- name: TaskInsertMany :exec
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
    queue, instance_priority
)
SELECT @workflow_name, item.instance_id, 1, 'run', 1,
    coalesce(sqlc.narg('now')::timestamptz, now()), 'pending', 0,
    item.queue, item.instance_priority
FROM (
    SELECT unnest(@instance_ids::text[]) AS instance_id,
        unnest(@queues::text[]) AS queue,
        unnest(@instance_priorities::smallint[]) AS instance_priority
) AS item;

-- name: TaskClaim :many
-- TaskClaim leases due tasks in one statement. It never waits on a lock: a
-- task or instance row locked by another transaction is skipped and found by a
-- later claim. Locking the instance together with the task keeps the lock
-- order instance-before-task of every other writer deadlock-free.
--
-- Claim order (the pending index's order): higher instance priority
-- (instance_priority, the instance's Create priority) first; among equal
-- priorities resuming work before new runs (priority, the kind's), then
-- oldest run_at, then id. Only tasks of the runner's queues and workflows
-- are claimed (both filters are checked on the task row during the ordered
-- scan, before its instance is joined).
--
-- Each kind of due task has a branch of its own, so that each is an ordered
-- scan of its partial index that stops after max rows: due pending tasks walk
-- workflow_task_pending_idx in claim order, expired leases walk
-- workflow_task_processing_idx oldest expiry first. A plain index scan marks
-- the index entries of dead rows (claimed, rescheduled or deleted tasks) as
-- dead when it meets them, so later claims skip them; a bitmap scan (which a
-- single OR of both kinds becomes) never does, and with vacuum lagging
-- behind every claim would revisit every dead task. The store runs this
-- statement with bitmap and sequential scans switched off (see
-- planSettings), so the plan does not depend on statistics. At most max
-- of the union are claimed, in claim order; the few rows locked beyond that
-- are released when the statement's transaction ends.
--
-- A claim that takes over an expired lease (a processing task) counts a
-- lease loss (lease_losses + 1); a checkpoint that makes progress resets it.
-- With exclude_suspects it claims no suspect (db.SuspectLeaseLosses, 2,
-- lease losses or more; the runner runs one already): neither a pending task
-- with 2 losses nor an expired lease with 1, which its claim makes 2.
--
-- A claimed run that never started (its instance was queued with no
-- started_at: no step of the run exists) comes back fresh, with the columns
-- of its instance as the claim left it (running), so that the runner need
-- not load it.
WITH pending AS (
    SELECT t.id, t.instance_priority, t.priority, t.run_at,
        (i.status = 'queued' AND i.started_at IS NULL) AS fresh
    FROM workflow_task t
    JOIN workflow_instance i
        ON i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
    WHERE t.status = 'pending'
        AND t.run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND t.workflow_name = ANY(@workflow_names::text[])
        AND (cardinality(@queues::text[]) = 0 OR t.queue = ANY(@queues::text[]))
        AND i.status NOT IN ('paused', 'complete', 'errored', 'terminated')
        -- 2 is db.SuspectLeaseLosses: from there a task is a suspect.
        AND (t.lease_losses < 2 OR NOT @exclude_suspects::boolean)
    ORDER BY t.instance_priority DESC, t.priority, t.run_at, t.id
    LIMIT @max
    FOR UPDATE OF t SKIP LOCKED
    FOR NO KEY UPDATE OF i SKIP LOCKED
),
expired AS (
    SELECT t.id, t.instance_priority, t.priority, t.run_at, false AS fresh
    FROM workflow_task t
    JOIN workflow_instance i
        ON i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
    WHERE t.status = 'processing'
        AND t.locked_until <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND t.workflow_name = ANY(@workflow_names::text[])
        AND (cardinality(@queues::text[]) = 0 OR t.queue = ANY(@queues::text[]))
        AND i.status NOT IN ('paused', 'complete', 'errored', 'terminated')
        -- The claim counts a loss: 1 + 1 reaches db.SuspectLeaseLosses.
        AND (t.lease_losses < 1 OR NOT @exclude_suspects::boolean)
    ORDER BY t.locked_until
    LIMIT @max
    FOR UPDATE OF t SKIP LOCKED
    FOR NO KEY UPDATE OF i SKIP LOCKED
),
due AS (
    SELECT d.id, d.fresh
    FROM (SELECT * FROM pending UNION ALL SELECT * FROM expired) AS d
    ORDER BY d.instance_priority DESC, d.priority, d.run_at, d.id
    LIMIT @max
),
claimed AS (
    UPDATE workflow_task t
    SET status = 'processing',
        lock_owner = @lock_owner::text,
        locked_until = @locked_until::timestamptz,
        version = t.version + 1,
        attempts = t.attempts + 1,
        lease_losses = t.lease_losses + CASE WHEN t.status = 'processing' THEN 1 ELSE 0 END
    FROM due
    WHERE t.id = due.id
    RETURNING t.*, due.fresh
),
started AS (
    UPDATE workflow_instance i
    SET status = 'running',
        started_at = coalesce(i.started_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM claimed c
    WHERE i.workflow_name = c.workflow_name AND i.instance_id = c.instance_id
        AND i.status IN ('queued', 'waiting')
    RETURNING i.*
),
-- A run that never started starts with this claim: its instance.started
-- goes in the claim's transaction (lifecycle log on: @log_started).
started_log AS (
    INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, attempt, at)
    SELECT 'instance.started', s.workflow_name, s.instance_id, s.run_number, 0, s.started_at
    FROM claimed c
    JOIN started s ON s.workflow_name = c.workflow_name AND s.instance_id = c.instance_id
    WHERE @log_started::boolean AND c.fresh
)
SELECT c.id, c.workflow_name, c.instance_id, c.run_number, c.kind, c.priority, c.run_at, c.status,
    c.lock_owner, c.locked_until, c.version, c.attempts, c.last_error, c.lease_losses,
    c.queue, c.instance_priority,
    c.fresh AND s.instance_id IS NOT NULL AS fresh,
    s.params AS instance_params, s.metadata AS instance_metadata,
    s.run_number AS instance_run_number, s.pause_requested AS instance_pause_requested,
    s.created_at AS instance_created_at, s.updated_at AS instance_updated_at,
    s.started_at AS instance_started_at, s.retention_until AS instance_retention_until,
    s.namespace AS instance_namespace, s.dedupe_key AS instance_dedupe_key,
    -- The deadline of a fresh run: the runner cancels the run at it.
    s.deadline_at AS instance_deadline_at,
    s.limited AS instance_limited,
    -- The parent link of a fresh child run (NULL for any other instance):
    -- the runner delivers the child's end to it (db.Instance.Parent).
    s.parent_workflow_name AS instance_parent_workflow_name,
    s.parent_instance_id AS instance_parent_instance_id,
    s.parent_run_number AS instance_parent_run_number,
    s.parent_step_key AS instance_parent_step_key,
    s.parent_policy AS instance_parent_policy,
    -- The creator's trace context (NULL unless a traced create stored one).
    s.trace_context AS instance_trace_context
FROM claimed c
LEFT JOIN started s
    ON c.fresh AND s.workflow_name = c.workflow_name AND s.instance_id = c.instance_id
ORDER BY c.instance_priority DESC, c.priority, c.run_at, c.id;

-- name: TaskHeartbeat :execrows
-- running_steps is what history shows as running (NULL when none): the
-- heartbeat the runner sends anyway carries it, no statement more.
UPDATE workflow_task
SET locked_until = @locked_until::timestamptz,
    running_steps = sqlc.narg('running_steps')::json
WHERE id = @id AND version = @version AND status = 'processing';

-- name: TaskRelease :one
-- TaskRelease gives a held task back to the queue and reports whether it is
-- due now; no row means the caller no longer holds it.
UPDATE workflow_task
SET status = 'pending',
    run_at = @run_at,
    lock_owner = NULL,
    locked_until = NULL,
    last_error = sqlc.narg('last_error'),
    lease_losses = lease_losses + CASE WHEN @count_lease_loss::boolean THEN 1 ELSE 0 END
WHERE id = @id AND version = @version AND status = 'processing'
RETURNING workflow_name,
    (run_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS due;

-- name: TaskGet :one
SELECT * FROM workflow_task
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: TaskLockHeld :one
-- TaskLockHeld is the fence of a checkpoint: it locks the task only when the
-- caller still holds it at this version.
SELECT id FROM workflow_task
WHERE id = @id AND version = @version AND status = 'processing'
FOR UPDATE;

-- name: TaskNextRunAt :one
SELECT CASE WHEN t.status = 'pending' THEN t.run_at ELSE t.locked_until END::timestamptz AS next_at
FROM workflow_task t
JOIN workflow_instance i
    ON i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
WHERE t.workflow_name = ANY(@workflow_names::text[])
    AND (cardinality(@queues::text[]) = 0 OR t.queue = ANY(@queues::text[]))
    AND i.status NOT IN ('paused', 'complete', 'errored', 'terminated')
ORDER BY 1
LIMIT 1;

-- name: TaskResetLeaseLosses :exec
-- TaskResetLeaseLosses sets the lease losses of a held task back to zero:
-- the first checkpoint after a claim that took over an expired lease.
UPDATE workflow_task
SET lease_losses = 0
WHERE id = @id AND version = @version AND status = 'processing';
