-- +goose Up

-- The flow registry: every version of every JSON flow definition, keyed by
-- (flow_id, version). A version is immutable once stored: putting it again
-- with the same definition changes nothing, with another one is refused.
-- definition is TEXT kept byte for byte as it was applied. name is the
-- definition's title, copied out for listings so they need not read
-- definitions. Types map as in 00001_init.sql.
CREATE TABLE workflow_flow (
    flow_id    TEXT    NOT NULL,
    version    TEXT    NOT NULL,
    name       TEXT    NOT NULL DEFAULT '',
    definition TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (flow_id, version),
    CONSTRAINT workflow_flow_definition_check CHECK (json_valid(definition))
) STRICT;

-- The latest version of each flow, one row per flow. Semantic versions
-- ("1.10.0" > "1.9.0", releases before pre-releases) cannot be ordered in
-- SQL, so the store orders them in Go and moves this row on in the
-- transaction that inserts a version. Listing flows at their latest version
-- reads this table in flow_id order and joins workflow_flow by its primary
-- key.
CREATE TABLE workflow_flow_latest (
    flow_id    TEXT    NOT NULL PRIMARY KEY,
    version    TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    CONSTRAINT workflow_flow_latest_version_fkey
        FOREIGN KEY (flow_id, version) REFERENCES workflow_flow (flow_id, version)
) STRICT;

-- +goose Down
DROP TABLE workflow_flow_latest;
DROP TABLE workflow_flow;
