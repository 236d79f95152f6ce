-- name: ScheduleInsert :one
-- ScheduleInsert starts the version at a random value, so that a firing
-- fenced by the version of a deleted schedule never matches a new schedule
-- created with the same id.
INSERT INTO workflow_schedule (
    schedule_id, workflow_name, cron_expr, time_zone, params, enabled, max_catchup,
    next_fire_at, created_at, updated_at, version
) VALUES (
    @schedule_id, @workflow_name, @cron_expr, @time_zone, sqlc.narg('params'), @enabled, @max_catchup,
    sqlc.narg('next_fire_at'), @now, @now, random() & 4611686018427387903
)
RETURNING *;

-- name: ScheduleGet :one
SELECT * FROM workflow_schedule WHERE schedule_id = @schedule_id;

-- name: ScheduleList :many
-- ScheduleList pages through the schedules by id.
SELECT * FROM workflow_schedule
WHERE schedule_id > CAST(@after_id AS TEXT)
ORDER BY schedule_id
LIMIT @max;

-- name: ScheduleListWorkflow :many
-- ScheduleListWorkflow is ScheduleList for the schedules of one workflow.
SELECT * FROM workflow_schedule
WHERE workflow_name = @workflow_name AND schedule_id > CAST(@after_id AS TEXT)
ORDER BY schedule_id
LIMIT @max;

-- name: ScheduleUpdate :one
-- ScheduleUpdate rewrites a schedule whose version is still the caller's
-- and moves the version on; it returns no row when the version moved on.
UPDATE workflow_schedule
SET workflow_name = @workflow_name,
    cron_expr = @cron_expr,
    time_zone = @time_zone,
    params = sqlc.narg('params'),
    enabled = @enabled,
    max_catchup = @max_catchup,
    next_fire_at = sqlc.narg('next_fire_at'),
    updated_at = @now,
    version = version + 1
WHERE schedule_id = @schedule_id AND version = @version
RETURNING *;

-- name: ScheduleDelete :execrows
DELETE FROM workflow_schedule WHERE schedule_id = @schedule_id;

-- name: ScheduleListDue :many
-- ScheduleListDue returns enabled schedules whose next fire time has come,
-- the longest due first, on the partial index of enabled schedules.
SELECT * FROM workflow_schedule
WHERE enabled = 1 AND next_fire_at <= CAST(@now AS INTEGER)
ORDER BY next_fire_at, schedule_id
LIMIT @max;

-- name: ScheduleAdvance :one
-- ScheduleAdvance records a firing of an enabled schedule whose version is
-- still the caller's: the next fire time, the last fired time and instance
-- (kept when NULL), and a new version. It returns no row when the version
-- moved on (another scheduler fired it, or it was updated, disabled or
-- deleted).
UPDATE workflow_schedule
SET next_fire_at = CAST(@next_fire_at AS INTEGER),
    last_fired_at = coalesce(sqlc.narg('last_fired_at'), last_fired_at),
    last_instance_id = coalesce(sqlc.narg('last_instance_id'), last_instance_id),
    updated_at = CAST(@now AS INTEGER),
    version = version + 1
WHERE schedule_id = @schedule_id AND version = CAST(@version AS INTEGER) AND enabled = 1
RETURNING *;
