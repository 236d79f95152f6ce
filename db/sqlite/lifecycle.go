package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

var _ db.LifecycleStore = (*Store)(nil)

// LifecycleLogSet turns the lifecycle event log on or off (on when the
// store is opened). While off, no transition runs a statement for it.
func (s *Store) LifecycleLogSet(on bool) { s.lifecycleOff.Store(!on) }

// logLifecycle writes events in the caller's write transaction with the
// prepared inserts, two at a time (LifecycleInsertPair: a step's start and
// outcome, the common case, in one statement); an event without a time
// takes now (the transaction's). It writes nothing while the log is off.
func (s *Store) logLifecycle(ctx context.Context, q *litesqlc.Queries, now int64, events ...db.LifecycleEvent) error {
	if s.lifecycleOff.Load() {
		return nil
	}
	at := func(e *db.LifecycleEvent) int64 {
		if e.At.IsZero() {
			return now
		}
		return micros(e.At)
	}
	for len(events) >= 2 {
		a, b := &events[0], &events[1]
		if err := q.LifecycleInsertPair(ctx, litesqlc.LifecycleInsertPairParams{
			Type1: string(a.Type), WorkflowName1: a.WorkflowName, InstanceId1: a.InstanceID, RunNumber1: int64(a.RunNumber),
			StepKey1: textArg(a.StepKey), Attempt1: int64(a.Attempt), Detail1: textArg(a.Detail), At1: at(a),
			Type2: string(b.Type), WorkflowName2: b.WorkflowName, InstanceId2: b.InstanceID, RunNumber2: int64(b.RunNumber),
			StepKey2: textArg(b.StepKey), Attempt2: int64(b.Attempt), Detail2: textArg(b.Detail), At2: at(b),
		}); err != nil {
			return fmt.Errorf("logging %s and %s: %w", a.Type, b.Type, err)
		}
		events = events[2:]
	}
	if len(events) == 1 {
		e := &events[0]
		if err := q.LifecycleInsert(ctx, litesqlc.LifecycleInsertParams{
			Type:         string(e.Type),
			WorkflowName: e.WorkflowName,
			InstanceID:   e.InstanceID,
			RunNumber:    int64(e.RunNumber),
			StepKey:      textArg(e.StepKey),
			Attempt:      int64(e.Attempt),
			Detail:       textArg(e.Detail),
			At:           at(e),
		}); err != nil {
			return fmt.Errorf("logging %s: %w", e.Type, err)
		}
	}
	return nil
}

// LifecycleList returns a page of lifecycle events matching p, in id
// order (descending with p.Newest).
func (s *Store) LifecycleList(ctx context.Context, p *db.LifecycleListParams) ([]*db.LifecycleEvent, error) {
	arg := litesqlc.LifecycleListParams{
		AfterID:      p.AfterID,
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		WorkerID:     p.WorkerID,
		Max:          int64(lifecycleLimit(p.Limit)),
	}
	if len(p.Types) > 0 {
		types, err := json.Marshal(p.Types)
		if err != nil {
			return nil, fmt.Errorf("listing lifecycle events: %w", err)
		}
		arg.Types = string(types)
	}
	if !p.Since.IsZero() {
		arg.Since = new(micros(p.Since))
	}
	if !p.Until.IsZero() {
		arg.Until = new(micros(p.Until))
	}
	var rows []litesqlc.LifecycleEvent
	var err error
	if p.Newest {
		rows, err = s.queriesFor(ctx, false).LifecycleListNewest(ctx, litesqlc.LifecycleListNewestParams{
			BeforeID: p.BeforeID, AfterID: arg.AfterID, WorkflowName: arg.WorkflowName, InstanceID: arg.InstanceID,
			WorkerID: arg.WorkerID, Types: arg.Types, Since: arg.Since, Until: arg.Until, Max: arg.Max,
		})
	} else {
		rows, err = s.queriesFor(ctx, false).LifecycleList(ctx, arg)
	}
	if err != nil {
		return nil, fmt.Errorf("listing lifecycle events: %w", interpretError(err))
	}
	list := make([]*db.LifecycleEvent, len(rows))
	for i := range rows {
		list[i] = lifecycleEventFromRow(&rows[i])
	}
	return list, nil
}

// LifecyclePrune deletes up to p.Max lifecycle events older than p.Before,
// oldest first, in one short write transaction.
func (s *Store) LifecyclePrune(ctx context.Context, p *db.LifecyclePruneParams) (int, error) {
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var err error
		n, err = q.LifecyclePrune(ctx, litesqlc.LifecyclePruneParams{Before: micros(p.Before), Max: int64(max(p.Max, 1))})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning lifecycle events: %w", interpretError(err))
	}
	return int(n), nil
}

func lifecycleEventFromRow(r *litesqlc.LifecycleEvent) *db.LifecycleEvent {
	e := &db.LifecycleEvent{
		ID:           r.ID,
		Type:         db.LifecycleEventType(r.Type),
		WorkflowName: r.WorkflowName,
		InstanceID:   r.InstanceID,
		RunNumber:    int(r.RunNumber),
		Attempt:      int(r.Attempt),
		At:           timeFromMicros(r.At),
	}
	if r.StepKey != nil {
		e.StepKey = *r.StepKey
	}
	if r.Detail != nil {
		e.Detail = *r.Detail
	}
	if r.WorkerID != nil {
		e.WorkerID = *r.WorkerID
	}
	return e
}

// lifecycleLimit is the page length of a lifecycle list: limit, or the
// default page size when it is not positive.
func lifecycleLimit(limit int) int {
	if limit <= 0 {
		return defaultListLimit
	}
	return limit
}

// LifecycleLastID returns the id of the newest lifecycle event, 0 when
// there is none.
func (s *Store) LifecycleLastID(ctx context.Context) (int64, error) {
	id, err := s.queriesFor(ctx, false).LifecycleLastID(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the last lifecycle event: %w", interpretError(err))
	}
	return id, nil
}
