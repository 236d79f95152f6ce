package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
)

// defaultListLimit is the page size of the lists when none is given: the
// module's one default (internal/paging).
const defaultListLimit = paging.DefaultPageSize

// placement is where a create puts its instances: their namespace, queue
// and priority.
type placement struct {
	namespace string
	queue     string
	priority  int64
}

func newPlacement(namespace, queue string, priority int) placement {
	namespace, queue = db.CreatePlacement(namespace, queue)
	return placement{namespace: namespace, queue: queue, priority: int64(priority)}
}

// InstanceCreate inserts a queued instance and its first task (kind run, due
// now) in one transaction, with a create hook entry when p.RecordHooks is set.
// It returns db.ErrAlreadyExists when the id is taken. With a dedupe key it
// returns the active instance that holds the key instead, if any (the write
// transaction excludes every other writer, so the look-up and the insert
// cannot race); such a create never starts eagerly.
func (s *Store) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	var inst db.CreateResult
	at := newPlacement(p.Namespace, p.Queue, p.Priority)
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var err error
		if inst, err = s.instanceCreateTx(ctx, q, p, at); err != nil {
			return err
		}
		if inst.Deduplicated {
			return nil
		}
		if err := s.logCreated(ctx, q, p.WorkflowName, &inst, micros(inst.Instance.CreatedAt)); err != nil {
			return err
		}
		if err := setParent(ctx, q, p.WorkflowName, p.ID, p.Parent, inst.Instance); err != nil {
			return err
		}
		return setTraceContext(ctx, q, p.WorkflowName, inst.Instance, p.TraceContext)
	})
	if err != nil {
		return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return inst, nil
}

// instanceCreateTx is InstanceCreate inside the caller's write transaction.
func (s *Store) instanceCreateTx(ctx context.Context, q *litesqlc.Queries, p *db.InstanceCreateParams, at placement) (db.CreateResult, error) {
	now, err := txNow(ctx, q, p.Now)
	if err != nil {
		return db.CreateResult{}, err
	}
	if p.DedupeKey != "" {
		held, ok, err := dedupeHolder(ctx, q, at.namespace, p.WorkflowName, p.DedupeKey)
		if err != nil || ok {
			return held, err
		}
	}
	item := db.InstanceCreateItem{ID: p.ID, Params: p.Params, Metadata: p.Metadata, DedupeKey: p.DedupeKey, Limits: p.Limits}
	if len(p.Limits) > 0 {
		inst, _, err := insertLimited(ctx, q, p.WorkflowName, &item, at, now, p.RecordHooks, false)
		if err != nil {
			return inst, err
		}
		return inst, setDeadline(ctx, q, p.WorkflowName, inst.Instance, p.DeadlineAt)
	}
	plan := transition.Create(p.Lease != nil && p.DedupeKey == "", p.RecordHooks)
	if plan.Leased {
		inst, ok, err := insertLeased(ctx, q, p.WorkflowName, &item, at, now, p.Lease)
		if err != nil {
			return inst, err
		}
		if !ok {
			return inst, db.ErrAlreadyExists
		}
		if err := setDeadline(ctx, q, p.WorkflowName, inst.Instance, p.DeadlineAt); err != nil {
			return inst, err
		}
		return inst, recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, now)
	}
	row, err := q.InstanceInsert(ctx, litesqlc.InstanceInsertParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.ID,
		Params:       jsonArg(p.Params),
		Metadata:     jsonArg(p.Metadata),
		Now:          now,
		Namespace:    at.namespace,
		Queue:        at.queue,
		Priority:     at.priority,
		DedupeKey:    textArg(p.DedupeKey),
	})
	if err != nil {
		return db.CreateResult{}, err
	}
	if err := q.TaskInsert(ctx, litesqlc.TaskInsertParams{
		WorkflowName:     p.WorkflowName,
		InstanceID:       p.ID,
		Now:              now,
		Queue:            at.queue,
		InstancePriority: at.priority,
	}); err != nil {
		return db.CreateResult{}, err
	}
	if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, now); err != nil {
		return db.CreateResult{}, err
	}
	inst := db.CreateResult{Instance: instanceFromRow(&row)}
	return inst, setDeadline(ctx, q, p.WorkflowName, inst.Instance, p.DeadlineAt)
}

