-- name: FlowInsert :one
INSERT INTO workflow_flow (flow_id, version, name, definition, created_at)
VALUES (@flow_id, @version, @name, @definition, @now)
RETURNING *;

-- name: FlowGet :one
SELECT * FROM workflow_flow WHERE flow_id = @flow_id AND version = @version;

-- name: FlowGetLatest :one
SELECT f.*
FROM workflow_flow_latest l
JOIN workflow_flow f ON f.flow_id = l.flow_id AND f.version = l.version
WHERE l.flow_id = @flow_id;

-- name: FlowLatestGet :one
SELECT version FROM workflow_flow_latest WHERE flow_id = @flow_id;

-- name: FlowLatestUpsert :exec
-- FlowLatestUpsert sets the flow's latest version. The caller decides, in
-- the same write transaction, that @version supersedes the current one.
INSERT INTO workflow_flow_latest (flow_id, version, updated_at)
VALUES (@flow_id, @version, @now)
ON CONFLICT (flow_id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at;

-- name: FlowList :many
-- FlowList pages through the flows by id, each at its latest version,
-- without definitions.
SELECT f.flow_id, f.version, f.name, f.created_at
FROM workflow_flow_latest l
JOIN workflow_flow f ON f.flow_id = l.flow_id AND f.version = l.version
WHERE l.flow_id > CAST(@after_id AS TEXT)
ORDER BY l.flow_id
LIMIT @max;

-- name: FlowVersions :many
-- FlowVersions lists the versions of one flow, without definitions, in no
-- particular order: the store sorts them by semantic version.
SELECT flow_id, version, name, created_at FROM workflow_flow WHERE flow_id = @flow_id;
