package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

var _ db.LifecycleStore = (*Store)(nil)

// LifecycleLogSet turns the lifecycle event log on or off (on when the
// store is opened). While off, no transition runs a statement for it.
func (s *Store) LifecycleLogSet(on bool) { s.lifecycleOff.Store(!on) }

// logLifecycle writes events in the caller's write transaction; an event
// without a time takes now (the transaction's). It writes nothing while the
// log is off.
func (s *Store) logLifecycle(ctx context.Context, q *litesqlc.Queries, now int64, events ...db.LifecycleEvent) error {
	var log lifecycleBuf
	s.bufferLifecycle(&log, now, events...)
	return log.flush(ctx, q)
}

// bufferLifecycle adds events to log, each without a time taking now, so
// that a transaction of many transitions (the group commit) writes all of
// its events at its end with few statements. It adds nothing while the log
// is off.
func (s *Store) bufferLifecycle(log *lifecycleBuf, now int64, events ...db.LifecycleEvent) {
	if s.lifecycleOff.Load() {
		return
	}
	// As stored: a step's start and outcome in one row.
	events = db.LifecyclePack(events)
	for i := range events {
		e := &events[i]
		at := now
		if !e.At.IsZero() {
			at = micros(e.At)
		}
		code, err := lifecycleCode(e.Type)
		if err != nil && log.err == nil {
			log.err = fmt.Errorf("logging a lifecycle event: %w", err)
		}
		row := lifecycleRow{e: e, at: at, code: code}
		if !e.StepStartedAt.IsZero() {
			row.startedAt = new(micros(e.StepStartedAt))
		}
		log.rows = append(log.rows, row)
	}
}

// lifecycleRow is an event waiting in a lifecycleBuf, with its stored time
// and type code.
type lifecycleRow struct {
	e    *db.LifecycleEvent
	at   int64
	code int64
	// startedAt is the step.started the row also records; nil for none.
	startedAt *int64
}

// lifecycleBuf holds the lifecycle events of a write transaction until
// flush writes them in it, in the order they were added.
type lifecycleBuf struct {
	rows []lifecycleRow
	// err is the first event that could not be buffered (an unknown
	// type), which flush returns.
	err error
}

// lifecycleTypeCodes are the stored codes of the lifecycle event types: a
// small integer in every row instead of the type's name. A code, once
// given, never changes meaning; a new type takes a new code.
var lifecycleTypeCodes = map[db.LifecycleEventType]int64{
	db.LifecycleCreated:        1,
	db.LifecycleStarted:        2,
	db.LifecycleStepStarted:    3,
	db.LifecycleStepCompleted:  4,
	db.LifecycleStepFailed:     5,
	db.LifecycleStepRetrying:   6,
	db.LifecycleWaiting:        7,
	db.LifecycleEventReceived:  8,
	db.LifecyclePaused:         9,
	db.LifecycleResumed:        10,
	db.LifecycleTerminated:     11,
	db.LifecycleRestarted:      12,
	db.LifecycleCompleted:      13,
	db.LifecycleErrored:        14,
	db.LifecycleWorkerOnline:   15,
	db.LifecycleWorkerDraining: 16,
	db.LifecycleWorkerOffline:  17,
}

// lifecycleTypeNames is lifecycleTypeCodes the other way: the type of
// each code, "" for a code no type has.
var lifecycleTypeNames = func() []db.LifecycleEventType {
	top := int64(0)
	for _, c := range lifecycleTypeCodes {
		top = max(top, c)
	}
	names := make([]db.LifecycleEventType, top+1)
	for t, c := range lifecycleTypeCodes {
		names[c] = t
	}
	return names
}()

// lifecycleCode is the stored code of type t, an error for a type that
// has none.
func lifecycleCode(t db.LifecycleEventType) (int64, error) {
	code, ok := lifecycleTypeCodes[t]
	if !ok {
		return 0, fmt.Errorf("unknown lifecycle event type %q", t)
	}
	return code, nil
}

// lifecycleTypeOf is the type stored as code, "" for a code no type has.
func lifecycleTypeOf(code int64) db.LifecycleEventType {
	if code < 0 || code >= int64(len(lifecycleTypeNames)) {
		return ""
	}
	return lifecycleTypeNames[code]
}

