package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
)

var _ db.LifecycleStore = (*Store)(nil)

// LifecycleLogSet turns the lifecycle event log on or off (on when the
// store is built). While off, no transition runs a statement for it and
// the group commit binds empty event arrays.
func (s *Store) LifecycleLogSet(on bool) { s.lifecycleOff.Store(!on) }

// logging reports whether the lifecycle event log is on.
func (s *Store) logging() bool { return !s.lifecycleOff.Load() }

// lifecycleArrays are the parallel arrays of a multi-row lifecycle insert.
// An event without a time travels as the zero time: the statement's now.
type lifecycleArrays struct {
	types, workflowNames, instanceIDs, stepKeys, details []string
	runNumbers, attempts                                 []int32
	ats, startedAts                                      []time.Time
}

// add appends events, as they are stored (db.LifecyclePack: a step's
// start and outcome in one row).
func (a *lifecycleArrays) add(events ...db.LifecycleEvent) {
	events = db.LifecyclePack(events)
	for i := range events {
		e := &events[i]
		a.types = append(a.types, string(e.Type))
		a.workflowNames = append(a.workflowNames, e.WorkflowName)
		a.instanceIDs = append(a.instanceIDs, e.InstanceID)
		a.runNumbers = append(a.runNumbers, int32(e.RunNumber))
		a.stepKeys = append(a.stepKeys, e.StepKey)
		a.attempts = append(a.attempts, int32(e.Attempt))
		a.details = append(a.details, e.Detail)
		a.ats = append(a.ats, e.At)
		a.startedAts = append(a.startedAts, e.StepStartedAt)
	}
}

func (a *lifecycleArrays) insertParams(now *time.Time) pgsqlc.LifecycleInsertParams {
	return pgsqlc.LifecycleInsertParams{
		Now: now, Types: a.types, WorkflowNames: a.workflowNames, InstanceIds: a.instanceIDs,
		RunNumbers: a.runNumbers, StepKeys: a.stepKeys, Attempts: a.attempts, Details: a.details, Ats: a.ats, StartedAts: a.startedAts,
	}
}

// logLifecycle writes events with one LifecycleInsert on q, in the
// caller's transaction; it runs nothing while the log is off or when there
// is no event.
func (s *Store) logLifecycle(ctx context.Context, q *pgsqlc.Queries, now *time.Time, events ...db.LifecycleEvent) error {
	if !s.logging() || len(events) == 0 {
		return nil
	}
	var a lifecycleArrays
	a.add(events...)
	if err := q.LifecycleInsert(ctx, a.insertParams(now)); err != nil {
		return fmt.Errorf("logging lifecycle events: %w", err)
	}
	return nil
}

// heldLifecycleStep returns the pipeline step that writes events while the
// checkpoint's task is held at its version (LifecycleInsertHeld), or nil
// when the log is off or there is no event. It goes before any statement
// that gives the task back or deletes it.
func (s *Store) heldLifecycleStep(ctx context.Context, held db.TaskRef, now *time.Time, events []db.LifecycleEvent) pipelineStep {
	if !s.logging() || len(events) == 0 {
		return nil
	}
	var a lifecycleArrays
	a.add(events...)
	arg := pgsqlc.LifecycleInsertHeldParams{
		Now: now, Types: a.types, WorkflowNames: a.workflowNames, InstanceIds: a.instanceIDs,
		RunNumbers: a.runNumbers, StepKeys: a.stepKeys, Attempts: a.attempts, Details: a.details, Ats: a.ats, StartedAts: a.startedAts,
		TaskID: held.ID, Version: held.Version,
	}
	return func(q *pgsqlc.Queries) error { return q.LifecycleInsertHeld(ctx, arg) }
}

