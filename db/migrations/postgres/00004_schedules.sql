-- +goose Up

-- Cron schedules: each row starts an instance of workflow_name at every time
-- its cron expression names, evaluated in time_zone (an IANA name). The
-- scheduler computes fire times in Go; the database keeps when the schedule is
-- next due (next_fire_at, NULL while disabled) and a version that every
-- firing and every update moves on, so that of several schedulers racing for
-- one due time only the first commit fires it (optimistic fencing, as for
-- tasks). An instance started by a firing is inserted in the same
-- transaction that advances next_fire_at, so a crash can neither fire a time
-- twice nor skip it. JSON is json, kept byte for byte as for instances.
CREATE TABLE workflow_schedule (
    schedule_id      text        PRIMARY KEY,
    workflow_name    text        NOT NULL,
    cron_expr        text        NOT NULL,
    time_zone        text        NOT NULL,
    params           json,
    enabled          boolean     NOT NULL DEFAULT true,
    max_catchup      integer     NOT NULL DEFAULT 1,
    next_fire_at     timestamptz,
    last_fired_at    timestamptz,
    last_instance_id text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    version          bigint      NOT NULL DEFAULT 0,
    CONSTRAINT workflow_schedule_max_catchup_check CHECK (max_catchup >= 1),
    CONSTRAINT workflow_schedule_next_check CHECK (NOT enabled OR next_fire_at IS NOT NULL)
);

-- Finding due schedules: enabled ones whose next fire time has come, the
-- longest due first.
CREATE INDEX workflow_schedule_due_idx
    ON workflow_schedule (next_fire_at, schedule_id)
    WHERE enabled;
-- Listing the schedules of one workflow, by id.
CREATE INDEX workflow_schedule_workflow_idx
    ON workflow_schedule (workflow_name, schedule_id);

-- +goose Down
DROP TABLE workflow_schedule;