// flush writes the buffered events with the prepared inserts, eight to a
// statement (LifecycleInsert8), then two (LifecycleInsertPair), then one:
// on SQLite's single writer the statements, not the rows, are most of what
// the log costs a transition. The buffer is empty afterwards.
func (b *lifecycleBuf) flush(ctx context.Context, q *litesqlc.Queries) error {
	if b.err != nil {
		return b.err
	}
	rows := b.rows
	b.rows = b.rows[:0]
	for len(rows) >= 8 {
		r := rows[:8]
		if err := q.LifecycleInsert8(ctx, litesqlc.LifecycleInsert8Params{
			Type1: r[0].code, WorkflowName1: r[0].e.WorkflowName, InstanceId1: r[0].e.InstanceID, RunNumber1: int64(r[0].e.RunNumber),
			StepKey1: textArg(r[0].e.StepKey), Attempt1: int64(r[0].e.Attempt), Detail1: textArg(r[0].e.Detail), At1: r[0].at, StartedAt1: r[0].startedAt,
			Type2: r[1].code, WorkflowName2: r[1].e.WorkflowName, InstanceId2: r[1].e.InstanceID, RunNumber2: int64(r[1].e.RunNumber),
			StepKey2: textArg(r[1].e.StepKey), Attempt2: int64(r[1].e.Attempt), Detail2: textArg(r[1].e.Detail), At2: r[1].at, StartedAt2: r[1].startedAt,
			Type3: r[2].code, WorkflowName3: r[2].e.WorkflowName, InstanceId3: r[2].e.InstanceID, RunNumber3: int64(r[2].e.RunNumber),
			StepKey3: textArg(r[2].e.StepKey), Attempt3: int64(r[2].e.Attempt), Detail3: textArg(r[2].e.Detail), At3: r[2].at, StartedAt3: r[2].startedAt,
			Type4: r[3].code, WorkflowName4: r[3].e.WorkflowName, InstanceId4: r[3].e.InstanceID, RunNumber4: int64(r[3].e.RunNumber),
			StepKey4: textArg(r[3].e.StepKey), Attempt4: int64(r[3].e.Attempt), Detail4: textArg(r[3].e.Detail), At4: r[3].at, StartedAt4: r[3].startedAt,
			Type5: r[4].code, WorkflowName5: r[4].e.WorkflowName, InstanceId5: r[4].e.InstanceID, RunNumber5: int64(r[4].e.RunNumber),
			StepKey5: textArg(r[4].e.StepKey), Attempt5: int64(r[4].e.Attempt), Detail5: textArg(r[4].e.Detail), At5: r[4].at, StartedAt5: r[4].startedAt,
			Type6: r[5].code, WorkflowName6: r[5].e.WorkflowName, InstanceId6: r[5].e.InstanceID, RunNumber6: int64(r[5].e.RunNumber),
			StepKey6: textArg(r[5].e.StepKey), Attempt6: int64(r[5].e.Attempt), Detail6: textArg(r[5].e.Detail), At6: r[5].at, StartedAt6: r[5].startedAt,
			Type7: r[6].code, WorkflowName7: r[6].e.WorkflowName, InstanceId7: r[6].e.InstanceID, RunNumber7: int64(r[6].e.RunNumber),
			StepKey7: textArg(r[6].e.StepKey), Attempt7: int64(r[6].e.Attempt), Detail7: textArg(r[6].e.Detail), At7: r[6].at, StartedAt7: r[6].startedAt,
			Type8: r[7].code, WorkflowName8: r[7].e.WorkflowName, InstanceId8: r[7].e.InstanceID, RunNumber8: int64(r[7].e.RunNumber),
			StepKey8: textArg(r[7].e.StepKey), Attempt8: int64(r[7].e.Attempt), Detail8: textArg(r[7].e.Detail), At8: r[7].at, StartedAt8: r[7].startedAt,
		}); err != nil {
			return fmt.Errorf("logging %d lifecycle events: %w", len(r), err)
		}
		rows = rows[8:]
	}
	for len(rows) >= 2 {
		a, b := &rows[0], &rows[1]
		if err := q.LifecycleInsertPair(ctx, litesqlc.LifecycleInsertPairParams{
			Type1: a.code, WorkflowName1: a.e.WorkflowName, InstanceId1: a.e.InstanceID, RunNumber1: int64(a.e.RunNumber),
			StepKey1: textArg(a.e.StepKey), Attempt1: int64(a.e.Attempt), Detail1: textArg(a.e.Detail), At1: a.at, StartedAt1: a.startedAt,
			Type2: b.code, WorkflowName2: b.e.WorkflowName, InstanceId2: b.e.InstanceID, RunNumber2: int64(b.e.RunNumber),
			StepKey2: textArg(b.e.StepKey), Attempt2: int64(b.e.Attempt), Detail2: textArg(b.e.Detail), At2: b.at, StartedAt2: b.startedAt,
		}); err != nil {
			return fmt.Errorf("logging %s and %s: %w", a.e.Type, b.e.Type, err)
		}
		rows = rows[2:]
	}
	if len(rows) == 1 {
		e := &rows[0]
		if err := q.LifecycleInsert(ctx, litesqlc.LifecycleInsertParams{
			Type: e.code, WorkflowName: e.e.WorkflowName, InstanceID: e.e.InstanceID, RunNumber: int64(e.e.RunNumber),
			StepKey: textArg(e.e.StepKey), Attempt: int64(e.e.Attempt), Detail: textArg(e.e.Detail), At: e.at, StartedAt: e.startedAt,
		}); err != nil {
			return fmt.Errorf("logging %s: %w", e.e.Type, err)
		}
	}
	return nil
}

