package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// limitTx is admission.Tx on the queries of one write transaction, which
// holds the database's write lock: nothing it reads can change under it.
type limitTx struct {
	q *litesqlc.Queries
	// s is the store, whose lifecycle log a run TaskAdmitLeased starts
	// logs its instance.started in (nil: nothing is logged).
	s *Store
}

var _ admission.Tx = limitTx{}

func (t limitTx) Ensure(ctx context.Context, scopes []string, now time.Time) error {
	for _, s := range scopes {
		if err := t.q.LimitEnsure(ctx, litesqlc.LimitEnsureParams{Scope: s, Now: micros(now)}); err != nil {
			return err
		}
	}
	return nil
}

func (t limitTx) Define(ctx context.Context, specs []db.LimitSpec, now time.Time) error {
	for _, s := range specs {
		p := litesqlc.LimitDefineParams{Scope: s.Scope, Now: micros(now)}
		p.MaxRunning, p.RateLimit, p.RatePeriodMs = limitColumns(s.MaxRunning, s.RateLimit, s.RatePeriod)
		if err := t.q.LimitDefine(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// limitColumns are the nullable columns of a scope's limits: NULL for a
// limit that is off (zero), a period of at least a millisecond.
func limitColumns(maxRunning, rateLimit int, ratePeriod time.Duration) (maxRun, rate, periodMs *int64) {
	if maxRunning > 0 {
		v := int64(maxRunning)
		maxRun = &v
	}
	if rateLimit > 0 {
		v, ms := int64(rateLimit), max(ratePeriod.Milliseconds(), 1)
		rate, periodMs = &v, &ms
	}
	return maxRun, rate, periodMs
}

func (t limitTx) Lock(ctx context.Context, scopes []string) ([]*db.LimitRow, error) {
	rows, err := t.q.LimitLock(ctx, listArg(scopes))
	if err != nil {
		return nil, err
	}
	out := make([]*db.LimitRow, len(rows))
	for i := range rows {
		out[i] = limitFromRow(&rows[i])
	}
	return out, nil
}

// LockSkip is Lock: the write transaction excludes every other writer.
func (t limitTx) LockSkip(ctx context.Context, scopes []string) ([]*db.LimitRow, error) {
	return t.Lock(ctx, scopes)
}

func (t limitTx) Update(ctx context.Context, rows []*db.LimitRow) error {
	for _, r := range rows {
		if err := t.q.LimitUpdate(ctx, litesqlc.LimitUpdateParams{
			Running: int64(r.Running), RateWindow: microsPtr(r.RateWindow), RateCount: int64(r.RateCount), Scope: r.Scope,
		}); err != nil {
			return err
		}
	}
	return nil
}

func (t limitTx) Members(ctx context.Context, refs []db.InstanceRef) ([]admission.Member, error) {
	var out []admission.Member
	for _, ref := range refs {
		rows, err := t.q.LimitMemberList(ctx, litesqlc.LimitMemberListParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out = append(out, admission.Member{Ref: ref, Scope: r.Scope, State: r.State})
		}
	}
	return out, nil
}

func (t limitTx) WriteMembers(ctx context.Context, ref db.InstanceRef, ws []admission.MemberWrite, now time.Time) error {
	for _, w := range ws {
		if err := t.q.LimitMemberWrite(ctx, litesqlc.LimitMemberWriteParams{
			WorkflowName: ref.WorkflowName, InstanceID: ref.ID, Scope: w.Scope, State: w.State,
			Blocked: boolArg(w.Blocked), RateUntil: microsPtr(w.RateUntil), Now: micros(now),
		}); err != nil {
			return err
		}
	}
	return nil
}

func (t limitTx) SetLimited(ctx context.Context, refs []db.InstanceRef) error {
	for _, ref := range refs {
		if err := t.q.LimitSetLimited(ctx, litesqlc.LimitSetLimitedParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID}); err != nil {
			return err
		}
	}
	return nil
}

func (t limitTx) WriteMembersMany(ctx context.Context, ws []admission.InstanceWrites, now time.Time) error {
	for _, iw := range ws {
		if err := t.WriteMembers(ctx, iw.Ref, iw.Writes, now); err != nil {
			return err
		}
	}
	return nil
}

func (t limitTx) Waiting(ctx context.Context, scopes []string, max int) ([]db.InstanceRef, error) {
	var all []litesqlc.LimitWaitingRow
	for _, s := range scopes {
		rows, err := t.q.LimitWaiting(ctx, litesqlc.LimitWaitingParams{Scope: s, Max: int64(max)})
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	// The order of LimitWaiting across the scopes: highest priority, then
	// oldest, first.
	slices.SortFunc(all, func(a, b litesqlc.LimitWaitingRow) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.WaitingSince, b.WaitingSince), cmp.Compare(a.ID, b.ID))
	})
	out := make([]db.InstanceRef, len(all))
	for i, r := range all {
		out[i] = db.InstanceRef{WorkflowName: r.WorkflowName, ID: r.InstanceID}
	}
	return out, nil
}

// LockWaiters returns refs: the write transaction excludes every other writer.
func (t limitTx) LockWaiters(_ context.Context, refs []db.InstanceRef) ([]db.InstanceRef, error) {
	return refs, nil
}

func (t limitTx) TaskAdmit(ctx context.Context, ref db.InstanceRef, runAt time.Time, _ bool) error {
	return t.q.LimitTaskAdmit(ctx, litesqlc.LimitTaskAdmitParams{RunAt: micros(runAt), WorkflowName: ref.WorkflowName, InstanceID: ref.ID})
}

