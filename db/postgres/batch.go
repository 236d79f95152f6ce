package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// errBatchItem reports an item CheckpointBatch cannot take.
var errBatchItem = errors.New("checkpoint batch items must be OutcomeContinue without ConsumeEvent")

// CheckpointBatch commits a group of Continue checkpoints of different
// instances in one statement, which fences every item and writes the fenced
// items' step rows together (see CheckpointBatch in batch.sql). It writes
// neither the instance rows (updated_at moves on status transitions only)
// nor the task rows (the runner's heartbeat renews the lease). Items whose
// fence failed report db.ErrLeaseLost and change nothing.
func (s *Store) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	results := make([]db.CheckpointBatchResult, len(ps))
	if len(ps) == 0 {
		return results, nil
	}
	w := pgsqlc.CheckpointBatchParams{
		WorkflowNames: make([]string, len(ps)),
		InstanceIds:   make([]string, len(ps)),
		RunNumbers:    make([]int32, len(ps)),
		TaskIds:       make([]int64, len(ps)),
		Versions:      make([]int64, len(ps)),
	}
	index := make(map[[2]string]int, len(ps))
	for i, p := range ps {
		if p.Outcome != db.OutcomeContinue || p.ConsumeEvent != nil {
			return nil, errBatchItem
		}
		key := [2]string{p.WorkflowName, p.InstanceID}
		if _, dup := index[key]; dup {
			return nil, fmt.Errorf("checkpoint batch: instance %s/%s appears twice", p.WorkflowName, p.InstanceID)
		}
		index[key] = i
		w.WorkflowNames[i], w.InstanceIds[i] = p.WorkflowName, p.InstanceID
		w.RunNumbers[i] = int32(p.RunNumber)
		w.TaskIds[i], w.Versions[i] = p.Task.ID, p.Task.Version
		if p.Now.After(w.Now) {
			w.Now = p.Now
		}
		for _, st := range p.Steps {
			appendStep(&w, p, &st)
		}
		results[i].Err = db.ErrLeaseLost // until its fence is seen to hold
	}
	if w.Now.IsZero() {
		return nil, errors.New("checkpoint batch: Now is required")
	}
	rows, err := s.queries.CheckpointBatch(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	for _, row := range rows {
		if !row.Held {
			continue
		}
		results[index[[2]string{row.WorkflowName, row.InstanceID}]] = db.CheckpointBatchResult{Result: &db.CheckpointResult{
			PauseRequested: row.PauseRequested,
			Status:         db.InstanceStatus(row.Status),
		}}
	}
	return results, nil
}

func appendStep(w *pgsqlc.CheckpointBatchParams, p *db.CheckpointParams, st *db.StepWrite) {
	w.SWorkflowNames = append(w.SWorkflowNames, p.WorkflowName)
	w.SInstanceIds = append(w.SInstanceIds, p.InstanceID)
	w.SRunNumbers = append(w.SRunNumbers, int32(p.RunNumber))
	w.SStepKeys = append(w.SStepKeys, st.Key)
	w.STypes = append(w.STypes, string(st.Type))
	w.SStatuses = append(w.SStatuses, string(st.Status))
	w.SAttempts = append(w.SAttempts, int32(st.Attempts))
	w.SMaxAttempts = append(w.SMaxAttempts, int32(st.MaxAttempts))
	w.STimeoutsMs = append(w.STimeoutsMs, st.Timeout.Milliseconds())
	w.SNextRetryAt = append(w.SNextRetryAt, timeOrZero(st.NextRetryAt))
	w.SWakeAt = append(w.SWakeAt, timeOrZero(st.WakeAt))
	w.SWaitEventTypes = append(w.SWaitEventTypes, st.WaitEventType)
	w.SResults = append(w.SResults, string(st.Result))
	w.SErrorNames = append(w.SErrorNames, st.ErrorName)
	w.SErrorMessages = append(w.SErrorMessages, st.ErrorMessage)
}

// timeOrZero is the batch arrays' encoding of a nullable time: the zero time
// (year 1) stands for NULL.
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
