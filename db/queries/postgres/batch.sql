-- name: CheckpointBatch :many
-- CheckpointBatch commits a batch of checkpoints of different instances in
-- one statement (in the implicit transaction of the statement): the group
-- commit. Each item continues its run (outcome 'continue': only its step
-- rows are written) or ends it (outcome the status the run ends in, as
-- transition.Checkpoint decided: its steps are written, its task deleted
-- and the instance ended with its output or error). A NULL now is the
-- database clock. It fences and writes together:
--
--   * locked locks the instances in key order (the lock order of every writer
--     is instance before task, and sorted keys keep concurrent batches from
--     deadlocking), keeping those whose run is current and not terminal.
--     Each instance is a lookup of its own (LATERAL): the plan is a loop of
--     primary-key lookups whatever the statistics say, never a scan of the
--     whole table joined by hash, which a plan made while the table was
--     small would keep doing once it is large;
--   * held then share-locks each locked instance's task and keeps it only
--     when it is still held at the checkpoint's version. The row lock is what
--     makes the check see the task's latest committed version: under READ
--     COMMITTED, locking a row that a transaction committed after the
--     statement's snapshot rechecks the condition on that newer version (a
--     plain join would read the snapshot, older than a claim that committed
--     while the statement waited for the instance lock). FOR SHARE, not FOR
--     KEY SHARE: a key share lock does not conflict with an update that
--     leaves the key alone, so it would not recheck a claim's new version.
--     A continuing item's task is not written: the lease is renewed by the
--     runner's heartbeat, not by step checkpoints;
--   * the step rows are written only for the items in held. A continuing
--     item's instance row is not written either: updated_at moves on status
--     transitions, not on step checkpoints;
--   * ended and finished delete the task and end the instance of each held
--     item whose outcome ends its run;
--   * logged writes the lifecycle events of the held items (docs/events.md;
--     the e_ arrays are empty while the log is off).
--
-- It returns one row per locked instance with its status before the
-- statement, pause request and whether the fence held; an item without a
-- row, or whose fence failed, changed nothing. Nullable columns travel as ''
-- or the zero time (year 1) in the arrays and are stored as NULL.
WITH items AS (
    SELECT unnest(@workflow_names::text[]) AS workflow_name,
        unnest(@instance_ids::text[]) AS instance_id,
        unnest(@run_numbers::int[]) AS run_number,
        unnest(@task_ids::bigint[]) AS task_id,
        unnest(@versions::bigint[]) AS version,
        unnest(@outcomes::text[]) AS outcome,
        unnest(@outputs::text[]) AS output,
        unnest(@error_names::text[]) AS error_name,
        unnest(@error_messages::text[]) AS error_message
),
locked AS (
    SELECT i.workflow_name, i.instance_id, i.status, i.pause_requested,
        u.task_id, u.version, u.outcome, u.output, u.error_name, u.error_message
    FROM (SELECT * FROM items ORDER BY workflow_name, instance_id) AS u
    CROSS JOIN LATERAL (
        SELECT i.workflow_name, i.instance_id, i.status, i.pause_requested
        FROM workflow_instance i
        WHERE i.workflow_name = u.workflow_name AND i.instance_id = u.instance_id
            AND i.run_number = u.run_number
            AND i.status NOT IN ('complete', 'errored', 'terminated')
        FOR NO KEY UPDATE OF i
    ) AS i
),
held AS (
    SELECT l.workflow_name, l.instance_id, l.task_id, l.outcome, l.output,
        l.error_name, l.error_message
    FROM locked l
    CROSS JOIN LATERAL (
        SELECT t.id
        FROM workflow_task t
        WHERE t.id = l.task_id AND t.version = l.version AND t.status = 'processing'
        FOR SHARE OF t
    ) AS t
),
written AS (
    INSERT INTO workflow_step (
        workflow_name, instance_id, run_number, step_key, type, status,
        attempts, max_attempts, timeout_ms, next_retry_at, wake_at, wait_event_type,
        result, error_name, error_message, created_at, updated_at, completed_at,
        started_at
    )
    SELECT s.workflow_name, s.instance_id, s.run_number, s.step_key, s.type, s.status,
        s.attempts, s.max_attempts, s.timeout_ms,
        NULLIF(s.next_retry_at, '0001-01-01 00:00:00+00'::timestamptz),
        NULLIF(s.wake_at, '0001-01-01 00:00:00+00'::timestamptz),
        NULLIF(s.wait_event_type, ''),
        NULLIF(s.result, '')::json,
        NULLIF(s.error_name, ''),
        NULLIF(s.error_message, ''),
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()),
        CASE WHEN s.status IN ('complete', 'errored') THEN coalesce(sqlc.narg('now')::timestamptz, now()) END,
        NULLIF(s.started_at, '0001-01-01 00:00:00+00'::timestamptz)
    FROM (
        SELECT unnest(@s_workflow_names::text[]) AS workflow_name,
            unnest(@s_instance_ids::text[]) AS instance_id,
            unnest(@s_run_numbers::int[]) AS run_number,
            unnest(@s_step_keys::text[]) AS step_key,
            unnest(@s_types::text[]) AS type,
            unnest(@s_statuses::text[]) AS status,
            unnest(@s_attempts::int[]) AS attempts,
            unnest(@s_max_attempts::int[]) AS max_attempts,
            unnest(@s_timeouts_ms::bigint[]) AS timeout_ms,
            unnest(@s_next_retry_at::timestamptz[]) AS next_retry_at,
            unnest(@s_wake_at::timestamptz[]) AS wake_at,
            unnest(@s_wait_event_types::text[]) AS wait_event_type,
            unnest(@s_results::text[]) AS result,
            unnest(@s_error_names::text[]) AS error_name,
            unnest(@s_error_messages::text[]) AS error_message,
            unnest(@s_started_at::timestamptz[]) AS started_at
    ) AS s
    JOIN held h ON h.workflow_name = s.workflow_name AND h.instance_id = s.instance_id
    ON CONFLICT (workflow_name, instance_id, run_number, step_key) DO UPDATE
    SET type = excluded.type,
        status = excluded.status,
        attempts = excluded.attempts,
        max_attempts = excluded.max_attempts,
        timeout_ms = excluded.timeout_ms,
        next_retry_at = excluded.next_retry_at,
        wake_at = excluded.wake_at,
        wait_event_type = excluded.wait_event_type,
        result = excluded.result,
        error_name = excluded.error_name,
        error_message = excluded.error_message,
        updated_at = excluded.updated_at,
        completed_at = excluded.completed_at,
        started_at = excluded.started_at
    RETURNING 1
),
ended AS (
    DELETE FROM workflow_task t
    USING held h
    WHERE h.outcome <> 'continue' AND t.id = h.task_id
    RETURNING t.id
),
finished AS (
    UPDATE workflow_instance i
    SET status = h.outcome,
        output = NULLIF(h.output, '')::json,
        error_name = NULLIF(h.error_name, ''),
        error_message = NULLIF(h.error_message, ''),
        pause_requested = false,
        completed_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM held h
    WHERE h.outcome <> 'continue'
        AND i.workflow_name = h.workflow_name AND i.instance_id = h.instance_id
    RETURNING 1
),
logged AS (
    INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, step_key, attempt, detail, at, started_at)
    SELECT e.type, e.workflow_name, e.instance_id, e.run_number, NULLIF(e.step_key, ''), e.attempt,
        NULLIF(e.detail, ''),
        coalesce(NULLIF(e.at, '0001-01-01 00:00:00+00'::timestamptz), sqlc.narg('now')::timestamptz, now()),
    NULLIF(e.started_at, '0001-01-01 00:00:00+00'::timestamptz)
    FROM (
        SELECT unnest(@e_types::text[]) AS type,
            unnest(@e_workflow_names::text[]) AS workflow_name,
            unnest(@e_instance_ids::text[]) AS instance_id,
            unnest(@e_run_numbers::int[]) AS run_number,
            unnest(@e_step_keys::text[]) AS step_key,
            unnest(@e_attempts::int[]) AS attempt,
            unnest(@e_details::text[]) AS detail,
            unnest(@e_ats::timestamptz[]) AS at,
            unnest(@e_started_ats::timestamptz[]) AS started_at
    ) AS e
    JOIN held h ON h.workflow_name = e.workflow_name AND h.instance_id = e.instance_id
    RETURNING 1
)
SELECT l.workflow_name, l.instance_id, l.status, l.pause_requested,
    EXISTS (
        SELECT 1 FROM held h
        WHERE h.workflow_name = l.workflow_name AND h.instance_id = l.instance_id
    ) AS held
