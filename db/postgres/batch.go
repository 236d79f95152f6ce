package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// CheckpointBatch commits a group of checkpoints of different instances in
// one statement, which fences every item and writes the fenced items
// together (see CheckpointBatch in batch.sql): the step rows of each, and
// for those that end their run (Complete, Error) the deleted task and the
// ended instance. A continuing item writes neither its instance row
// (updated_at moves on status transitions only) nor its task row (the
// runner's heartbeat renews the lease). Items whose fence failed report
// db.ErrLeaseLost and change nothing. It runs behind planSettings, so its
// plan stays a loop of index lookups as the tables grow. A batch that ends
// limited instances also gives their slots back in its transaction
// (checkpointBatchRelease).
func (s *Store) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	if len(ps) == 0 {
		return []db.CheckpointBatchResult{}, nil
	}
	if slices.ContainsFunc(ps, releases) {
		return s.checkpointBatchRelease(ctx, ps)
	}
	step, results, err := batchStatement(ctx, ps, false, s.logging())
	if err != nil {
		return nil, err
	}
	if err := s.pipeline(ctx, planSettings, nil, step); err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	return results(), nil
}

// releases reports whether p ends a limited instance, whose slots its
// commit gives back.
func releases(p *db.CheckpointParams) bool {
	return p.ReleaseLimits && (p.Outcome == db.OutcomeComplete || p.Outcome == db.OutcomeError)
}

// checkpointBatchRelease is CheckpointBatch of a batch that ends limited
// instances, in one transaction on one connection: the group commit's
// statement first (one round trip, as without limits), then the release of
// the slots of every item whose fence held and that ends a limited
// instance, all items at once (admission.ReleaseMany: a fixed number of
// round trips whatever their number, the writes sent behind the reads and
// the last ones with the COMMIT; its first read, the ending instances'
// members, goes with the batch statement). The batch pays one commit, not one per
// limited item; an item whose fence failed releases nothing.
func (s *Store) checkpointBatchRelease(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	step, read, err := batchStatement(ctx, ps, false, s.logging())
	if err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	defer conn.Release()
	open := true // until COMMIT was sent: roll back on every other way out
	defer func() {
		if open {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	// The members of the limited ending items are read in the same round
	// trip, behind the statement that locked their instances: only
	// transactions that hold an instance's lock write its members.
	tx := &limitTx{q: pgsqlc.New(conn), channel: s.wakeChannel, sender: conn, logStarted: s.logging()}
	var ending []db.InstanceRef
	for _, p := range ps {
		if releases(p) {
			ending = append(ending, db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.InstanceID})
		}
	}
	if err := sendPipeline(ctx, conn, append([]string{"BEGIN"}, planSettings...), nil, step, tx.preload(ctx, ending)); err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	results := read()
	var (
		items []admission.ReleaseItem
		index []int
		now   time.Time // the latest of the items'; none is this process's clock
	)
	for i, p := range ps {
		if results[i].Err != nil || !releases(p) {
			continue
		}
		items = append(items, admission.ReleaseItem{
			Ref:   db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.InstanceID},
			Lease: p.ReleaseLease,
		})
		index = append(index, i)
		if p.Now.After(now) {
			now = p.Now
		}
	}
	if len(items) > 0 {
		rel, err := admission.ReleaseMany(ctx, tx, items, limitNow(nowArg(now)))
		if err != nil {
			return nil, fmt.Errorf("checkpointing a batch: releasing limits: %w", interpretError(err))
		}
		results[index[0]].Result.Admitted = rel.Admitted
		for j, i := range index {
			results[i].Result.Leased = rel.Leased[j]
		}
	}
	if err := tx.flush(ctx, []string{"COMMIT"}); err != nil {
		return nil, fmt.Errorf("checkpointing a batch: %w", interpretError(err))
	}
	open = false
	return results, nil
}

