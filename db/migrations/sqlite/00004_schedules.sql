-- +goose Up

-- Cron schedules: each row starts an instance of workflow_name at every time
-- its cron expression names, evaluated in time_zone (an IANA name). The
-- scheduler computes fire times in Go; the database keeps when the schedule is
-- next due (next_fire_at, NULL while disabled) and a version that every
-- firing and every update moves on, so that of several schedulers racing for
-- one due time only the first commit fires it (optimistic fencing, as for
-- tasks). An instance started by a firing is inserted in the same
-- transaction that advances next_fire_at, so a crash can neither fire a time
-- twice nor skip it. Types map as in 00001_init.sql.
CREATE TABLE workflow_schedule (
    schedule_id      TEXT    NOT NULL PRIMARY KEY,
    workflow_name    TEXT    NOT NULL,
    cron_expr        TEXT    NOT NULL,
    time_zone        TEXT    NOT NULL,
    params           TEXT,
    enabled          INTEGER NOT NULL DEFAULT 1,
    max_catchup      INTEGER NOT NULL DEFAULT 1,
    next_fire_at     INTEGER,
    last_fired_at    INTEGER,
    last_instance_id TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    version          INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT workflow_schedule_enabled_check CHECK (enabled IN (0, 1)),
    CONSTRAINT workflow_schedule_max_catchup_check CHECK (max_catchup >= 1),
    CONSTRAINT workflow_schedule_next_check CHECK (enabled = 0 OR next_fire_at IS NOT NULL),
    CONSTRAINT workflow_schedule_params_check CHECK (params IS NULL OR json_valid(params))
) STRICT;

-- Finding due schedules: enabled ones whose next fire time has come, the
-- longest due first.
CREATE INDEX workflow_schedule_due_idx
    ON workflow_schedule (next_fire_at, schedule_id)
    WHERE enabled = 1;
-- Listing the schedules of one workflow, by id.
CREATE INDEX workflow_schedule_workflow_idx
    ON workflow_schedule (workflow_name, schedule_id);

-- +goose Down
DROP TABLE workflow_schedule;