FROM locked l;

-- name: CheckpointFence :one
-- CheckpointFence is the first statement of a pipelined checkpoint: it locks
-- the instance when its run is current and not terminal, then its task when
-- it is still held at the version (instance before task, the order of every
-- writer), and returns the instance's status and pause request. No row means
-- the fence failed. The statements after it in the same transaction are each
-- guarded by the task check again (see the Checkpoint* queries): it can only
-- stay true while the caller holds these locks, and once false it never
-- becomes true again (versions only grow, and a task deleted or replaced
-- never comes back under its id), so a write lands only when the fence held.
WITH inst AS (
    SELECT i.workflow_name, i.instance_id, i.status, i.pause_requested
    FROM workflow_instance i
    WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
        AND i.run_number = @run_number
        AND i.status NOT IN ('complete', 'errored', 'terminated')
    FOR NO KEY UPDATE
)
SELECT inst.status, inst.pause_requested
FROM inst
JOIN workflow_task t ON t.id = @task_id
WHERE t.version = @version AND t.status = 'processing'
FOR UPDATE OF t;

-- name: CheckpointSteps :exec
-- CheckpointSteps writes the step rows of a fenced checkpoint, when its task
-- is still held at the version.
INSERT INTO workflow_step (
    workflow_name, instance_id, run_number, step_key, type, status,
    attempts, max_attempts, timeout_ms, next_retry_at, wake_at, wait_event_type,
    result, error_name, error_message, created_at, updated_at, completed_at, started_at
)
SELECT @workflow_name::text, @instance_id::text, @run_number::int, s.step_key, s.type, s.status,
    s.attempts, s.max_attempts, s.timeout_ms,
    NULLIF(s.next_retry_at, '0001-01-01 00:00:00+00'::timestamptz),
    NULLIF(s.wake_at, '0001-01-01 00:00:00+00'::timestamptz),
    NULLIF(s.wait_event_type, ''),
    NULLIF(s.result, '')::json,
    NULLIF(s.error_name, ''),
    NULLIF(s.error_message, ''),
    coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()),
    CASE WHEN s.status IN ('complete', 'errored') THEN coalesce(sqlc.narg('now')::timestamptz, now()) END,
    NULLIF(s.started_at, '0001-01-01 00:00:00+00'::timestamptz)