// dedupeHolder returns the active instance of the namespace and workflow
// that holds the dedupe key, as a deduplicated create's result, and whether
// there is one.
func dedupeHolder(ctx context.Context, q *litesqlc.Queries, namespace, workflowName, key string) (db.CreateResult, bool, error) {
	row, err := q.InstanceGetByDedupeKey(ctx, litesqlc.InstanceGetByDedupeKeyParams{
		Namespace: namespace, WorkflowName: workflowName, DedupeKey: &key,
	})
	if isNoRows(err) {
		return db.CreateResult{}, false, nil
	}
	if err != nil {
		return db.CreateResult{}, false, err
	}
	return db.CreateResult{Instance: instanceFromRow(&row), Deduplicated: true}, true, nil
}

// InstanceCreateMany inserts, in one transaction, the instances whose ids are
// free together with their tasks (and, when p.RecordHooks is set, a create
// hook entry each), and returns those in input order. Existing ids, and
// repeats of an id within the batch, are skipped; an item whose dedupe key
// an active instance holds (or an earlier item) is replaced by that
// instance, marked Deduplicated. The rows go in one statement each: SQLite
// has no array parameters, and within the one transaction on the embedded
// database a statement costs microseconds.
func (s *Store) InstanceCreateMany(ctx context.Context, p *db.InstanceCreateManyParams) ([]db.CreateResult, error) {
	if len(p.Instances) == 0 {
		return []db.CreateResult{}, nil
	}
	var created []db.CreateResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		created, err = s.createMany(ctx, q, p, "", now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating instances: %w", interpretError(err))
	}
	return created, nil
}

// createMany is InstanceCreateMany in the caller's transaction at now,
// with defaultQueue the queue of an item without one (then
// workflow.DefaultQueue).
func (s *Store) createMany(ctx context.Context, q *litesqlc.Queries, p *db.InstanceCreateManyParams, defaultQueue string, now int64) ([]db.CreateResult, error) {
	namespace, _ := db.CreatePlacement(p.Namespace, "")
	created := make([]db.CreateResult, 0, len(p.Instances))
	var log lifecycleBuf
	for i, item := range p.Instances {
		at := newPlacement(namespace, cmp.Or(item.Queue, defaultQueue), item.Priority)
		if item.DedupeKey != "" {
			held, ok, err := dedupeHolder(ctx, q, at.namespace, p.WorkflowName, item.DedupeKey)
			if err != nil {
				return nil, err
			}
			if ok {
				if held.Instance.ID != item.ID {
					created = append(created, held)
				}
				continue
			}
		}
		if len(item.Limits) > 0 {
			inst, ok, err := insertLimited(ctx, q, p.WorkflowName, &item, at, now, p.RecordHooks, true)
			if err != nil {
				return nil, err
			}
			if ok {
				if err := setDeadline(ctx, q, p.WorkflowName, inst.Instance, item.DeadlineAt); err != nil {
					return nil, err
				}
				if err := setTraceContext(ctx, q, p.WorkflowName, inst.Instance, item.TraceContext); err != nil {
					return nil, err
				}
				s.bufferCreated(&log, p.WorkflowName, &inst, now)
				created = append(created, inst)
			}
			continue
		}
		plan := transition.Create(p.Lease != nil && i < p.Lease.Max, p.RecordHooks)
		var lease *db.CreateLease
		if plan.Leased {
			lease = p.Lease
		}
		inst, ok, err := insertIfAbsent(ctx, q, p.WorkflowName, &item, at, now, lease)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // the id is taken
		}
		if err := setDeadline(ctx, q, p.WorkflowName, inst.Instance, item.DeadlineAt); err != nil {
			return nil, err
		}
		if err := setTraceContext(ctx, q, p.WorkflowName, inst.Instance, item.TraceContext); err != nil {
			return nil, err
		}
		if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, item.ID, now); err != nil {
			return nil, err
		}
		s.bufferCreated(&log, p.WorkflowName, &inst, now)
		created = append(created, inst)
	}
	// Every created instance's events, written together.
	if err := log.flush(ctx, q); err != nil {
		return nil, err
	}
	return created, nil
}

