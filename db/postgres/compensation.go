package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// compensationRequest is the result of the step that records a request.
var compensationRequest = []byte(`{"compensationRequested":true}`)

// InstanceCompensate implements db.Store: it records the request (the step
// db.CompensationMarkerKey) and applies transition.Compensate, in the
// transaction that locks the instance.
func (s *Store) InstanceCompensate(ctx context.Context, p *db.InstanceCompensateParams) (*db.Instance, error) {
	return s.instanceChangeWith(ctx, &p.InstanceChangeParams, transition.Compensate, "compensating instance",
		func(q *pgsqlc.Queries, row *pgsqlc.WorkflowInstance) (transition.ChangeFunc, error) {
			marker := pgsqlc.CompensationMarkerParams{
				WorkflowName: row.WorkflowName, InstanceID: row.InstanceID, RunNumber: row.RunNumber, StepKey: db.CompensationMarkerKey,
			}
			_, err := q.CompensationMarker(ctx, marker)
			found := err == nil
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, err
			}
			if _, err := transition.Compensate(dftype.InstanceStatus(row.Status), false); err != nil {
				return nil, err
			}
			if found {
				// Asked before: the request stands as it is.
				return nil, nil
			}
			err = q.CompensationMark(ctx, pgsqlc.CompensationMarkParams{
				WorkflowName: row.WorkflowName, InstanceID: row.InstanceID, RunNumber: row.RunNumber,
				StepKey: db.CompensationMarkerKey, Result: compensationRequest, Now: p.Now,
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
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		n, err := q.CompensationTake(ctx, pgsqlc.CompensationTakeParams{
			Now: p.Now, WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int32(p.RunNumber),
			StepKey: db.CompensationMarkerKey, TaskID: p.Task.ID, Version: p.Task.Version,
		})
		if err != nil || n == 0 {
			return err
		}
		took = true
		return q.CompensationClearPause(ctx, pgsqlc.CompensationClearPauseParams{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: int32(p.RunNumber),
		})
	})
	if err != nil {
		return false, fmt.Errorf("taking up a compensation request: %w", interpretError(err))
	}
	return took, nil
}
