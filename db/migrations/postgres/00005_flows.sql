-- +goose Up

-- The flow registry: every version of every JSON flow definition, keyed by
-- (flow_id, version). A version is immutable once stored: putting it again
-- with the same definition changes nothing, with another one is refused.
-- definition is json, not jsonb, so it is kept byte for byte as it was
-- applied. name is the definition's title, copied out for listings so they
-- need not read definitions.
CREATE TABLE workflow_flow (
    flow_id    text        NOT NULL,
    version    text        NOT NULL,
    name       text        NOT NULL DEFAULT '',
    definition json        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (flow_id, version)
);

-- The latest version of each flow, one row per flow. Semantic versions
-- ("1.10.0" > "1.9.0", releases before pre-releases) cannot be ordered in
-- SQL, so the store orders them in Go and moves this row on in the
-- transaction that inserts a version; the row is also the lock that
-- serializes concurrent puts of one flow. Listing flows at their latest
-- version reads this table in flow_id order and joins workflow_flow by its
-- primary key.
CREATE TABLE workflow_flow_latest (
    flow_id    text        PRIMARY KEY,
    version    text        NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT workflow_flow_latest_version_fkey
        FOREIGN KEY (flow_id, version) REFERENCES workflow_flow (flow_id, version)
);

-- +goose Down
DROP TABLE workflow_flow_latest;
DROP TABLE workflow_flow;