// setDeadline writes the deadline of a created instance that has one (a
// statement of its own, so that a create without one runs none more) and
// records it on inst.
func setDeadline(ctx context.Context, q *litesqlc.Queries, workflowName string, inst *db.Instance, deadline *time.Time) error {
	if deadline == nil {
		return nil
	}
	d := timeFromMicros(micros(*deadline))
	inst.DeadlineAt = &d
	return q.InstanceSetDeadline(ctx, litesqlc.InstanceSetDeadlineParams{
		DeadlineAt: microsPtr(&d), WorkflowName: workflowName, InstanceID: inst.ID,
	})
}

// setTraceContext writes the trace context of a created instance that has
// one (a statement of its own, so that a create without one runs none more)
// and records it on inst.
func setTraceContext(ctx context.Context, q *litesqlc.Queries, workflowName string, inst *db.Instance, tc string) error {
	if tc == "" {
		return nil
	}
	inst.TraceContext = tc
	return q.InstanceSetTraceContext(ctx, litesqlc.InstanceSetTraceContextParams{
		TraceContext: &tc, WorkflowName: workflowName, InstanceID: inst.ID,
	})
}

// insertIfAbsent inserts an instance with its first task, leased when
// lease is set, unless the id is taken, in which case it reports false and
// writes nothing.
func insertIfAbsent(ctx context.Context, q *litesqlc.Queries, workflowName string, item *db.InstanceCreateItem, at placement, now int64, lease *db.CreateLease) (db.CreateResult, bool, error) {
	if lease != nil {
		return insertLeased(ctx, q, workflowName, item, at, now, lease)
	}
	row, err := q.InstanceInsertIfAbsent(ctx, litesqlc.InstanceInsertIfAbsentParams{
		WorkflowName: workflowName,
		InstanceID:   item.ID,
		Params:       jsonArg(item.Params),
		Metadata:     jsonArg(item.Metadata),
		Now:          now,
		Namespace:    at.namespace,
		Queue:        at.queue,
		Priority:     at.priority,
		DedupeKey:    textArg(item.DedupeKey),
	})
	if isNoRows(err) {
		return db.CreateResult{}, false, nil
	}
	if err != nil {
		return db.CreateResult{}, false, err
	}
	if err := q.TaskInsert(ctx, litesqlc.TaskInsertParams{
		WorkflowName:     workflowName,
		InstanceID:       item.ID,
		Now:              now,
		Queue:            at.queue,
		InstancePriority: at.priority,
	}); err != nil {
		return db.CreateResult{}, false, err
	}
	return db.CreateResult{Instance: instanceFromRow(&row)}, true, nil
}