FROM (
    SELECT unnest(@step_keys::text[]) AS step_key,
        unnest(@types::text[]) AS type,
        unnest(@statuses::text[]) AS status,
        unnest(@attempts::int[]) AS attempts,
        unnest(@max_attempts::int[]) AS max_attempts,
        unnest(@timeouts_ms::bigint[]) AS timeout_ms,
        unnest(@next_retry_at::timestamptz[]) AS next_retry_at,
        unnest(@wake_at::timestamptz[]) AS wake_at,
        unnest(@wait_event_types::text[]) AS wait_event_type,
        unnest(@results::text[]) AS result,
        unnest(@error_names::text[]) AS error_name,
        unnest(@error_messages::text[]) AS error_message,
        unnest(@started_at::timestamptz[]) AS started_at
) AS s
WHERE EXISTS (
    SELECT 1 FROM workflow_task t
    WHERE t.id = @task_id AND t.version = @version AND t.status = 'processing'
)
ON CONFLICT (workflow_name, instance_id, run_number, step_key) DO UPDATE
SET type = excluded.type,
    status = excluded.status,
    attempts = excluded.attempts,
    max_attempts = excluded.max_attempts,
    timeout_ms = excluded.timeout_ms,
    next_retry_at = excluded.next_retry_at,
    wake_at = excluded.wake_at,
    wait_event_type = excluded.wait_event_type,
    result = excluded.result,
    error_name = excluded.error_name,
    error_message = excluded.error_message,
    updated_at = excluded.updated_at,
    completed_at = excluded.completed_at,
    started_at = excluded.started_at;

