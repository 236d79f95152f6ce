-- +goose Up
-- Concurrency and rate limits (docs/limits.md). An instance of a workflow
-- with a limited scope (a queue, a workflow name, a concurrency key) is
-- created with limited set and one workflow_limit_member row per scope; an
-- instance without one pays nothing: no row here, limited false, and no
-- statement of the engine reads these tables for it. Adding a column with a
-- constant default rewrites nothing.
ALTER TABLE workflow_instance ADD COLUMN limited boolean NOT NULL DEFAULT false;

-- One row per limited scope: "queue:<name>", "workflow:<name>" or
-- "key:<workflow>:<key>". running counts the members that hold a slot;
-- rate_window is the start of the latest fixed window of the rate limit
-- (rate_period_ms long, aligned on multiples of it) that starts were given
-- in, and rate_count how many. Every admission and release locks the rows
-- of its scopes in one statement, in scope order, so they never deadlock
-- on each other.
CREATE TABLE workflow_limit (
    scope          text        PRIMARY KEY,
    max_running    integer,
    rate_limit     integer,
    rate_period_ms bigint,
    running        integer     NOT NULL DEFAULT 0,
    rate_window    timestamptz,
    rate_count     integer     NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL,
    CONSTRAINT workflow_limit_max_running_check CHECK (max_running IS NULL OR max_running > 0),
    CONSTRAINT workflow_limit_rate_check CHECK (
        (rate_limit IS NULL AND rate_period_ms IS NULL)
        OR (rate_limit > 0 AND rate_period_ms > 0)),
    CONSTRAINT workflow_limit_running_check CHECK (running >= 0)
);

-- One row per limited instance and scope: waiting (not admitted: the
-- instance is queued without a task), holding (admitted: it holds a slot
-- until it is terminal) or released. blocked marks the scope a waiting
-- instance waits for; rate_until the time a rate limit lets an admitted
-- instance start.
CREATE TABLE workflow_limit_member (
    id            bigserial   PRIMARY KEY,
    workflow_name text        NOT NULL,
    instance_id   text        NOT NULL,
    scope         text        NOT NULL,
    state         text        NOT NULL,
    blocked       boolean     NOT NULL DEFAULT false,
    -- priority is the instance's (workflow_instance.priority): waiters of a
    -- higher priority are admitted first.
    priority      integer     NOT NULL DEFAULT 0,
    rate_until    timestamptz,
    waiting_since timestamptz NOT NULL,
    CONSTRAINT workflow_limit_member_unique UNIQUE (workflow_name, instance_id, scope),
    CONSTRAINT workflow_limit_member_instance_fkey FOREIGN KEY (workflow_name, instance_id)
        REFERENCES workflow_instance (workflow_name, instance_id) ON DELETE CASCADE,
    CONSTRAINT workflow_limit_member_scope_fkey FOREIGN KEY (scope)
        REFERENCES workflow_limit (scope),
    CONSTRAINT workflow_limit_member_state_check CHECK (state IN ('waiting', 'holding', 'released'))
);

-- The instances waiting for a slot of a scope (blocked by it), highest
-- priority then oldest first: admitted in that order when a slot frees.
CREATE INDEX workflow_limit_member_waiting_idx
    ON workflow_limit_member (scope, priority DESC, waiting_since, id)
    WHERE state = 'waiting' AND blocked;

-- What holds an instance back (a get or a list of queued limited
-- instances): only the few members that are blocked or rate-delayed.
CREATE INDEX workflow_limit_member_held_idx
    ON workflow_limit_member (workflow_name, instance_id)
    WHERE (state = 'waiting' AND blocked) OR (state = 'holding' AND rate_until IS NOT NULL);

-- +goose Down
DROP TABLE workflow_limit_member;
DROP TABLE workflow_limit;
ALTER TABLE workflow_instance DROP COLUMN limited;