// insertLimited inserts a limited instance and admits it (package
// admission), giving it its task when admitted; with ifAbsent a taken id
// reports false and writes nothing.
func insertLimited(ctx context.Context, q *litesqlc.Queries, workflowName string, item *db.InstanceCreateItem, pl placement, now int64, recordHooks, ifAbsent bool) (db.CreateResult, bool, error) {
	arg := litesqlc.InstanceInsertIfAbsentParams{
		WorkflowName: workflowName, InstanceID: item.ID,
		Params: jsonArg(item.Params), Metadata: jsonArg(item.Metadata), Now: now,
		Namespace: pl.namespace, Queue: pl.queue, Priority: pl.priority, DedupeKey: textArg(item.DedupeKey),
	}
	row, err := q.InstanceInsertIfAbsent(ctx, arg)
	if isNoRows(err) {
		if ifAbsent {
			return db.CreateResult{}, false, nil
		}
		return db.CreateResult{}, false, db.ErrAlreadyExists
	}
	if err != nil {
		return db.CreateResult{}, false, err
	}
	at := timeFromMicros(now)
	ref := db.InstanceRef{WorkflowName: workflowName, ID: item.ID}
	res, err := admission.Create(ctx, limitTx{q: q}, ref, item.Limits, at)
	if err != nil {
		return db.CreateResult{}, false, err
	}
	if res.Admitted {
		runAt := micros(res.RunAt)
		if err := q.TaskInsert(ctx, litesqlc.TaskInsertParams{
			WorkflowName: workflowName, InstanceID: item.ID, Now: runAt, Queue: pl.queue, InstancePriority: pl.priority,
		}); err != nil {
			return db.CreateResult{}, false, err
		}
	}
	// The create hook is recorded for every created instance, admitted or
	// waiting for a slot, as on Postgres.
	if err := recordHook(ctx, q, transition.Create(false, recordHooks).Hook, workflowName, item.ID, now); err != nil {
		return db.CreateResult{}, false, err
	}
	inst := instanceFromRow(&row)
	inst.Limited = true
	inst.WaitingFor = res.Waiting // as InstanceGet reports it; logCreated logs the wait
	return db.CreateResult{Instance: inst}, true, nil
}

// insertLeased inserts the instance of an eager start, running, and its
// first task leased to lease.Owner, unless the id is taken, in which case it
// reports false and writes nothing.
func insertLeased(ctx context.Context, q *litesqlc.Queries, workflowName string, item *db.InstanceCreateItem, at placement, now int64, lease *db.CreateLease) (db.CreateResult, bool, error) {
	row, err := q.InstanceInsertStartedIfAbsent(ctx, litesqlc.InstanceInsertStartedIfAbsentParams{
		WorkflowName: workflowName,
		InstanceID:   item.ID,
		Params:       jsonArg(item.Params),
		Metadata:     jsonArg(item.Metadata),
		Now:          now,
		Namespace:    at.namespace,
		Queue:        at.queue,
		Priority:     at.priority,
		DedupeKey:    textArg(item.DedupeKey),
	})
	if isNoRows(err) {
		return db.CreateResult{}, false, nil
	}
	if err != nil {
		return db.CreateResult{}, false, err
	}
	task, err := q.TaskInsertLeased(ctx, litesqlc.TaskInsertLeasedParams{
		WorkflowName:     workflowName,
		InstanceID:       item.ID,
		Now:              now,
		LockOwner:        lease.Owner,
		LockedUntil:      micros(lease.LockedUntil),
		Queue:            at.queue,
		InstancePriority: at.priority,
	})
	if err != nil {
		return db.CreateResult{}, false, err
	}
	return db.CreateResult{Instance: instanceFromRow(&row), LeasedTask: taskFromRow(&task)}, true, nil
}

// InstanceGet returns one instance or db.ErrNotFound.
func (s *Store) InstanceGet(ctx context.Context, ref db.InstanceRef) (*db.Instance, error) {
	row, err := s.queriesFor(ctx, false).InstanceGet(ctx, litesqlc.InstanceGetParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
		Namespace:    ref.Namespace,
	})
	if err != nil {
		return nil, fmt.Errorf("getting instance: %w", interpretError(err))
	}
	inst := instanceFromRow(&row)
	if err := fillWaitingFor(ctx, s.queriesFor(ctx, false), []*db.Instance{inst}); err != nil {
		return nil, fmt.Errorf("getting instance: %w", interpretError(err))
	}
	return inst, nil
}

