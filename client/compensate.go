package client

import (
	"context"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// Compensate asks for the compensation of a live instance (a saga's undo,
// see workflow.Compensate): a running instance stops at its next step
// boundary, a queued, waiting or paused one is queued at once, and a runner
// then runs the compensations of its completed steps in the reverse order
// of their completion. The instance ends errored with
// workflow.ErrorNameCompensationRequested (or
// workflow.ErrorNameCompensationFailed when a compensation failed for
// good). Asking again changes nothing; a terminal instance is
// workflow.ErrInstanceTerminal.
func (c *Client) Compensate(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, func(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
		return c.store.InstanceCompensate(ctx, &db.InstanceCompensateParams{InstanceChangeParams: *p})
	}, true)
}