// logCreated writes the creation events of the created (not deduplicated)
// results, in the create's transaction: with instance.waiting for those a
// limit holds back (Instance.WaitingFor).
func (s *Store) logCreated(ctx context.Context, q *pgsqlc.Queries, workflowName string, now *time.Time, created []db.CreateResult) error {
	if !s.logging() {
		return nil
	}
	var events []db.LifecycleEvent
	for i := range created {
		c := &created[i]
		if c.Deduplicated || c.Instance == nil {
			continue
		}
		plan := transition.Create(c.LeasedTask != nil, false)
		events = append(events, transition.CreateEvents(&plan, workflowName, c.Instance.ID, c.Instance.WaitingFor, time.Time{})...)
	}
	return s.logLifecycle(ctx, q, now, events...)
}

// LifecycleList returns a page of lifecycle events matching p, in id order
// (descending with p.Newest): one instance's through its index, the others
// along the primary key.
func (s *Store) LifecycleList(ctx context.Context, p *db.LifecycleListParams) ([]*db.LifecycleEvent, error) {
	types := make([]string, len(p.Types))
	for i, t := range p.Types {
		types[i] = string(t)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	var (
		rows []pgsqlc.LifecycleEvent
		err  error
	)
	// Rows, not events: a row holds up to two (db.LifecyclePage), and one
	// more, since the row of the cursor may hold none of the page's.
	pageMax := int32(min(limit, 1<<30) + 1)
	since, until := timeArg(p.Since), timeArg(p.Until)
	after, before, started := db.LifecycleRowAfter(p.AfterID), db.LifecycleRowBefore(p.BeforeID), db.LifecycleWantsStarted(p.Types)
	switch {
	case p.InstanceID != "" && p.Newest:
		if before == 0 {
			before = math.MaxInt64
		}
		rows, err = s.queries.LifecycleListInstanceNewest(ctx, pgsqlc.LifecycleListInstanceNewestParams{
			InstanceID: p.InstanceID, BeforeID: before, AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: pageMax,
		})
	case p.InstanceID != "":
		rows, err = s.queries.LifecycleListInstance(ctx, pgsqlc.LifecycleListInstanceParams{
			InstanceID: p.InstanceID, AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: pageMax,
		})
	case p.Newest:
		rows, err = s.queries.LifecycleListNewest(ctx, pgsqlc.LifecycleListNewestParams{
			BeforeID: before, AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: pageMax,
		})
	default:
		rows, err = s.queries.LifecycleList(ctx, pgsqlc.LifecycleListParams{
			AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: pageMax,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("listing lifecycle events: %w", interpretError(err))
	}
	stored := make([]*db.LifecycleEvent, len(rows))
	for i := range rows {
		r := &rows[i]
		stored[i] = &db.LifecycleEvent{
			ID: r.ID, Type: db.LifecycleEventType(r.Type), WorkflowName: r.WorkflowName, InstanceID: r.InstanceID,
			RunNumber: int(r.RunNumber), StepKey: deref(r.StepKey), Attempt: int(r.Attempt), Detail: deref(r.Detail),
			At: r.At.UTC(), WorkerID: deref(r.WorkerID),
		}
		if r.StartedAt != nil {
			stored[i].StepStartedAt = r.StartedAt.UTC()
		}
	}
	return db.LifecyclePage(p, stored, limit), nil
}

// LifecyclePrune deletes, among the p.Max oldest lifecycle events by id,
// those older than p.Before, in one statement.
func (s *Store) LifecyclePrune(ctx context.Context, p *db.LifecyclePruneParams) (int, error) {
	batch := int32(max(min(p.Max, 1<<26), 1))
	n, err := s.queries.LifecyclePrune(ctx, pgsqlc.LifecyclePruneParams{Before: p.Before, Max: batch, ScanRows: db.LifecyclePruneScan * batch})
	if err != nil {
		return 0, fmt.Errorf("pruning lifecycle events: %w", interpretError(err))
	}
	return int(n), nil
}

// timeArg is an optional time bound: the zero time is NULL.
func timeArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// LifecycleLastID returns the id of the newest lifecycle event, 0 when
// there is none.
func (s *Store) LifecycleLastID(ctx context.Context) (int64, error) {
	row, err := s.queries.LifecycleLastID(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the last lifecycle event: %w", interpretError(err))
	}
	return db.LifecycleLastEventID(row), nil
}
