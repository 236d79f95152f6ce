package sqlite

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// compensationRequest is the result of the step that records a request.
var compensationRequest = `{"compensationRequested":true}`

// InstanceCompensate implements db.Store: it records the request (the step
// db.CompensationMarkerKey) and applies transition.Compensate, in one write
// transaction.
func (s *Store) InstanceCompensate(ctx context.Context, p *db.InstanceCompensateParams) (*db.Instance, error) {
	return s.instanceChangeWith(ctx, &p.InstanceChangeParams, transition.Compensate, "compensating instance",
		func(q *litesqlc.Queries, row *litesqlc.WorkflowInstance) (transition.ChangeFunc, error) {
			_, err := q.CompensationMarker(ctx, litesqlc.CompensationMarkerParams{
				WorkflowName: row.WorkflowName, InstanceID: row.InstanceID, RunNumber: row.RunNumber, StepKey: db.CompensationMarkerKey,
			})
			found := err == nil
			if err != nil && !isNoRows(err) {
				return nil, err
			}
			if _, err := transition.Compensate(dftype.InstanceStatus(row.Status), false); err != nil {
				return nil, err
			}
			if found {
				// Asked before: the request stands as it is.
				return nil, nil
			}
			now, err := txNow(ctx, q, p.Now)
			if err != nil {
				return nil, err
			}
			result := compensationRequest
			err = q.CompensationMark(ctx, litesqlc.CompensationMarkParams{
				WorkflowName: row.WorkflowName, InstanceID: row.InstanceID, RunNumber: row.RunNumber,
				StepKey: db.CompensationMarkerKey, Result: &result, Now: now,
			})
			if err != nil {
				return nil, err
			}
			return transition.Compensate, nil
		})
}

// CompensationTake implements db.Store.
func (s *Store) CompensationTake(ctx context.Context, p *db.CompensationTakeParams) (bool, error) {
	var took bool
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		_, err := q.CheckpointFence(ctx, litesqlc.CheckpointFenceParams{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int64(p.RunNumber),
			TaskID: p.Task.ID, Version: p.Task.Version,
		})
		if isNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		n, err := q.CompensationTake(ctx, litesqlc.CompensationTakeParams{
			Now: now, WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int64(p.RunNumber),
			StepKey: db.CompensationMarkerKey,
		})
		if err != nil || n == 0 {
			return err
		}
		took = true
		return q.CompensationClearPause(ctx, litesqlc.CompensationClearPauseParams{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int64(p.RunNumber),
		})
	})
	if err != nil {
		return false, fmt.Errorf("taking up a compensation request: %w", interpretError(err))
	}
	return took, nil
}
