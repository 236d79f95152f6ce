-- +goose Up
-- Concurrency and rate limits: the tables of the Postgres migration
-- 00011_limits.sql, as STRICT tables (times in microseconds).
ALTER TABLE workflow_instance ADD COLUMN limited INTEGER NOT NULL DEFAULT 0
    CHECK (limited IN (0, 1));

CREATE TABLE workflow_limit (
    scope          TEXT    PRIMARY KEY,
    max_running    INTEGER,
    rate_limit     INTEGER,
    rate_period_ms INTEGER,
    running        INTEGER NOT NULL DEFAULT 0,
    rate_window    INTEGER,
    rate_count     INTEGER NOT NULL DEFAULT 0,
    updated_at     INTEGER NOT NULL,
    CONSTRAINT workflow_limit_max_running_check CHECK (max_running IS NULL OR max_running > 0),
    CONSTRAINT workflow_limit_rate_check CHECK (
        (rate_limit IS NULL AND rate_period_ms IS NULL)
        OR (rate_limit > 0 AND rate_period_ms > 0)),
    CONSTRAINT workflow_limit_running_check CHECK (running >= 0)
) STRICT;

CREATE TABLE workflow_limit_member (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow_name TEXT    NOT NULL,
    instance_id   TEXT    NOT NULL,
    scope         TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    blocked       INTEGER NOT NULL DEFAULT 0,
    -- priority is the instance's (workflow_instance.priority): waiters of a
    -- higher priority are admitted first.
    priority      INTEGER NOT NULL DEFAULT 0,
    rate_until    INTEGER,
    waiting_since INTEGER NOT NULL,
    CONSTRAINT workflow_limit_member_unique UNIQUE (workflow_name, instance_id, scope),
    CONSTRAINT workflow_limit_member_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_limit_member_scope_fkey FOREIGN KEY (scope)
        REFERENCES workflow_limit (scope),
    CONSTRAINT workflow_limit_member_state_check CHECK (state IN ('waiting', 'holding', 'released')),
    CONSTRAINT workflow_limit_member_blocked_check CHECK (blocked IN (0, 1))
) STRICT;

CREATE INDEX workflow_limit_member_waiting_idx
    ON workflow_limit_member (scope, priority DESC, waiting_since, id)
    WHERE state = 'waiting' AND blocked = 1;

-- What holds an instance back (a get or a list of queued limited
-- instances): only the few members that are blocked or rate-delayed.
CREATE INDEX workflow_limit_member_held_idx
    ON workflow_limit_member (workflow_name, instance_id)
    WHERE (state = 'waiting' AND blocked = 1) OR (state = 'holding' AND rate_until IS NOT NULL);

-- +goose Down
DROP TABLE workflow_limit_member;
DROP TABLE workflow_limit;
ALTER TABLE workflow_instance DROP COLUMN limited;