// InstanceList returns a page of instances, newest update first, continuing
// after p.Cursor when it is set.
func (s *Store) InstanceList(ctx context.Context, p *db.InstanceListParams) ([]*db.Instance, error) {
	limit := int64(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	var statuses *string
	if len(p.Statuses) > 0 {
		list := listArg(p.Statuses)
		statuses = &list
	}
	// The first page starts after a key past every row: no time is stored
	// as the largest integer.
	cursor := db.InstanceCursor{}
	cursorAt := int64(math.MaxInt64)
	if p.Cursor != nil {
		cursor = *p.Cursor
		cursorAt = micros(cursor.UpdatedAt)
	}

	var (
		rows []litesqlc.WorkflowInstance
		list []*db.Instance
	)
	// The page and what holds its queued limited instances back come from
	// one snapshot.
	err := s.inReadTx(ctx, func(q *litesqlc.Queries) error {
		if p.OmitPayloads || p.PayloadBudget > 0 {
			var err error
			if list, err = s.listPageBounded(ctx, q, p, statuses, cursor, cursorAt, limit); err != nil {
				return err
			}
			return fillWaitingFor(ctx, q, list)
		}
		var err error
		rows, err = s.listPage(ctx, q, p, statuses, cursor, cursorAt, limit)
		if err != nil {
			return err
		}
		list = make([]*db.Instance, len(rows))
		for i := range rows {
			list[i] = instanceFromRow(&rows[i])
		}
		return fillWaitingFor(ctx, q, list)
	})
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", interpretError(err))
	}
	return list, nil
}

// listPage reads one page of InstanceList.
func (s *Store) listPage(ctx context.Context, q *litesqlc.Queries, p *db.InstanceListParams, statuses *string, cursor db.InstanceCursor, cursorAt, limit int64) (rows []litesqlc.WorkflowInstance, err error) {
	if p.WorkflowName == "" {
		rows, err = q.InstanceList(ctx, litesqlc.InstanceListParams{
			Statuses:           statuses,
			Namespace:          textArg(p.Namespace),
			Queue:              textArg(p.Queue),
			CursorUpdatedAt:    cursorAt,
			CursorWorkflowName: cursor.WorkflowName,
			CursorInstanceID:   cursor.ID,
			Max:                limit,
		})
	} else {
		rows, err = q.InstanceListWorkflow(ctx, litesqlc.InstanceListWorkflowParams{
			WorkflowName:       p.WorkflowName,
			Statuses:           statuses,
			Namespace:          textArg(p.Namespace),
			Queue:              textArg(p.Queue),
			CursorUpdatedAt:    cursorAt,
			CursorWorkflowName: cursor.WorkflowName,
			CursorInstanceID:   cursor.ID,
			Max:                limit,
		})
	}
	return rows, err
}

// listPageBounded reads one page of InstanceList with p.OmitPayloads or
// p.PayloadBudget: InstanceListBounded (or its form for one workflow)
// reads the page's payloads within the budget only.
func (s *Store) listPageBounded(ctx context.Context, q *litesqlc.Queries, p *db.InstanceListParams, statuses *string, cursor db.InstanceCursor, cursorAt, limit int64) ([]*db.Instance, error) {
	if p.WorkflowName == "" {
		rows, err := q.InstanceListBounded(ctx, litesqlc.InstanceListBoundedParams{
			OmitPayloads:       boolArg(p.OmitPayloads),
			PayloadBudget:      int64(p.PayloadBudget),
			Statuses:           statuses,
			Namespace:          textArg(p.Namespace),
			Queue:              textArg(p.Queue),
			CursorUpdatedAt:    cursorAt,
			CursorWorkflowName: cursor.WorkflowName,
			CursorInstanceID:   cursor.ID,
			Max:                limit,
		})
		if err != nil {
			return nil, err
		}
		list := make([]*db.Instance, len(rows))
		for i := range rows {
			list[i] = instanceFromBoundedRow((*litesqlc.InstanceListWorkflowBoundedRow)(&rows[i]))
		}
		return list, nil
	}
	rows, err := q.InstanceListWorkflowBounded(ctx, litesqlc.InstanceListWorkflowBoundedParams{
		OmitPayloads:       boolArg(p.OmitPayloads),
		PayloadBudget:      int64(p.PayloadBudget),
		WorkflowName:       p.WorkflowName,
		Statuses:           statuses,
		Namespace:          textArg(p.Namespace),
		Queue:              textArg(p.Queue),
		CursorUpdatedAt:    cursorAt,
		CursorWorkflowName: cursor.WorkflowName,
		CursorInstanceID:   cursor.ID,
		Max:                limit,
	})
	if err != nil {
		return nil, err
	}
	list := make([]*db.Instance, len(rows))
	for i := range rows {
		list[i] = instanceFromBoundedRow(&rows[i])
	}
	return list, nil
}