// LifecycleList returns a page of lifecycle events matching p, in id order
// (descending with p.Newest): one instance's through its index, the others
// along the primary key.
func (s *Store) LifecycleList(ctx context.Context, p *db.LifecycleListParams) ([]*db.LifecycleEvent, error) {
	var types string
	if len(p.Types) > 0 {
		codes := make([]int64, 0, len(p.Types))
		for _, t := range p.Types {
			code, err := lifecycleCode(t)
			if err != nil {
				return nil, fmt.Errorf("listing lifecycle events: %w", err)
			}
			codes = append(codes, code)
		}
		b, err := json.Marshal(codes)
		if err != nil {
			return nil, fmt.Errorf("listing lifecycle events: %w", err)
		}
		types = string(b)
	}
	var since, until *int64
	if !p.Since.IsZero() {
		since = new(micros(p.Since))
	}
	if !p.Until.IsZero() {
		until = new(micros(p.Until))
	}
	q := s.queriesFor(ctx, false)
	// Rows, not events: a row holds up to two (db.LifecyclePage), and one
	// more, since the row of the cursor may hold none of the page's.
	limit := int64(lifecycleLimit(p.Limit))
	after, before := db.LifecycleRowAfter(p.AfterID), db.LifecycleRowBefore(p.BeforeID)
	started := int64(0)
	if db.LifecycleWantsStarted(p.Types) {
		started = 1
	}
	var (
		rows []litesqlc.LifecycleEvent
		err  error
	)
	switch {
	case p.InstanceID != "" && p.Newest:
		if before == 0 {
			before = math.MaxInt64
		}
		rows, err = q.LifecycleListInstanceNewest(ctx, litesqlc.LifecycleListInstanceNewestParams{
			InstanceID: p.InstanceID, BeforeID: before, AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: limit + 1,
		})
	case p.InstanceID != "":
		rows, err = q.LifecycleListInstance(ctx, litesqlc.LifecycleListInstanceParams{
			InstanceID: p.InstanceID, AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: limit + 1,
		})
	case p.Newest:
		rows, err = q.LifecycleListNewest(ctx, litesqlc.LifecycleListNewestParams{
			BeforeID: before, AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: limit + 1,
		})
	default:
		rows, err = q.LifecycleList(ctx, litesqlc.LifecycleListParams{
			AfterID: after, WorkflowName: p.WorkflowName,
			WorkerID: p.WorkerID, Types: types, WithStarted: started, Since: since, Until: until, Max: limit + 1,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("listing lifecycle events: %w", interpretError(err))
	}
	stored := make([]*db.LifecycleEvent, len(rows))
	for i := range rows {
		stored[i] = lifecycleEventFromRow(&rows[i])
	}
	return db.LifecyclePage(p, stored, int(limit)), nil
}

// LifecyclePrune deletes, among the p.Max oldest lifecycle events, those
// older than p.Before, in one short write transaction. It never deletes the
// newest event, whose id the next one follows (see the LifecyclePrune
// query).
func (s *Store) LifecyclePrune(ctx context.Context, p *db.LifecyclePruneParams) (int, error) {
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var err error
		batch := int64(max(p.Max, 1))
		n, err = q.LifecyclePrune(ctx, litesqlc.LifecyclePruneParams{Before: micros(p.Before), Max: batch, ScanRows: db.LifecyclePruneScan * batch})
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
		Type:         lifecycleTypeOf(r.Type),
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
	if r.StartedAt != nil {
		e.StepStartedAt = timeFromMicros(*r.StartedAt)
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
	row, err := s.queriesFor(ctx, false).LifecycleLastID(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the last lifecycle event: %w", interpretError(err))
	}
	return db.LifecycleLastEventID(row), nil
}