func (t limitTx) TaskAdmitLeased(ctx context.Context, ref db.InstanceRef, lease *db.CreateLease, now time.Time) (*db.CreateResult, error) {
	at := micros(now)
	row, err := t.q.LimitInstanceStart(ctx, litesqlc.LimitInstanceStartParams{
		Now: &at, WorkflowName: ref.WorkflowName, InstanceID: ref.ID, Queues: listArg(lease.Queues),
	})
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	owner, until := lease.Owner, micros(lease.LockedUntil)
	task, err := t.q.LimitTaskInsertLeased(ctx, litesqlc.LimitTaskInsertLeasedParams{
		WorkflowName: ref.WorkflowName, InstanceID: ref.ID, RunNumber: row.RunNumber, Now: at, LockOwner: &owner, LockedUntil: &until,
	})
	if err != nil {
		return nil, err
	}
	inst := instanceFromRow(&row)
	if t.s != nil {
		// The run starts here: its instance.started goes in this transaction.
		if err := t.s.logLifecycle(ctx, t.q, at, transition.StartedEvent(ref.WorkflowName, ref.ID, inst.RunNumber, timeFromMicros(at))); err != nil {
			return nil, err
		}
	}
	return &db.CreateResult{Instance: inst, LeasedTask: taskFromRow(&task)}, nil
}

func (t limitTx) TaskDelete(ctx context.Context, ref db.InstanceRef) error {
	return t.q.LimitTaskDelete(ctx, litesqlc.LimitTaskDeleteParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID})
}

// limitFromRow is the db.LimitRow of a workflow_limit row.
func limitFromRow(r *litesqlc.WorkflowLimit) *db.LimitRow {
	out := &db.LimitRow{Scope: r.Scope, Running: int(r.Running), RateWindow: timePtrFromMicros(r.RateWindow), RateCount: int(r.RateCount), UpdatedAt: timeFromMicros(r.UpdatedAt)}
	if r.MaxRunning != nil {
		out.MaxRunning = int(*r.MaxRunning)
	}
	if r.RateLimit != nil && r.RatePeriodMs != nil {
		out.RateLimit = int(*r.RateLimit)
		out.RatePeriod = time.Duration(*r.RatePeriodMs) * time.Millisecond
	}
	return out
}

// QueueLimitSet writes a queue's limits, replacing the ones it had.
func (s *Store) QueueLimitSet(ctx context.Context, p *db.QueueLimitSetParams) (*db.QueueLimits, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("setting queue limits: %w", err)
	}
	var out *db.QueueLimits
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		arg := litesqlc.QueueLimitSetParams{Scope: db.QueueScope(p.Name), Now: now}
		arg.MaxRunning, arg.RateLimit, arg.RatePeriodMs = limitColumns(p.MaxRunning, p.RateLimit, p.RatePeriod)
		row, err := q.QueueLimitSet(ctx, arg)
		if err != nil {
			return err
		}
		out = db.QueueLimitsFromRow(limitFromRow(&row))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("setting queue limits: %w", interpretError(err))
	}
	return out, nil
}

// QueueLimitGet returns a queue's limits or db.ErrNotFound.
func (s *Store) QueueLimitGet(ctx context.Context, name string) (*db.QueueLimits, error) {
	row, err := s.queriesFor(ctx, false).LimitGet(ctx, db.QueueScope(name))
	if err != nil {
		return nil, fmt.Errorf("getting queue limits: %w", interpretError(err))
	}
	return db.QueueLimitsFromRow(limitFromRow(&row)), nil
}

// QueueLimitList returns the limits of every queue that has a row, by name.
func (s *Store) QueueLimitList(ctx context.Context) ([]*db.QueueLimits, error) {
	start, end := db.QueueScopePrefix()
	rows, err := s.queriesFor(ctx, false).LimitListPrefix(ctx, litesqlc.LimitListPrefixParams{Prefix: start, PrefixEnd: end})
	if err != nil {
		return nil, fmt.Errorf("listing queue limits: %w", interpretError(err))
	}
	out := make([]*db.QueueLimits, len(rows))
	for i := range rows {
		out[i] = db.QueueLimitsFromRow(limitFromRow(&rows[i]))
	}
	return out, nil
}

// fillWaitingFor sets WaitingFor on the queued limited instances of list,
// one query each; a list with none costs nothing.
func fillWaitingFor(ctx context.Context, q *litesqlc.Queries, list []*db.Instance) error {
	for _, inst := range list {
		if !inst.Limited || inst.Status != "queued" {
			continue
		}
		rows, err := q.LimitWaitingFor(ctx, litesqlc.LimitWaitingForParams{WorkflowName: inst.WorkflowName, InstanceID: inst.ID})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue
		}
		r := rows[0]
		w := &db.WaitingFor{Kind: db.LimitKindConcurrency, Scope: r.Scope}
		if r.State == admission.StateWaiting {
			if r.MaxRunning != nil {
				w.Max = int(*r.MaxRunning)
			}
		} else {
			w.Kind, w.Until = db.LimitKindRate, timePtrFromMicros(r.RateUntil)
			if r.RateLimit != nil && r.RatePeriodMs != nil {
				w.Max, w.Period = int(*r.RateLimit), time.Duration(*r.RatePeriodMs)*time.Millisecond
			}
		}
		inst.WaitingFor = w
	}
	return nil
}
