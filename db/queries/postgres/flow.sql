-- name: FlowInsert :one
-- FlowInsert stores a version of a flow unless it is stored already, in
-- which case it returns no row (and waits for a concurrent insert of the
-- same version to commit or roll back first).
INSERT INTO workflow_flow (flow_id, version, name, definition, created_at)
VALUES (@flow_id, @version, @name, @definition::json, coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (flow_id, version) DO NOTHING
RETURNING *;

-- name: FlowGet :one
SELECT * FROM workflow_flow WHERE flow_id = @flow_id AND version = @version;

-- name: FlowGetLatest :one
SELECT f.*
FROM workflow_flow_latest l
JOIN workflow_flow f ON f.flow_id = l.flow_id AND f.version = l.version
WHERE l.flow_id = @flow_id;

-- name: FlowLatestLock :one
-- FlowLatestLock makes @version the flow's latest version when the flow has
-- none yet; otherwise it locks the flow's row until the transaction ends
-- and returns its latest version unchanged. Either way the row is locked,
-- so concurrent puts of one flow compare their versions one at a time.
INSERT INTO workflow_flow_latest (flow_id, version, updated_at)
VALUES (@flow_id, @version, coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (flow_id) DO UPDATE SET flow_id = excluded.flow_id
RETURNING version;

-- name: FlowLatestSet :exec
UPDATE workflow_flow_latest
SET version = @version, updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE flow_id = @flow_id;

-- name: FlowList :many
-- FlowList pages through the flows by id, each at its latest version,
-- without definitions.
SELECT f.flow_id, f.version, f.name, f.created_at
FROM workflow_flow_latest l
JOIN workflow_flow f ON f.flow_id = l.flow_id AND f.version = l.version
WHERE l.flow_id > @after_id
ORDER BY l.flow_id
LIMIT @max;

-- name: FlowVersions :many
-- FlowVersions lists the versions of one flow, without definitions, in no
-- particular order: the store sorts them by semantic version.
SELECT flow_id, version, name, created_at FROM workflow_flow WHERE flow_id = @flow_id;
