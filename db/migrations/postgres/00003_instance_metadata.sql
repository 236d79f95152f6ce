-- +goose Up
-- metadata is what the engine records about an instance besides its params:
-- where it came from (trigger type, source, received time, request id) and,
-- for a flow, the version it is pinned to. It is JSON kept byte for byte.
ALTER TABLE workflow_instance ADD COLUMN metadata json;

-- +goose Down
ALTER TABLE workflow_instance DROP COLUMN metadata;