// The management transitions each apply the rule of their name in package
// transition, which says what they do, in one write transaction
// (instanceChange).

// InstancePause applies transition.Pause.
func (s *Store) InstancePause(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Pause, "pausing instance")
}

// InstanceResume applies transition.Resume.
func (s *Store) InstanceResume(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Resume, "resuming instance")
}

// InstanceTerminate applies transition.Terminate.
//
// Its children with the terminate policy that have not ended are
// terminated in the same transaction, recursively (terminateChildren).
func (s *Store) InstanceTerminate(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Terminate, "terminating instance")
}

// InstanceRestart applies transition.Restart; earlier runs' steps and
// events stay for audit.
//
// The children of its earlier runs with the terminate policy that have not
// ended are terminated in the same transaction, recursively
// (terminateChildren): the new run never reads their ends.
func (s *Store) InstanceRestart(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Restart, "restarting instance")
}

// instanceChange applies a management transition's rule to an instance
// inside a write transaction, which no other writer can interleave with,
// and returns the instance after it.
func (s *Store) instanceChange(ctx context.Context, p *db.InstanceChangeParams, rule transition.ChangeFunc, doing string) (*db.Instance, error) {
	return s.instanceChangeWith(ctx, p, rule, doing, nil)
}

// instanceChangeWith is instanceChange with a step of the caller's, run in
// the change's transaction before the rule: it returns the rule to apply
// (nil leaves the instance as it is).
func (s *Store) instanceChangeWith(ctx context.Context, p *db.InstanceChangeParams, rule transition.ChangeFunc, doing string,
	before func(q *litesqlc.Queries, row *litesqlc.WorkflowInstance) (transition.ChangeFunc, error)) (*db.Instance, error) {
	var inst *db.Instance
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var (
			plan transition.ChangePlan
			err  error
		)
		inst, plan, err = s.instanceChangeTx(ctx, q, p, rule, before)
		switch {
		case err != nil:
			return err
		case plan.Status == dftype.StatusTerminated:
			if n := db.TerminatedChildNotify(inst, p.RecordHooks); n != nil {
				if _, err := s.notifyParent(ctx, q, n, p.Now); err != nil {
					return err
				}
			}
			return s.terminateChildren(ctx, q, p)
		case plan.NewRun:
			return s.terminateChildren(ctx, q, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, interpretError(err))
	}
	return inst, nil
}

