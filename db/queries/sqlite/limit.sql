-- name: LimitDefine :exec
-- LimitDefine writes the limits of a scope a definition sets, creating its
-- row when missing.
INSERT INTO workflow_limit (scope, max_running, rate_limit, rate_period_ms, updated_at)
VALUES (@scope, sqlc.narg('max_running'), sqlc.narg('rate_limit'), sqlc.narg('rate_period_ms'), @now)
ON CONFLICT (scope) DO UPDATE
SET max_running = excluded.max_running,
    rate_limit = excluded.rate_limit,
    rate_period_ms = excluded.rate_period_ms,
    updated_at = excluded.updated_at
WHERE workflow_limit.max_running IS NOT excluded.max_running
    OR workflow_limit.rate_limit IS NOT excluded.rate_limit
    OR workflow_limit.rate_period_ms IS NOT excluded.rate_period_ms;

-- name: LimitEnsure :exec
-- LimitEnsure creates the row of a scope whose limits are set elsewhere (a
-- queue's) when missing, without limits.
INSERT INTO workflow_limit (scope, updated_at) VALUES (@scope, @now)
ON CONFLICT (scope) DO NOTHING;

-- name: LimitLock :many
-- LimitLock reads the rows of the scopes (a JSON array) in scope order;
-- the write transaction holds the database's one write lock.
SELECT * FROM workflow_limit
WHERE scope IN (SELECT value FROM json_each(@scopes))
ORDER BY scope;

-- name: LimitUpdate :exec
UPDATE workflow_limit SET running = @running, rate_window = sqlc.narg('rate_window'), rate_count = @rate_count
WHERE scope = @scope;

-- name: LimitMemberList :many
SELECT * FROM workflow_limit_member
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
ORDER BY scope;

-- name: LimitMemberWrite :exec
INSERT INTO workflow_limit_member (
    workflow_name, instance_id, scope, state, blocked, rate_until, waiting_since, priority
)
SELECT @workflow_name, @instance_id, @scope, @state, @blocked, sqlc.narg('rate_until'), @now, i.priority
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
ON CONFLICT (workflow_name, instance_id, scope) DO UPDATE
SET state = excluded.state,
    blocked = excluded.blocked,
    rate_until = excluded.rate_until,
    waiting_since = CASE WHEN excluded.state = 'waiting' AND workflow_limit_member.state <> 'waiting'
        THEN excluded.waiting_since ELSE workflow_limit_member.waiting_since END;

-- name: LimitWaiting :many
-- LimitWaiting returns the first waiting members of one scope, highest
-- priority then oldest first, through the waiting index.
SELECT workflow_name, instance_id, priority, waiting_since, id FROM workflow_limit_member
WHERE scope = @scope AND state = 'waiting' AND blocked = 1
ORDER BY priority DESC, waiting_since, id
LIMIT @max;

-- name: LimitTaskAdmit :exec
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
    queue, instance_priority
)
SELECT i.workflow_name, i.instance_id, i.run_number, 'run', 1, @run_at, 'pending', 0,
    i.queue, i.priority
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
ON CONFLICT (workflow_name, instance_id) DO UPDATE
SET run_at = excluded.run_at;

-- name: LimitTaskDelete :exec
DELETE FROM workflow_task WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: LimitSetLimited :exec
UPDATE workflow_instance SET limited = 1
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: QueueLimitSet :one
INSERT INTO workflow_limit (scope, max_running, rate_limit, rate_period_ms, updated_at)
VALUES (@scope, sqlc.narg('max_running'), sqlc.narg('rate_limit'), sqlc.narg('rate_period_ms'), @now)
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
WHERE scope >= @prefix AND scope < @prefix_end
ORDER BY scope;

-- name: LimitWaitingFor :many
-- LimitWaitingFor returns the members that hold one instance back: the
-- blocked scope of a waiting member, or a rate limit's start still ahead.
SELECT m.scope, m.state, m.rate_until, l.max_running, l.rate_limit, l.rate_period_ms
FROM workflow_limit_member m
JOIN workflow_limit l ON l.scope = m.scope
WHERE m.workflow_name = @workflow_name AND m.instance_id = @instance_id
    AND ((m.state = 'waiting' AND m.blocked = 1) OR (m.state = 'holding' AND m.rate_until IS NOT NULL));

-- name: LimitInstanceStart :one
-- LimitInstanceStart starts an admitted instance for an eager start of a
-- release: only a queued instance whose run never started, on one of the
-- queues in the JSON array queues ('[]' is every queue); no row otherwise.
UPDATE workflow_instance
SET status = 'running', started_at = @now, updated_at = @now
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND status = 'queued' AND started_at IS NULL
    AND (CAST(@queues AS TEXT) = '[]' OR queue IN (SELECT value FROM json_each(CAST(@queues AS TEXT))))
RETURNING *;

-- name: LimitTaskInsertLeased :one
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, lock_owner, locked_until, version, attempts,
    queue, instance_priority
)
SELECT i.workflow_name, i.instance_id, @run_number, 'run', 1, @now, 'processing', @lock_owner, @locked_until, 1, 1,
    i.queue, i.priority
FROM workflow_instance i
WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
RETURNING *;