-- name: CheckpointPark :one
-- CheckpointPark sets a fenced instance to status (paused, as
-- transition.Checkpoint decided) and gives its task back to the queue as
-- kind, due at run_at, when the task is still held at the version. When
-- the instance's pause request carries a compensation request the runner
-- has not taken up (the run's step marker_key with 0 attempts; read only
-- when a pause was requested), it applies the plan's Requested branch
-- instead: the instance requested_status with its pause request kept, the
-- task due now as requested_kind, a hook entry of requested_reason (none
-- when empty) and a notification. It returns whether it did; no row means
-- the task was not held. requested is MATERIALIZED so that it is read once,
-- not once per reference.
WITH requested AS MATERIALIZED (
    SELECT coalesce((
        SELECT CASE WHEN i.pause_requested THEN EXISTS (
            SELECT 1 FROM workflow_step s
            WHERE s.workflow_name = @workflow_name AND s.instance_id = @instance_id
                AND s.run_number = @run_number AND s.step_key = @marker_key AND s.attempts = 0
        ) ELSE false END
        FROM workflow_instance i
        WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
    ), false)::boolean AS compensate
),
parked AS (
    UPDATE workflow_task t
    SET status = 'pending',
        run_at = CASE WHEN r.compensate THEN coalesce(sqlc.narg('now')::timestamptz, now()) ELSE @run_at::timestamptz END,
        kind = CASE WHEN r.compensate THEN @requested_kind::text ELSE @kind::text END,
        priority = CASE WHEN r.compensate THEN @requested_priority::smallint ELSE @priority::smallint END,
        lock_owner = NULL,
        locked_until = NULL,
        lease_losses = 0
    FROM requested r
    WHERE t.id = @task_id AND t.version = @version AND t.status = 'processing'
    RETURNING t.workflow_name, t.instance_id, t.run_at, r.compensate
),
hook AS (
    INSERT INTO workflow_hook_outbox (
        workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
    )
    SELECT p.workflow_name, p.instance_id, @requested_reason::text, p.run_at,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now())
    FROM parked p
    WHERE p.compensate AND @requested_reason::text <> ''
    RETURNING 1
),
notified AS (
    SELECT pg_notify(@channel::text, @workflow_name::text) FROM parked p WHERE p.compensate
)
UPDATE workflow_instance i
SET status = CASE WHEN p.compensate THEN @requested_status::text ELSE @status::text END,
    pause_requested = p.compensate,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
FROM parked p
WHERE i.workflow_name = p.workflow_name AND i.instance_id = p.instance_id
RETURNING p.compensate, (SELECT count(*) FROM notified)::int AS notified;