// batchStatement returns the CheckpointBatch statement of ps as a pipeline
// step (to run behind planSettings), and what reads the results once the
// pipeline ran. alone says that ps is one checkpoint committed through
// Checkpoint, which may record failed attempts (the statement that keeps
// them goes before it in the same pipeline: failedAttemptsStep). log binds
// the items' lifecycle events (transition.CheckpointEvents), which the
// statement writes for the items whose fence held.
func batchStatement(ctx context.Context, ps []*db.CheckpointParams, alone, log bool) (pipelineStep, func() []db.CheckpointBatchResult, error) {
	results := make([]db.CheckpointBatchResult, len(ps))
	w := pgsqlc.CheckpointBatchParams{
		WorkflowNames: make([]string, len(ps)),
		InstanceIds:   make([]string, len(ps)),
		RunNumbers:    make([]int32, len(ps)),
		TaskIds:       make([]int64, len(ps)),
		Versions:      make([]int64, len(ps)),
		Outcomes:      make([]string, len(ps)),
		Outputs:       make([]string, len(ps)),
		ErrorNames:    make([]string, len(ps)),
		ErrorMessages: make([]string, len(ps)),
	}
	var events lifecycleArrays
	index := make(map[[2]string]int, len(ps))
	var now time.Time // the latest of the items'; none is the database clock
	for i, p := range ps {
		if !p.Batchable() && !(alone && batchableAlone(p)) {
			return nil, nil, db.ErrNotBatchable
		}
		plan, err := transition.Checkpoint(p)
		if err != nil {
			return nil, nil, err
		}
		w.Outcomes[i] = cmp.Or(string(plan.Status), "continue")
		switch plan.Status {
		case dftype.StatusComplete:
			w.Outputs[i] = string(p.Output)
		case dftype.StatusErrored:
			w.ErrorNames[i], w.ErrorMessages[i] = p.ErrorName, p.ErrorMessage
		}
		key := [2]string{p.WorkflowName, p.InstanceID}
		if _, dup := index[key]; dup {
			return nil, nil, fmt.Errorf("checkpoint batch: instance %s/%s appears twice", p.WorkflowName, p.InstanceID)
		}
		index[key] = i
		w.WorkflowNames[i], w.InstanceIds[i] = p.WorkflowName, p.InstanceID
		w.RunNumbers[i] = int32(p.RunNumber)
		w.TaskIds[i], w.Versions[i] = p.Task.ID, p.Task.Version
		if p.Now.After(now) {
			now = p.Now
		}
		for _, st := range p.Steps {
			appendStep(&w, p, &st)
		}
		if log {
			events.add(transition.CheckpointEvents(p, p.Steps, false)...)
		}
		results[i].Err = db.ErrLeaseLost // until its fence is seen to hold
	}
	w.Now = nowArg(now)
	w.ETypes, w.EWorkflowNames, w.EInstanceIds, w.ERunNumbers = emptyIfNil(events.types), emptyIfNil(events.workflowNames), emptyIfNil(events.instanceIDs), events.runNumbers
	w.EStepKeys, w.EAttempts, w.EDetails, w.EAts = emptyIfNil(events.stepKeys), events.attempts, emptyIfNil(events.details), events.ats
	w.EStartedAts = events.startedAts
	if w.ERunNumbers == nil {
		w.ERunNumbers, w.EAttempts, w.EAts, w.EStartedAts = []int32{}, []int32{}, []time.Time{}, []time.Time{}
	}
	var rows []pgsqlc.CheckpointBatchRow
	step := func(q *pgsqlc.Queries) error {
		var err error
		rows, err = q.CheckpointBatch(ctx, w)
		return err
	}
	read := func() []db.CheckpointBatchResult {
		for _, row := range rows {
			if !row.Held {
				continue
			}
			i := index[[2]string{row.WorkflowName, row.InstanceID}]
			plan, _ := transition.Checkpoint(ps[i]) // it planned above
			_, res := plan.Resolve(transition.CheckpointFacts{
				Status: dftype.InstanceStatus(row.Status), PauseRequested: row.PauseRequested,
			})
			results[i] = db.CheckpointBatchResult{Result: res}
		}
		return results
	}
	return step, read, nil
}

// batchableAlone reports whether the statement of the group commit can
// write p when p commits alone: Batchable but for failed attempts.
func batchableAlone(p *db.CheckpointParams) bool {
	switch p.Outcome {
	case db.OutcomeContinue, db.OutcomeComplete, db.OutcomeError:
		return p.ConsumeEvent == nil && !p.ResetLeaseLosses
	}
	return false
}

func appendStep(w *pgsqlc.CheckpointBatchParams, p *db.CheckpointParams, st *db.StepWrite) {
	w.SWorkflowNames = append(w.SWorkflowNames, p.WorkflowName)
	w.SInstanceIds = append(w.SInstanceIds, p.InstanceID)
	w.SRunNumbers = append(w.SRunNumbers, int32(p.RunNumber))
	w.SStepKeys = append(w.SStepKeys, st.Key)
	w.STypes = append(w.STypes, string(st.Type))
	w.SStatuses = append(w.SStatuses, string(st.Status))
	w.SAttempts = append(w.SAttempts, int32(db.StoredAttempts(st.Attempts)))
	w.SMaxAttempts = append(w.SMaxAttempts, int32(db.StoredMaxAttempts(st.MaxAttempts)))
	w.STimeoutsMs = append(w.STimeoutsMs, st.Timeout.Milliseconds())
	w.SNextRetryAt = append(w.SNextRetryAt, timeOrZero(st.NextRetryAt))
	w.SWakeAt = append(w.SWakeAt, timeOrZero(st.WakeAt))
	w.SWaitEventTypes = append(w.SWaitEventTypes, st.WaitEventType)
	w.SResults = append(w.SResults, string(st.Result))
	w.SErrorNames = append(w.SErrorNames, st.ErrorName)
	w.SErrorMessages = append(w.SErrorMessages, st.ErrorMessage)
	w.SStartedAt = append(w.SStartedAt, timeOrZero(st.StartedAt))
}

// timeOrZero is the batch arrays' encoding of a nullable time: the zero time
// (year 1) stands for NULL.
func timeOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