// instanceChangeTx is instanceChange inside the caller's write
// transaction, with before (nil for none) as in instanceChangeWith. It
// returns the instance after the change and the plan the change wrote
// (the zero plan when it wrote none).
func (s *Store) instanceChangeTx(ctx context.Context, q *litesqlc.Queries, p *db.InstanceChangeParams, rule transition.ChangeFunc,
	before func(q *litesqlc.Queries, row *litesqlc.WorkflowInstance) (transition.ChangeFunc, error)) (*db.Instance, transition.ChangePlan, error) {
	var (
		inst    *db.Instance
		applied transition.ChangePlan
	)
	err := func() error {
		row, err := q.InstanceGet(ctx, litesqlc.InstanceGetParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Namespace:    p.Namespace,
		})
		if err != nil {
			return err
		}
		rule := rule
		if before != nil {
			if rule, err = before(q, &row); err != nil || rule == nil {
				inst = instanceFromRow(&row)
				return err
			}
		}
		from := dftype.InstanceStatus(row.Status)
		plan, err := rule(from, p.RecordHooks)
		if err != nil || plan.Status == "" {
			inst = instanceFromRow(&row)
			return err
		}
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		if plan.NewRun {
			row, err = q.InstanceRestart(ctx, litesqlc.InstanceRestartParams{
				Now:          now,
				WorkflowName: p.WorkflowName,
				InstanceID:   p.ID,
			})
		} else {
			row, err = q.InstanceSetStatus(ctx, litesqlc.InstanceSetStatusParams{
				Status:         string(plan.Status),
				PauseRequested: boolArg(plan.PauseRequested),
				Now:            now,
				WorkflowName:   p.WorkflowName,
				InstanceID:     p.ID,
			})
		}
		if err != nil {
			return err
		}
		run := runRef{workflowName: p.WorkflowName, instanceID: p.ID, runNumber: row.RunNumber, queue: row.Queue, priority: row.Priority}
		if err := applyTask(ctx, q, run, db.TaskRef{}, &plan.Task, now, now); err != nil {
			return err
		}
		var waiting *db.WaitingFor
		if row.Limited == 1 {
			if waiting, err = limitChange(ctx, q, p, from, &plan, timeFromMicros(now)); err != nil {
				return err
			}
		}
		inst, applied = instanceFromRow(&row), plan
		if e, ok := transition.ChangeEvent(&plan, p.WorkflowName, p.ID, int(row.RunNumber), time.Time{}); ok {
			events := []db.LifecycleEvent{e}
			if waiting != nil {
				events = append(events, transition.LimitWaitEvent(p.WorkflowName, p.ID, int(row.RunNumber), waiting, time.Time{}))
			}
			if err := s.logLifecycle(ctx, q, now, events...); err != nil {
				return err
			}
		}
		return recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, now)
	}()
	return inst, applied, err
}

// limitChange applies a management change's consequences on a limited
// instance's slots, in the change's transaction: a terminate gives them
// back, a restart takes them again (admission.Restart), a resume of an
// instance still waiting for a slot leaves it without a task. It returns
// what a restart made the new run wait for (admission.Restart), else nil.
func limitChange(ctx context.Context, q *litesqlc.Queries, p *db.InstanceChangeParams, from dftype.InstanceStatus, plan *transition.ChangePlan, now time.Time) (*db.WaitingFor, error) {
	tx := limitTx{q: q}
	ref := db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.ID}
	switch {
	case plan.NewRun:
		return admission.Restart(ctx, tx, ref, now)
	case plan.Status.Terminal() && !from.Terminal():
		_, _, err := admission.Release(ctx, tx, ref, now, nil)
		return nil, err
	case plan.Task.Op == transition.TaskRequeue:
		return nil, admission.Resume(ctx, tx, ref)
	}
	return nil, nil
}

// logCreated logs the creation of inst (and its start, when its task is
// leased, or its wait, when a limit holds it back) at now, in the
// create's transaction.
func (s *Store) logCreated(ctx context.Context, q *litesqlc.Queries, workflowName string, inst *db.CreateResult, now int64) error {
	var log lifecycleBuf
	s.bufferCreated(&log, workflowName, inst, now)
	return log.flush(ctx, q)
}

// bufferCreated adds the events of inst's creation (and its start, when its
// task is leased, or its wait, when a limit holds it back) at now to log.
func (s *Store) bufferCreated(log *lifecycleBuf, workflowName string, inst *db.CreateResult, now int64) {
	plan := transition.Create(inst.LeasedTask != nil, false)
	s.bufferLifecycle(log, now, transition.CreateEvents(&plan, workflowName, inst.Instance.ID, inst.Instance.WaitingFor, time.Time{})...)
}
