-- name: LimitDefine :exec
-- LimitDefine writes the limits of scopes a definition sets (a workflow's,
-- a concurrency key's), creating their rows when missing; a row whose
-- limits are already these is left alone.
INSERT INTO workflow_limit AS l (scope, max_running, rate_limit, rate_period_ms, updated_at)
SELECT s.scope, nullif(s.max_running, 0), nullif(s.rate_limit, 0), nullif(s.rate_period_ms, 0),
    coalesce(sqlc.narg('now')::timestamptz, now())
FROM (SELECT unnest(@scopes::text[]) AS scope, unnest(@max_running::int[]) AS max_running, unnest(@rate_limit::int[]) AS rate_limit, unnest(@rate_period_ms::bigint[]) AS rate_period_ms) AS s
ON CONFLICT (scope) DO UPDATE
SET max_running = excluded.max_running,
    rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms,
    updated_at = excluded.updated_at
WHERE l.max_running IS DISTINCT FROM excluded.max_running
    OR l.rate_limit IS DISTINCT FROM excluded.rate_limit
    OR l.rate_period_ms IS DISTINCT FROM excluded.rate_period_ms;

-- name: LimitEnsure :exec
-- LimitEnsure creates the rows of scopes whose limits are set elsewhere (a
-- queue's, with QueueLimitSet) when missing, without limits.
INSERT INTO workflow_limit (scope, updated_at)
SELECT s.scope, coalesce(sqlc.narg('now')::timestamptz, now())
FROM (SELECT unnest(@scopes::text[]) AS scope) AS s
ON CONFLICT (scope) DO NOTHING;

-- name: LimitLock :many
-- LimitLock locks the rows of the scopes in scope order (the lock is taken
-- as each sorted row is returned), the one order every admission and
-- release uses.
SELECT * FROM workflow_limit
WHERE scope = ANY(@scopes::text[])
ORDER BY scope
FOR UPDATE;

-- name: LimitUpdate :exec
UPDATE workflow_limit AS l
SET running = u.running, rate_window = nullif(u.rate_window, '0001-01-01 00:00:00Z'::timestamptz),
    rate_count = u.rate_count
FROM (SELECT unnest(@scopes::text[]) AS scope, unnest(@running::int[]) AS running, unnest(@rate_window::timestamptz[]) AS rate_window, unnest(@rate_count::int[]) AS rate_count) AS u
WHERE l.scope = u.scope;

-- name: LimitMemberList :many
-- LimitMemberList returns the members of the instances, each instance's
-- found through the unique index (a lateral lookup per instance).
SELECT m.* FROM (SELECT unnest(@workflow_names::text[]) AS workflow_name, unnest(@instance_ids::text[]) AS instance_id) AS r
CROSS JOIN LATERAL (
    SELECT * FROM workflow_limit_member x
    WHERE x.workflow_name = r.workflow_name AND x.instance_id = r.instance_id
) AS m
ORDER BY m.workflow_name, m.instance_id, m.scope;

-- name: LimitMemberWrite :exec
INSERT INTO workflow_limit_member AS m (
    workflow_name, instance_id, scope, state, blocked, rate_until, waiting_since, priority
)
SELECT @workflow_name, @instance_id, w.scope, w.state, w.blocked, nullif(w.rate_until, '0001-01-01 00:00:00Z'::timestamptz),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    (SELECT i.priority FROM workflow_instance i WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id)
FROM (SELECT unnest(@scopes::text[]) AS scope, unnest(@states::text[]) AS state, unnest(@blocked::boolean[]) AS blocked, unnest(@rate_until::timestamptz[]) AS rate_until) AS w
ON CONFLICT (workflow_name, instance_id, scope) DO UPDATE
SET state = excluded.state,
    blocked = excluded.blocked,
    rate_until = excluded.rate_until,
    waiting_since = CASE WHEN excluded.state = 'waiting' AND m.state <> 'waiting'
        THEN excluded.waiting_since ELSE m.waiting_since END;

-- name: LimitWaiting :many
-- LimitWaiting returns the first instances waiting for a slot of each
-- scope (blocked by it; up to max each), highest priority then oldest
-- first, through the waiting index.
SELECT w.workflow_name, w.instance_id, w.waiting_since, w.id
FROM (SELECT unnest(@scopes::text[]) AS scope) AS s
CROSS JOIN LATERAL (
    SELECT m.workflow_name, m.instance_id, m.waiting_since, m.id, m.priority
    FROM workflow_limit_member m
    WHERE m.scope = s.scope AND m.state = 'waiting' AND m.blocked
    ORDER BY m.priority DESC, m.waiting_since, m.id
    LIMIT @max
) AS w
ORDER BY w.priority DESC, w.waiting_since, w.id;

-- name: LimitLockWaiters :many
-- LimitLockWaiters locks the instances of waiting members that no other
-- transaction holds, so a release never waits on an instance lock while it
-- holds limit rows.
SELECT i.workflow_name, i.instance_id, i.run_number FROM workflow_instance i
WHERE (i.workflow_name, i.instance_id) IN (
    SELECT unnest(@workflow_names::text[]), unnest(@instance_ids::text[]))
FOR UPDATE OF i SKIP LOCKED;

-- name: LimitTaskAdmit :exec
-- LimitTaskAdmit gives an admitted instance its task: pending, due at
-- run_at, as the instance's run (run_number) starts.
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
    queue, instance_priority
)
SELECT i.workflow_name, i.instance_id, i.run_number, 'run', 1, @run_at::timestamptz, 'pending', 0,
    i.queue, i.priority
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
ON CONFLICT (workflow_name, instance_id) DO UPDATE
SET run_at = excluded.run_at;

-- name: LimitTaskDelete :exec
DELETE FROM workflow_task WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: QueueLimitSet :one
INSERT INTO workflow_limit AS l (scope, max_running, rate_limit, rate_period_ms, updated_at)
VALUES (@scope, sqlc.narg('max_running'), sqlc.narg('rate_limit'), sqlc.narg('rate_period_ms'),
    coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (scope) DO UPDATE
SET max_running = excluded.max_running,
    rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms,
    updated_at = excluded.updated_at
RETURNING *;

-- name: LimitGet :one
SELECT * FROM workflow_limit WHERE scope = @scope;

-- name: LimitListPrefix :many
SELECT * FROM workflow_limit
WHERE scope >= @prefix::text AND scope < @prefix_end::text
ORDER BY scope;

-- name: LimitWaitingFor :many
-- LimitWaitingFor returns, for the given instances, the members that hold
-- them back: the blocked scope of a waiting member, or a rate limit's
-- start time still ahead. Each instance's members are found through the
-- unique index (a lateral lookup per instance).
SELECT m.workflow_name, m.instance_id, m.scope, m.state, m.rate_until, l.max_running, l.rate_limit, l.rate_period_ms
FROM (SELECT unnest(@workflow_names::text[]) AS workflow_name, unnest(@instance_ids::text[]) AS instance_id) AS r
CROSS JOIN LATERAL (
    SELECT * FROM workflow_limit_member x
    WHERE x.workflow_name = r.workflow_name AND x.instance_id = r.instance_id
        AND ((x.state = 'waiting' AND x.blocked) OR (x.state = 'holding' AND x.rate_until IS NOT NULL))
) AS m
JOIN workflow_limit l ON l.scope = m.scope;
-- name: LimitLockSkip :many
-- LimitLockSkip locks the rows of the scopes that no other transaction
-- holds, in scope order, and returns those: for the rows a release needs
-- out of scope order, which it must not wait for.
SELECT * FROM workflow_limit
WHERE scope = ANY(@scopes::text[])
ORDER BY scope
FOR UPDATE SKIP LOCKED;

-- name: LimitMemberWriteMany :exec
-- LimitMemberWriteMany upserts the members of several instances of one
-- workflow.
INSERT INTO workflow_limit_member AS m (
    workflow_name, instance_id, scope, state, blocked, rate_until, waiting_since, priority
)
SELECT @workflow_name, w.instance_id, w.scope, w.state, w.blocked, nullif(w.rate_until, '0001-01-01 00:00:00Z'::timestamptz),
    coalesce(sqlc.narg('now')::timestamptz, now()),
    (SELECT i.priority FROM workflow_instance i WHERE i.workflow_name = @workflow_name AND i.instance_id = w.instance_id)
FROM (SELECT unnest(@instance_ids::text[]) AS instance_id, unnest(@scopes::text[]) AS scope, unnest(@states::text[]) AS state,
    unnest(@blocked::boolean[]) AS blocked, unnest(@rate_until::timestamptz[]) AS rate_until) AS w
ON CONFLICT (workflow_name, instance_id, scope) DO UPDATE
SET state = excluded.state,
    blocked = excluded.blocked,
    rate_until = excluded.rate_until,
    waiting_since = CASE WHEN excluded.state = 'waiting' AND m.state <> 'waiting'
        THEN excluded.waiting_since ELSE m.waiting_since END;

-- name: LimitSetLimitedMany :exec
UPDATE workflow_instance SET limited = true
WHERE workflow_name = @workflow_name AND instance_id = ANY(@instance_ids::text[]);

-- name: LimitTaskInsertMany :exec
-- LimitTaskInsertMany gives admitted new instances their first tasks, each
-- due at its run-at.
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
    queue, instance_priority
)
SELECT i.workflow_name, item.instance_id, 1, 'run', 1, item.run_at, 'pending', 0,
    i.queue, i.priority
FROM (SELECT unnest(@instance_ids::text[]) AS instance_id, unnest(@run_ats::timestamptz[]) AS run_at) AS item
JOIN workflow_instance i ON i.workflow_name = @workflow_name AND i.instance_id = item.instance_id;

-- name: LimitTaskAdmitLeased :one
-- LimitTaskAdmitLeased starts an admitted instance at once with its task
-- leased to the runner whose instance's end admitted it (the eager start
-- of a release), as a claim would leave it: the instance running and
-- started, the task processing at version 1 with one attempt. Only a
-- queued instance whose run never started, on one of the runner's queues
-- (an empty queues is every queue), qualifies; no row otherwise.
WITH started AS (
    UPDATE workflow_instance i
    SET status = 'running', started_at = @now::timestamptz, updated_at = @now::timestamptz
    WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
        AND i.status = 'queued' AND i.started_at IS NULL
        AND (cardinality(@queues::text[]) = 0 OR i.queue = ANY(@queues::text[]))
    RETURNING i.*
),
task AS (
    INSERT INTO workflow_task (
        workflow_name, instance_id, run_number, kind, priority, run_at, status, lock_owner, locked_until, version, attempts,
        queue, instance_priority
    )
    SELECT s.workflow_name, s.instance_id, s.run_number, 'run', 1, @now::timestamptz, 'processing',
        @lock_owner::text, @locked_until::timestamptz, 1, 1, s.queue, s.priority
    FROM started s
    RETURNING id
),
-- The run starts here: its instance.started goes in this transaction
-- (lifecycle log on: @log_started).
started_log AS (
    INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, attempt, at)
    SELECT 'instance.started', s.workflow_name, s.instance_id, s.run_number, 0, s.started_at
    FROM started s
    WHERE @log_started::boolean
)
SELECT t.id AS task_id, s.workflow_name, s.instance_id, s.status, s.params, s.output, s.error_name, s.error_message,
    s.pause_requested, s.run_number, s.created_at, s.updated_at, s.started_at, s.completed_at,
    s.retention_until, s.metadata, s.limited, s.namespace, s.queue, s.priority, s.dedupe_key,
    s.deadline_at, s.run_attempt,
    s.parent_workflow_name, s.parent_instance_id, s.parent_run_number, s.parent_step_key, s.parent_policy,
    s.trace_context
FROM started s, task t;
