-- name: ClockNow :one
-- ClockNow reads the database clock in microseconds since the Unix epoch
-- (SQLite keeps it to the millisecond).
SELECT CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000 AS now;

-- name: TaskInsert :exec
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
    queue, instance_priority
) VALUES (
    @workflow_name, @instance_id, 1, 'run', 1, @now, 'pending', 0,
    CAST(@queue AS TEXT), CAST(@instance_priority AS INTEGER)
);

-- name: TaskClaim :many
-- TaskClaim leases due tasks of the workflows named in the JSON array
-- workflow_names and the queues named in the JSON array queues: higher
-- instance priority first (instance_priority, the instance's Create
-- priority), then, among equal priorities, resuming work before new runs
-- (priority, the kind's, 0 or 1), then oldest run_at, then id. It runs
-- inside the claim's write transaction, which excludes every other writer,
-- so there is nothing to skip: no other claim can see these rows until it
-- commits. The search starts from the tasks (the instance table keeps every
-- instance forever), through the two partial indexes, each branch an
-- ordered walk of its index that stops after max rows that qualify: due
-- pending tasks in claim order, expired leases oldest expiry first. Only
-- the few rows of the two branches are sorted. A claim that takes over an
-- expired lease (a processing task) counts a lease loss; a checkpoint that
-- makes progress resets it.
-- With exclude_suspects it claims no suspect (db.SuspectLeaseLosses, 2,
-- lease losses or more; the runner runs one already): neither a pending task
-- with 2 losses nor an expired lease with 1, which its claim makes 2.
UPDATE workflow_task
SET status = 'processing',
    lock_owner = CAST(@lock_owner AS TEXT),
    locked_until = CAST(@locked_until AS INTEGER),
    version = version + 1,
    attempts = attempts + 1,
    lease_losses = lease_losses + (status = 'processing')
WHERE id IN (
    SELECT due.id FROM (
        SELECT * FROM (
            SELECT t.id, t.instance_priority, t.priority, t.run_at
            FROM workflow_task t INDEXED BY workflow_task_pending_idx
            WHERE t.status = 'pending' AND t.run_at <= @now
                AND t.workflow_name IN (SELECT value FROM json_each(CAST(@workflow_names AS TEXT)))
                AND (CAST(@queues AS TEXT) = '[]' OR t.queue IN (SELECT value FROM json_each(CAST(@queues AS TEXT))))
                -- 2 is db.SuspectLeaseLosses: from there a task is a suspect.
                AND (t.lease_losses < 2 OR NOT CAST(@exclude_suspects AS INTEGER))
                AND EXISTS (
                    SELECT 1 FROM workflow_instance i
                    WHERE i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
                        AND i.status NOT IN ('paused', 'complete', 'errored', 'terminated')
                )
            ORDER BY t.instance_priority DESC, t.priority, t.run_at, t.id
            LIMIT @max
        )
        UNION ALL
        SELECT * FROM (
            SELECT t.id, t.instance_priority, t.priority, t.run_at
            FROM workflow_task t INDEXED BY workflow_task_processing_idx
            WHERE t.status = 'processing' AND t.locked_until <= @now
                AND t.workflow_name IN (SELECT value FROM json_each(CAST(@workflow_names AS TEXT)))
                AND (CAST(@queues AS TEXT) = '[]' OR t.queue IN (SELECT value FROM json_each(CAST(@queues AS TEXT))))
                -- The claim counts a loss: 1 + 1 reaches db.SuspectLeaseLosses.
                AND (t.lease_losses < 1 OR NOT CAST(@exclude_suspects AS INTEGER))
                AND EXISTS (
                    SELECT 1 FROM workflow_instance i
                    WHERE i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
                        AND i.status NOT IN ('paused', 'complete', 'errored', 'terminated')
                )
            ORDER BY t.locked_until
            LIMIT @max
        )
    ) AS due
    ORDER BY due.instance_priority DESC, due.priority, due.run_at, due.id
    LIMIT @max
)
RETURNING *;

-- name: TaskHeartbeat :execrows
-- running_steps is what history shows as running (NULL when none): the
-- heartbeat the runner sends anyway carries it, no statement more.
UPDATE workflow_task
SET locked_until = CAST(@locked_until AS INTEGER),
    running_steps = sqlc.narg('running_steps')
WHERE id = @id AND version = @version AND status = 'processing';

-- name: TaskRelease :execrows
UPDATE workflow_task
SET status = 'pending',
    run_at = @run_at,
    lock_owner = NULL,
    locked_until = NULL,
    last_error = sqlc.narg('last_error'),
    lease_losses = lease_losses + CAST(@count_lease_loss AS INTEGER)
WHERE id = @id AND version = @version AND status = 'processing';

-- name: TaskGet :one
SELECT * FROM workflow_task
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: TaskNextRunAt :one
-- TaskNextRunAt starts from the tasks, like TaskClaim.
SELECT CAST(CASE WHEN t.status = 'pending' THEN t.run_at ELSE t.locked_until END AS INTEGER) AS next_at
FROM workflow_task t
WHERE t.workflow_name IN (SELECT value FROM json_each(CAST(@workflow_names AS TEXT)))
    AND (CAST(@queues AS TEXT) = '[]' OR t.queue IN (SELECT value FROM json_each(CAST(@queues AS TEXT))))
    AND EXISTS (
        SELECT 1 FROM workflow_instance i
        WHERE i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
            AND i.status NOT IN ('paused', 'complete', 'errored', 'terminated')
    )
ORDER BY 1
LIMIT 1;

-- name: TaskSchedule :exec
-- TaskSchedule gives a held task back to the queue after a suspend or park,
-- due at run_at. A suspend or park is progress: the task's lease losses are
-- reset.
UPDATE workflow_task
SET status = 'pending',
    run_at = @run_at,
    kind = @kind,
    priority = @priority,
    lock_owner = NULL,
    locked_until = NULL,
    lease_losses = 0
WHERE id = @id;

-- name: TaskDelete :exec
DELETE FROM workflow_task
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: TaskUpsertDue :exec
-- TaskUpsertDue makes an instance's task pending and due now with a new
-- version, so that whoever still holds an older version is fenced out.
INSERT INTO workflow_task (
    workflow_name, instance_id, run_number, kind, priority, run_at, status, version, attempts,
    queue, instance_priority
) VALUES (
    @workflow_name, @instance_id, @run_number, @kind, @priority, @now, 'pending', 1, 0,
    CAST(@queue AS TEXT), CAST(@instance_priority AS INTEGER)
)
ON CONFLICT (workflow_name, instance_id) DO UPDATE
SET run_number = excluded.run_number,
    kind = excluded.kind,
    priority = excluded.priority,
    run_at = excluded.run_at,
    status = 'pending',
    lock_owner = NULL,
    locked_until = NULL,
    version = workflow_task.version + 1;

-- name: TaskResetAttempts :exec
-- TaskResetAttempts clears the attempts and last error of an instance's task
-- for a new run. (It is a statement of its own because sqlc does not bind
-- parameters in the DO UPDATE clause of an SQLite upsert.)
UPDATE workflow_task
SET attempts = 0,
    last_error = NULL,
    lease_losses = 0
WHERE workflow_name = @workflow_name AND instance_id = @instance_id;

-- name: TaskWakeForEvent :execrows
-- TaskWakeForEvent makes a pending task due now (never later than it was)
-- as kind when its run waits for an event of the type.
UPDATE workflow_task
SET run_at = min(run_at, CAST(@now AS INTEGER)),
    kind = CAST(@kind AS TEXT),
    priority = CAST(@priority AS INTEGER)
WHERE workflow_task.workflow_name = @workflow_name AND workflow_task.instance_id = @instance_id
    AND workflow_task.status = 'pending'
    AND EXISTS (
        SELECT 1 FROM workflow_step s
        WHERE s.workflow_name = workflow_task.workflow_name AND s.instance_id = workflow_task.instance_id
            AND s.run_number = @run_number
            AND s.type IN ('waitForEvent', 'invoke') AND s.status = 'waiting'
            AND s.wait_event_type = CAST(@type AS TEXT)
    );

-- name: TaskLeaseWoken :one
-- TaskLeaseWoken leases an instance's pending task to the owner as a claim
-- does: the eager resume of a run an event just woke, in the send's
-- transaction. Only a task on one of the owner's queues (the JSON array
-- queues) is leased; no row means none was.
UPDATE workflow_task
SET status = 'processing',
    lock_owner = CAST(@lock_owner AS TEXT),
    locked_until = CAST(@locked_until AS INTEGER),
    version = version + 1,
    attempts = attempts + 1
WHERE workflow_name = @workflow_name AND instance_id = @instance_id
    AND status = 'pending'
    AND (CAST(@queues AS TEXT) = '[]' OR queue IN (SELECT value FROM json_each(CAST(@queues AS TEXT))))
RETURNING *;

-- name: TaskResetLeaseLosses :exec
-- TaskResetLeaseLosses sets the lease losses of a held task back to zero:
-- the first checkpoint after a claim that took over an expired lease.
UPDATE workflow_task
SET lease_losses = 0
WHERE id = @id AND version = @version AND status = 'processing';
