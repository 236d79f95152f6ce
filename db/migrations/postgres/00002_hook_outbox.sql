-- +goose Up

-- The hook outbox: one row per OnWorkflowEnqueued call to deliver, written in
-- the transaction of the change it reports and delivered after commit, so a
-- hook is never announced for a change that rolled back and never lost for
-- one that committed. Rows are claimed with a lease and a version (the fencing
-- token, as for tasks), retried until delivered, and pruned some time after.
--
-- A claim changes only locked_until, version and attempts, none of which is
-- indexed, so with free room on the page it is a HOT update; that is why
-- locked_until stays out of the claim index and why the table keeps a
-- fillfactor below 100.
CREATE TABLE workflow_hook_outbox (
    id              bigserial   PRIMARY KEY,
    workflow_name   text        NOT NULL,
    instance_id     text        NOT NULL,
    reason          text        NOT NULL,
    run_at          timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    last_error      text,
    next_attempt_at timestamptz NOT NULL,
    locked_until    timestamptz,
    version         bigint      NOT NULL DEFAULT 0,
    delivered_at    timestamptz,
    CONSTRAINT workflow_hook_outbox_reason_check CHECK (reason IN ('create', 'event', 'resume', 'retry', 'wake'))
) WITH (fillfactor = 70);

-- Claiming undelivered entries that are due, longest due first; entries
-- under a live lease are filtered on the way (there are at most as many as
-- deliverers claim at once).
CREATE INDEX workflow_hook_outbox_claim_idx
    ON workflow_hook_outbox (next_attempt_at, id)
    WHERE delivered_at IS NULL;
-- Pruning delivered entries, oldest delivery first.
CREATE INDEX workflow_hook_outbox_delivered_idx
    ON workflow_hook_outbox (delivered_at)
    WHERE delivered_at IS NOT NULL;

-- History pages: the steps of one run in id order.
CREATE INDEX workflow_step_run_id_idx
    ON workflow_step (workflow_name, instance_id, run_number, id);
-- History pages: the events of every run of an instance in id order.
CREATE INDEX workflow_event_instance_id_idx
    ON workflow_event (workflow_name, instance_id, id);

-- +goose Down
DROP INDEX workflow_event_instance_id_idx;
DROP INDEX workflow_step_run_id_idx;
DROP TABLE workflow_hook_outbox;
