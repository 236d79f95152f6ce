package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// limitTx is admission.Tx on the queries of one transaction. With a
// sender (the connection of a transaction that the caller commits with
// flush), writes are held back and sent in one pipeline with the next read
// (or the commit), so a release costs a round trip per read, not per
// statement; without one, every statement runs at once on q.
type limitTx struct {
	q       *pgsqlc.Queries
	channel string
	sender  batchSender
	pending []pipelineStep
	// preloaded holds the members read ahead by preload, for the first
	// Members call that asks for none but those instances.
	preloaded map[db.InstanceRef][]admission.Member
	// logStarted says that the lifecycle log is on: a run TaskAdmitLeased
	// starts logs its instance.started in the same statement.
	logStarted bool
}

// preload returns a pipeline step that reads the members of refs ahead of
// the first Members call that asks for some of them.
func (t *limitTx) preload(ctx context.Context, refs []db.InstanceRef) pipelineStep {
	p := memberListParams(refs)
	return func(q *pgsqlc.Queries) error {
		rows, err := q.LimitMemberList(ctx, p)
		if err != nil {
			return err
		}
		t.preloaded = make(map[db.InstanceRef][]admission.Member, len(refs))
		for _, r := range refs {
			t.preloaded[r] = nil
		}
		for _, m := range membersFromRows(rows) {
			t.preloaded[m.Ref] = append(t.preloaded[m.Ref], m)
		}
		return nil
	}
}

var _ admission.Tx = (*limitTx)(nil)

// read runs step now, behind the writes held back.
func (t *limitTx) read(ctx context.Context, step pipelineStep) error {
	if t.sender == nil {
		return step(t.q)
	}
	steps := append(t.pending, step)
	t.pending = nil
	return sendPipeline(ctx, t.sender, nil, nil, steps...)
}

// write runs step now, or holds it back for the next read or flush.
func (t *limitTx) write(step pipelineStep) error {
	if t.sender == nil {
		return step(t.q)
	}
	t.pending = append(t.pending, step)
	return nil
}

// flush sends the writes held back, then postlude (a COMMIT).
func (t *limitTx) flush(ctx context.Context, postlude []string) error {
	steps := t.pending
	t.pending = nil
	return sendPipeline(ctx, t.sender, nil, postlude, steps...)
}

func (t *limitTx) Ensure(ctx context.Context, scopes []string, now time.Time) error {
	return t.q.LimitEnsure(ctx, pgsqlc.LimitEnsureParams{Now: &now, Scopes: scopes})
}

func (t *limitTx) Define(ctx context.Context, specs []db.LimitSpec, now time.Time) error {
	def := pgsqlc.LimitDefineParams{Now: &now}
	for _, s := range specs {
		def.Scopes = append(def.Scopes, s.Scope)
		def.MaxRunning = append(def.MaxRunning, int32(s.MaxRunning))
		def.RateLimit = append(def.RateLimit, int32(s.RateLimit))
		def.RatePeriodMs = append(def.RatePeriodMs, s.RatePeriod.Milliseconds())
	}
	return t.q.LimitDefine(ctx, def)
}

func (t *limitTx) Lock(ctx context.Context, scopes []string) ([]*db.LimitRow, error) {
	var rows []pgsqlc.WorkflowLimit
	err := t.read(ctx, func(q *pgsqlc.Queries) (err error) {
		rows, err = q.LimitLock(ctx, scopes)
		return err
	})
	return limitsFromRows(rows), err
}

func (t *limitTx) LockSkip(ctx context.Context, scopes []string) ([]*db.LimitRow, error) {
	var rows []pgsqlc.WorkflowLimit
	err := t.read(ctx, func(q *pgsqlc.Queries) (err error) {
		rows, err = q.LimitLockSkip(ctx, scopes)
		return err
	})
	return limitsFromRows(rows), err
}

func (t *limitTx) Update(ctx context.Context, rows []*db.LimitRow) error {
	var p pgsqlc.LimitUpdateParams
	for _, r := range rows {
		p.Scopes = append(p.Scopes, r.Scope)
		p.Running = append(p.Running, int32(r.Running))
		p.RateWindow = append(p.RateWindow, timeOrZero(r.RateWindow))
		p.RateCount = append(p.RateCount, int32(r.RateCount))
	}
	return t.write(func(q *pgsqlc.Queries) error { return q.LimitUpdate(ctx, p) })
}

