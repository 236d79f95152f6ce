-- +goose Up
-- lease_losses counts the leases of a task that expired without a
-- checkpoint since its last checkpoint: a claim that takes over an expired
-- lease adds one, a checkpoint that makes progress sets it back to zero. A
-- runner errors the instance once it reaches the runner's MaxLeaseLosses, so
-- a step that kills its process is not reclaimed forever.
ALTER TABLE workflow_task ADD COLUMN lease_losses INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE workflow_task DROP COLUMN lease_losses;