-- name: CheckpointSuspend :one
-- CheckpointSuspend applies the plan of a suspend (transition.Checkpoint)
-- to a fenced instance, when its task is still held at the version: the
-- instance's status becomes status, or status_if_pause_requested when a
-- pause was requested, the task pending as kind, due at next_run_at, or now
-- when it is due at once (transition.TaskWrite.Due: next_run_at has come or
-- an undelivered event of one of the types is buffered for the run). It
-- records a hook entry (reason, due when the task is) when record_hook is
-- set, and notifies the channel when the task is due now and no pause was
-- requested (the instance took status). When the pause request carries a
-- compensation request the runner has not taken up (the run's step
-- marker_key with 0 attempts; read only when a pause was requested), it
-- applies the plan's Requested branch instead: the instance
-- requested_status with its pause request kept, the task due now as
-- requested_kind, a hook entry of requested_reason (none when empty) and a
-- notification (requested is MATERIALIZED: read once, not once per
-- reference). It runs after CheckpointFence in the same
-- transaction, so it sees every event sent before the fence took the
-- instance lock, and a later sender finds the task pending and wakes it.
-- No row means the task was not held.
WITH requested AS MATERIALIZED (
    SELECT coalesce((
        SELECT CASE WHEN i.pause_requested THEN EXISTS (
            SELECT 1 FROM workflow_step s
            WHERE s.workflow_name = @workflow_name AND s.instance_id = @instance_id
                AND s.run_number = @run_number AND s.step_key = @marker_key AND s.attempts = 0
        ) ELSE false END
        FROM workflow_instance i
        WHERE i.workflow_name = @workflow_name AND i.instance_id = @instance_id
    ), false)::boolean AS compensate
),
due AS (
    SELECT (r.compensate OR (@next_run_at::timestamptz <= coalesce(sqlc.narg('now')::timestamptz, now()))
        OR EXISTS (
            SELECT 1 FROM workflow_event e
            WHERE e.workflow_name = @workflow_name AND e.instance_id = @instance_id
                AND e.run_number = @run_number AND e.type = ANY(@types::text[])
                AND e.delivered_at IS NULL
        ))::boolean AS due,
        r.compensate
    FROM requested r
),
task AS (
    UPDATE workflow_task t
    SET status = 'pending',
        run_at = CASE WHEN due.due THEN coalesce(sqlc.narg('now')::timestamptz, now()) ELSE @next_run_at::timestamptz END,
        kind = CASE WHEN due.compensate THEN @requested_kind::text ELSE @kind::text END,
        priority = CASE WHEN due.compensate THEN @requested_priority::smallint ELSE @priority::smallint END,
        lock_owner = NULL,
        locked_until = NULL,
        lease_losses = 0
    FROM due
    WHERE t.id = @task_id AND t.version = @version AND t.status = 'processing'
    RETURNING t.workflow_name, t.instance_id, t.run_at, due.due, due.compensate
),
suspended AS (
    UPDATE workflow_instance i
    SET status = CASE
            WHEN t.compensate THEN @requested_status::text
            WHEN i.pause_requested THEN @status_if_pause_requested::text
            ELSE @status::text END,
        pause_requested = t.compensate,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM task t
    WHERE i.workflow_name = t.workflow_name AND i.instance_id = t.instance_id
    RETURNING i.status
),
hook AS (
    INSERT INTO workflow_hook_outbox (
        workflow_name, instance_id, reason, run_at, created_at, next_attempt_at
    )
    SELECT t.workflow_name, t.instance_id,
        CASE WHEN t.compensate THEN @requested_reason::text ELSE @reason::text END, t.run_at,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now())
    FROM task t
    WHERE CASE WHEN t.compensate THEN @requested_reason::text <> '' ELSE @record_hook::boolean END
    RETURNING 1
),
result AS (
    SELECT t.due, t.compensate, s.status FROM task t CROSS JOIN suspended s
)
SELECT r.due, r.compensate, r.status,
    (SELECT count(*) FROM (
        SELECT pg_notify(@channel::text, @workflow_name::text)
        FROM result n
        WHERE n.due AND (n.status = @status::text OR n.compensate)
    ) AS notified)::int AS notified
FROM result r;