func (t *limitTx) Members(ctx context.Context, refs []db.InstanceRef) ([]admission.Member, error) {
	if out, ok := t.takePreloaded(refs); ok {
		return out, nil
	}
	p := memberListParams(refs)
	var rows []pgsqlc.WorkflowLimitMember
	err := t.read(ctx, func(q *pgsqlc.Queries) (err error) {
		rows, err = q.LimitMemberList(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return membersFromRows(rows), nil
}

// takePreloaded answers a Members call from the members preload read,
// once, when they cover every instance of refs.
func (t *limitTx) takePreloaded(refs []db.InstanceRef) ([]admission.Member, bool) {
	if t.preloaded == nil {
		return nil, false
	}
	var out []admission.Member
	for _, r := range refs {
		ms, ok := t.preloaded[r]
		if !ok {
			return nil, false
		}
		out = append(out, ms...)
	}
	t.preloaded = nil
	return out, true
}

func memberListParams(refs []db.InstanceRef) pgsqlc.LimitMemberListParams {
	var p pgsqlc.LimitMemberListParams
	for _, r := range refs {
		p.WorkflowNames = append(p.WorkflowNames, r.WorkflowName)
		p.InstanceIds = append(p.InstanceIds, r.ID)
	}
	return p
}

// membersFromRows are the admission members of member rows.
func membersFromRows(rows []pgsqlc.WorkflowLimitMember) []admission.Member {
	out := make([]admission.Member, len(rows))
	for i, r := range rows {
		out[i] = admission.Member{Ref: db.InstanceRef{WorkflowName: r.WorkflowName, ID: r.InstanceID}, Scope: r.Scope, State: r.State}
	}
	return out
}

func (t *limitTx) WriteMembers(ctx context.Context, ref db.InstanceRef, ws []admission.MemberWrite, now time.Time) error {
	p := pgsqlc.LimitMemberWriteParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID, Now: &now}
	for _, w := range ws {
		p.Scopes = append(p.Scopes, w.Scope)
		p.States = append(p.States, w.State)
		p.Blocked = append(p.Blocked, w.Blocked)
		p.RateUntil = append(p.RateUntil, timeOrZero(w.RateUntil))
	}
	return t.write(func(q *pgsqlc.Queries) error { return q.LimitMemberWrite(ctx, p) })
}

func (t *limitTx) SetLimited(ctx context.Context, refs []db.InstanceRef) error {
	for name, ids := range byWorkflow(refs) {
		if err := t.q.LimitSetLimitedMany(ctx, pgsqlc.LimitSetLimitedManyParams{WorkflowName: name, InstanceIds: ids}); err != nil {
			return err
		}
	}
	return nil
}

func (t *limitTx) WriteMembersMany(ctx context.Context, ws []admission.InstanceWrites, now time.Time) error {
	groups := map[string]*pgsqlc.LimitMemberWriteManyParams{}
	for _, iw := range ws {
		p := groups[iw.Ref.WorkflowName]
		if p == nil {
			p = &pgsqlc.LimitMemberWriteManyParams{WorkflowName: iw.Ref.WorkflowName, Now: &now}
			groups[iw.Ref.WorkflowName] = p
		}
		for _, w := range iw.Writes {
			p.InstanceIds = append(p.InstanceIds, iw.Ref.ID)
			p.Scopes = append(p.Scopes, w.Scope)
			p.States = append(p.States, w.State)
			p.Blocked = append(p.Blocked, w.Blocked)
			p.RateUntil = append(p.RateUntil, timeOrZero(w.RateUntil))
		}
	}
	for _, p := range groups {
		if err := t.write(func(q *pgsqlc.Queries) error { return q.LimitMemberWriteMany(ctx, *p) }); err != nil {
			return err
		}
	}
	return nil
}

// byWorkflow groups instance ids by workflow name.
func byWorkflow(refs []db.InstanceRef) map[string][]string {
	out := map[string][]string{}
	for _, r := range refs {
		out[r.WorkflowName] = append(out[r.WorkflowName], r.ID)
	}
	return out
}

func (t *limitTx) Waiting(ctx context.Context, scopes []string, max int) ([]db.InstanceRef, error) {
	var rows []pgsqlc.LimitWaitingRow
	err := t.read(ctx, func(q *pgsqlc.Queries) (err error) {
		rows, err = q.LimitWaiting(ctx, pgsqlc.LimitWaitingParams{Scopes: scopes, Max: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]db.InstanceRef, len(rows))
	for i, r := range rows {
		out[i] = db.InstanceRef{WorkflowName: r.WorkflowName, ID: r.InstanceID}
	}
	return out, nil
}

func (t *limitTx) LockWaiters(ctx context.Context, refs []db.InstanceRef) ([]db.InstanceRef, error) {
	var p pgsqlc.LimitLockWaitersParams
	for _, r := range refs {
		p.WorkflowNames = append(p.WorkflowNames, r.WorkflowName)
		p.InstanceIds = append(p.InstanceIds, r.ID)
	}
	var rows []pgsqlc.LimitLockWaitersRow
	err := t.read(ctx, func(q *pgsqlc.Queries) (err error) {
		rows, err = q.LimitLockWaiters(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	locked := make(map[db.InstanceRef]bool, len(rows))
	for _, r := range rows {
		locked[db.InstanceRef{WorkflowName: r.WorkflowName, ID: r.InstanceID}] = true
	}
	out := make([]db.InstanceRef, 0, len(rows))
	for _, r := range refs { // keep the oldest-first order
		if locked[r] {
			out = append(out, r)
		}
	}
	return out, nil
}

func (t *limitTx) TaskAdmit(ctx context.Context, ref db.InstanceRef, runAt time.Time, due bool) error {
	admit := pgsqlc.LimitTaskAdmitParams{RunAt: runAt, WorkflowName: ref.WorkflowName, InstanceID: ref.ID}
	if err := t.write(func(q *pgsqlc.Queries) error { return q.LimitTaskAdmit(ctx, admit) }); err != nil {
		return err
	}
	if !due {
		return nil
	}
	notify := pgsqlc.WakeNotifyParams{Channel: t.channel, WorkflowName: ref.WorkflowName}
	return t.write(func(q *pgsqlc.Queries) error { return q.WakeNotify(ctx, notify) })
}

func (t *limitTx) TaskAdmitLeased(ctx context.Context, ref db.InstanceRef, lease *db.CreateLease, now time.Time) (*db.CreateResult, error) {
	var (
		row   pgsqlc.LimitTaskAdmitLeasedRow
		found bool
	)
	arg := pgsqlc.LimitTaskAdmitLeasedParams{
		Now: now, WorkflowName: ref.WorkflowName, InstanceID: ref.ID, LockOwner: lease.Owner, LockedUntil: lease.LockedUntil,
		Queues: emptyIfNil(lease.Queues), LogStarted: t.logStarted,
	}
	err := t.read(ctx, func(q *pgsqlc.Queries) error {
		r, err := q.LimitTaskAdmitLeased(ctx, arg)
		if isNoRows(err) {
			return nil
		}
		row, found = r, err == nil
		return err
	})
	if err != nil || !found {
		return nil, err
	}
	inst := instanceFromRow(&pgsqlc.WorkflowInstance{
		WorkflowName: row.WorkflowName, InstanceID: row.InstanceID, Status: row.Status,
		Params: row.Params, Output: row.Output, ErrorName: row.ErrorName, ErrorMessage: row.ErrorMessage,
		PauseRequested: row.PauseRequested, RunNumber: row.RunNumber, CreatedAt: row.CreatedAt,
		UpdatedAt: row.UpdatedAt, StartedAt: row.StartedAt, CompletedAt: row.CompletedAt,
		RetentionUntil: row.RetentionUntil, Metadata: row.Metadata, Limited: row.Limited,
		Namespace: row.Namespace, Queue: row.Queue, Priority: row.Priority, DedupeKey: row.DedupeKey,
		DeadlineAt: row.DeadlineAt, RunAttempt: row.RunAttempt,
		ParentWorkflowName: row.ParentWorkflowName, ParentInstanceID: row.ParentInstanceID,
		ParentRunNumber: row.ParentRunNumber, ParentStepKey: row.ParentStepKey, ParentPolicy: row.ParentPolicy,
		TraceContext: row.TraceContext,
	})
	task := leasedTask(row.TaskID, inst, lease)
	task.RunAt = now
	return &db.CreateResult{Instance: inst, LeasedTask: task}, nil
}

func (t *limitTx) TaskDelete(ctx context.Context, ref db.InstanceRef) error {
	return t.q.LimitTaskDelete(ctx, pgsqlc.LimitTaskDeleteParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID})
}

// limitsFromRows is limitFromRow of each row.
func limitsFromRows(rows []pgsqlc.WorkflowLimit) []*db.LimitRow {
	out := make([]*db.LimitRow, len(rows))
	for i := range rows {
		out[i] = limitFromRow(&rows[i])
	}
	return out
}

// limitFromRow is the db.LimitRow of a workflow_limit row.
func limitFromRow(r *pgsqlc.WorkflowLimit) *db.LimitRow {
	out := &db.LimitRow{Scope: r.Scope, Running: int(r.Running), RateWindow: utcPtr(r.RateWindow), RateCount: int(r.RateCount), UpdatedAt: r.UpdatedAt.UTC()}
	if r.MaxRunning != nil {
		out.MaxRunning = int(*r.MaxRunning)
	}
	if r.RateLimit != nil && r.RatePeriodMs != nil {
		out.RateLimit = int(*r.RateLimit)
		out.RatePeriod = time.Duration(*r.RatePeriodMs) * time.Millisecond
	}
	return out
}

// limitNow is the time admission decides on: the caller's, or this
// process's clock when the caller leaves it to the database (the rate
// limits' windows are computed in Go).
func limitNow(t *time.Time) time.Time {
	if t != nil {
		return *t
	}
	return time.Now()
}

// QueueLimitSet writes a queue's limits, replacing the ones it had.
func (s *Store) QueueLimitSet(ctx context.Context, p *db.QueueLimitSetParams) (*db.QueueLimits, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("setting queue limits: %w", err)
	}
	arg := pgsqlc.QueueLimitSetParams{Scope: db.QueueScope(p.Name), Now: p.Now}
	if p.MaxRunning > 0 {
		v := int32(p.MaxRunning)
		arg.MaxRunning = &v
	}
	if p.RateLimit > 0 {
		v, ms := int32(p.RateLimit), max(p.RatePeriod.Milliseconds(), 1)
		arg.RateLimit, arg.RatePeriodMs = &v, &ms
	}
	row, err := s.queries.QueueLimitSet(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("setting queue limits: %w", interpretError(err))
	}
	return db.QueueLimitsFromRow(limitFromRow(&row)), nil
}

// QueueLimitGet returns a queue's limits or db.ErrNotFound.
func (s *Store) QueueLimitGet(ctx context.Context, name string) (*db.QueueLimits, error) {
	row, err := s.queries.LimitGet(ctx, db.QueueScope(name))
	if err != nil {
		return nil, fmt.Errorf("getting queue limits: %w", interpretError(err))
	}
	return db.QueueLimitsFromRow(limitFromRow(&row)), nil
}

// QueueLimitList returns the limits of every queue that has a row, by name.
func (s *Store) QueueLimitList(ctx context.Context) ([]*db.QueueLimits, error) {
	start, end := db.QueueScopePrefix()
	rows, err := s.queries.LimitListPrefix(ctx, pgsqlc.LimitListPrefixParams{Prefix: start, PrefixEnd: end})
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
// in one query; a list with none costs nothing.
func fillWaitingFor(ctx context.Context, q *pgsqlc.Queries, list []*db.Instance) error {
	var p pgsqlc.LimitWaitingForParams
	byRef := map[db.InstanceRef]*db.Instance{}
	for _, inst := range list {
		if inst.Limited && inst.Status == "queued" {
			ref := db.InstanceRef{WorkflowName: inst.WorkflowName, ID: inst.ID}
			byRef[ref] = inst
			p.WorkflowNames = append(p.WorkflowNames, ref.WorkflowName)
			p.InstanceIds = append(p.InstanceIds, ref.ID)
		}
	}
	if len(byRef) == 0 {
		return nil
	}
	rows, err := q.LimitWaitingFor(ctx, p)
	if err != nil {
		return err
	}
	for _, r := range rows {
		inst := byRef[db.InstanceRef{WorkflowName: r.WorkflowName, ID: r.InstanceID}]
		if inst == nil || inst.WaitingFor != nil {
			continue
		}
		w := &db.WaitingFor{Kind: db.LimitKindConcurrency, Scope: r.Scope}
		if r.State == admission.StateWaiting {
			if r.MaxRunning != nil {
				w.Max = int(*r.MaxRunning)
			}
		} else {
			w.Kind, w.Until = db.LimitKindRate, utcPtr(r.RateUntil)
			if r.RateLimit != nil && r.RatePeriodMs != nil {
				w.Max, w.Period = int(*r.RateLimit), time.Duration(*r.RatePeriodMs)*time.Millisecond
			}
		}
		inst.WaitingFor = w
	}
	return nil
}
