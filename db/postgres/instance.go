package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/admission"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
)

// defaultListLimit is the page size of the lists when none is given: the
// module's one default (internal/paging).
const defaultListLimit = paging.DefaultPageSize

// InstanceCreate inserts a queued instance and its first task (kind run, due
// now) in one transaction, with a create hook entry when p.RecordHooks is set,
// and notifies the wake channel. It returns db.ErrAlreadyExists when the id is
// taken.
func (s *Store) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	if len(p.Limits) > 0 {
		return s.instanceCreateLimited(ctx, p)
	}
	if p.DedupeKey != "" {
		return s.instanceCreateDedupe(ctx, p)
	}
	plan := transition.Create(p.Lease != nil, p.RecordHooks)
	if plan.Leased {
		return s.instanceCreateLeased(ctx, p, &plan)
	}
	namespace, queue := db.CreatePlacement(p.Namespace, p.Queue)
	var inst *db.Instance
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.InstanceInsert(ctx, pgsqlc.InstanceInsertParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Params:       jsonArg(p.Params),
			Metadata:     jsonArg(p.Metadata),
			Now:          p.Now,
			Namespace:    namespace,
			Queue:        queue,
			Priority:     int32(p.Priority),
		})
		if err != nil {
			return err
		}
		inst, err = s.createInserted(ctx, q, p, &plan, &row)
		return err
	})
	if err != nil {
		return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return db.CreateResult{Instance: inst}, nil
}

// instanceCreateDedupe is InstanceCreate with a dedupe key: the insert
// does nothing when an active instance of the namespace and workflow holds
// the key (a concurrent insert of the key waits for the other's commit),
// and that instance is returned instead. Should the holder end between the
// two statements, the create is tried again. It never starts eagerly.
func (s *Store) instanceCreateDedupe(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	plan := transition.Create(false, p.RecordHooks)
	namespace, queue := db.CreatePlacement(p.Namespace, p.Queue)
	for range 3 {
		var res db.CreateResult
		err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
			row, err := q.InstanceInsertDedupe(ctx, pgsqlc.InstanceInsertDedupeParams{
				WorkflowName: p.WorkflowName,
				InstanceID:   p.ID,
				Params:       jsonArg(p.Params),
				Metadata:     jsonArg(p.Metadata),
				Now:          p.Now,
				Namespace:    namespace,
				Queue:        queue,
				Priority:     int32(p.Priority),
				DedupeKey:    p.DedupeKey,
			})
			if isNoRows(err) {
				held, err := q.InstanceGetByDedupeKey(ctx, pgsqlc.InstanceGetByDedupeKeyParams{
					Namespace: namespace, WorkflowName: p.WorkflowName, DedupeKey: &p.DedupeKey,
				})
				if isNoRows(err) {
					return nil // the holder ended meanwhile: try again
				}
				if err != nil {
					return err
				}
				res = db.CreateResult{Instance: instanceFromRow(&held), Deduplicated: true}
				return nil
			}
			if err != nil {
				return err
			}
			inst, err := s.createInserted(ctx, q, p, &plan, &row)
			res = db.CreateResult{Instance: inst}
			return err
		})
		if err != nil {
			return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
		}
		if res.Instance != nil {
			return res, nil
		}
	}
	return db.CreateResult{}, fmt.Errorf("creating instance: the holder of dedupe key %q kept changing", p.DedupeKey)
}

// createInserted completes a create whose instance row has just been
// inserted (row), in the caller's transaction: the first task (kind run,
// due now, in the row's queue), the create hook entry when plan says so,
// the deadline, parent and trace context, and the wake notification. It
// returns the instance.
func (s *Store) createInserted(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateParams, plan *transition.CreatePlan, row *pgsqlc.WorkflowInstance) (*db.Instance, error) {
	if err := q.TaskInsert(ctx, pgsqlc.TaskInsertParams{
		WorkflowName:     p.WorkflowName,
		InstanceID:       p.ID,
		Now:              p.Now,
		Queue:            row.Queue,
		InstancePriority: int16(row.Priority),
	}); err != nil {
		return nil, err
	}
	if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, p.Now); err != nil {
		return nil, err
	}
	inst := instanceFromRow(row)
	if err := setDeadline(ctx, q, p, inst); err != nil {
		return nil, err
	}
	if err := setParent(ctx, q, p.WorkflowName, p.ID, p.Parent, inst); err != nil {
		return nil, err
	}
	if err := setTraceContext(ctx, q, p, inst); err != nil {
		return nil, err
	}
	if err := s.logCreated(ctx, q, p.WorkflowName, p.Now, []db.CreateResult{{Instance: inst}}); err != nil {
		return nil, err
	}
	return inst, s.notifyWake(ctx, q, p.WorkflowName)
}

// instanceCreateLimited is InstanceCreate of an instance with limited
// scopes: createLimited of one. A Lease is ignored.
func (s *Store) instanceCreateLimited(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	var created []db.CreateResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		var err error
		created, err = s.createLimited(ctx, q, &db.InstanceCreateManyParams{
			WorkflowName: p.WorkflowName, Namespace: p.Namespace, Now: p.Now, RecordHooks: p.RecordHooks,
			Instances: []db.InstanceCreateItem{{
				ID: p.ID, Params: p.Params, Metadata: p.Metadata, Limits: p.Limits,
				DedupeKey: p.DedupeKey, Queue: p.Queue, Priority: p.Priority, DeadlineAt: p.DeadlineAt,
				TraceContext: p.TraceContext,
			}},
		}, "")
		if err == nil && len(created) == 0 {
			err = db.ErrAlreadyExists
		}
		if err == nil && !created[0].Deduplicated {
			err = setParent(ctx, q, p.WorkflowName, p.ID, p.Parent, created[0].Instance)
		}
		return err
	})
	if err != nil {
		return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return created[0], nil
}

// createLimited inserts the items whose ids are free and whose dedupe keys
// no active instance holds, in the caller's transaction, placed as
// InstanceCreateMany places them (an item without a queue takes
// defaultQueue, then workflow.DefaultQueue), admits those with limits
// (package admission) and gives tasks to the admitted ones (due at their
// run-at) and to those without limits (due now), with a fixed number of
// statements whatever the number of items. It returns the created
// instances, and the holders of the dedupe keys of skipped items, in input
// order. A Lease is ignored.
func (s *Store) createLimited(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateManyParams, defaultQueue string) ([]db.CreateResult, error) {
	items, workflowName := p.Instances, p.WorkflowName
	at := limitNow(p.Now)
	created, n, err := insertMany(ctx, q, p, defaultQueue, &at, []string{})
	if err != nil || n == 0 {
		return created, err
	}
	limits := make(map[string][]db.LimitSpec, len(items)) // of the first item of each id, the one created
	for i := range items {
		if _, seen := limits[items[i].ID]; !seen {
			limits[items[i].ID] = items[i].Limits
		}
	}
	var (
		limited []admission.Item
		// limitedInst are the instances of limited, in its order.
		limitedInst []*db.Instance
		dueNow      []string
		later       []string
		laterAt     []time.Time
		newIDs      = make([]string, 0, n)
	)
	for _, c := range created {
		if c.Deduplicated {
			continue
		}
		in := c.Instance
		newIDs = append(newIDs, in.ID)
		specs := limits[in.ID]
		if len(specs) == 0 {
			dueNow = append(dueNow, in.ID)
			continue
		}
		in.Limited = true
		limited = append(limited, admission.Item{Ref: db.InstanceRef{WorkflowName: workflowName, ID: in.ID}, Specs: specs})
		limitedInst = append(limitedInst, in)
	}
	if err := setDeadlines(ctx, q, p, created); err != nil {
		return nil, err
	}
	if err := setTraceContexts(ctx, q, p, created); err != nil {
		return nil, err
	}
	if len(limited) > 0 {
		results, err := admission.CreateMany(ctx, &limitTx{q: q, channel: s.wakeChannel, logStarted: s.logging()}, limited, at)
		if err != nil {
			return nil, err
		}
		for i, res := range results {
			// As InstanceGet reports it; logCreated logs the wait.
			limitedInst[i].WaitingFor = res.Waiting
			if !res.Admitted {
				continue
			}
			if res.RunAt.After(at) {
				later, laterAt = append(later, limited[i].Ref.ID), append(laterAt, res.RunAt)
			} else {
				dueNow = append(dueNow, limited[i].Ref.ID)
			}
		}
	}
	if len(dueNow) > 0 || len(later) > 0 {
		ids := append(slices.Clone(dueNow), later...)
		runAts := make([]time.Time, 0, len(ids))
		for range dueNow {
			runAts = append(runAts, at)
		}
		runAts = append(runAts, laterAt...)
		if err := q.LimitTaskInsertMany(ctx, pgsqlc.LimitTaskInsertManyParams{WorkflowName: workflowName, InstanceIds: ids, RunAts: runAts}); err != nil {
			return nil, err
		}
	}
	if err := s.logCreated(ctx, q, workflowName, &at, created); err != nil {
		return nil, err
	}
	if h := transition.Create(false, p.RecordHooks).Hook; h.Record() && len(newIDs) > 0 {
		if err := q.OutboxRecordMany(ctx, pgsqlc.OutboxRecordManyParams{
			Reason: string(h.Reason), Now: &at, InstanceIds: newIDs, WorkflowName: workflowName,
		}); err != nil {
			return nil, err
		}
	}
	if len(dueNow) > 0 {
		if err := s.notifyWake(ctx, q, workflowName); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// insertMany inserts, in the caller's transaction and in one statement, the
// items of p whose ids are free and whose dedupe keys no active instance
// holds, placed as InstanceCreateMany places them (an item without a queue
// takes defaultQueue, then workflow.DefaultQueue), with the ids in started
// marked started. It returns the created instances, and the holders of the
// dedupe keys of skipped items, in input order, and how many it created.
func insertMany(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateManyParams, defaultQueue string, now *time.Time, started []string) ([]db.CreateResult, int, error) {
	items := p.Instances
	namespace, _ := db.CreatePlacement(p.Namespace, "")
	ids := make([]string, len(items))
	params := make([][]byte, len(items))
	metadata := make([][]byte, len(items))
	keys := make([]string, len(items))
	queues := make([]string, len(items))
	priorities := make([]int32, len(items))
	dedupe := false
	for i := range items {
		ids[i], params[i], metadata[i] = items[i].ID, jsonArg(items[i].Params), jsonArg(items[i].Metadata)
		keys[i] = items[i].DedupeKey
		_, queues[i] = db.CreatePlacement("", cmp.Or(items[i].Queue, defaultQueue))
		priorities[i] = int32(items[i].Priority)
		dedupe = dedupe || keys[i] != ""
	}
	rows, err := q.InstanceInsertMany(ctx, pgsqlc.InstanceInsertManyParams{
		WorkflowName: p.WorkflowName, StartedIds: started, Now: now,
		InstanceIds: ids, Params: params, Metadata: metadata,
		DedupeKeys: keys, Queues: queues, Priorities: priorities, Namespace: namespace,
	})
	if err != nil {
		return nil, 0, err
	}
	var held map[string]*db.Instance
	if dedupe && len(rows) < len(ids) {
		// Items skipped for a held key return the holder.
		found, err := q.InstanceGetByDedupeKeys(ctx, pgsqlc.InstanceGetByDedupeKeysParams{
			Namespace: namespace, WorkflowName: p.WorkflowName, DedupeKeys: keys,
		})
		if err != nil {
			return nil, 0, err
		}
		held = make(map[string]*db.Instance, len(found))
		for i := range found {
			held[deref(found[i].DedupeKey)] = instanceFromRow(&found[i])
		}
	}
	byID := make(map[string]*pgsqlc.WorkflowInstance, len(rows))
	for i := range rows {
		byID[rows[i].InstanceID] = &rows[i]
	}
	created := make([]db.CreateResult, 0, len(rows))
	for i, id := range ids {
		if row, ok := byID[id]; ok {
			created = append(created, db.CreateResult{Instance: instanceFromRow(row)})
			delete(byID, id)
		} else if h := held[keys[i]]; keys[i] != "" && h != nil && h.ID != id {
			created = append(created, db.CreateResult{Instance: h, Deduplicated: true})
		}
	}
	return created, len(rows), nil
}

// instanceCreateLeased is InstanceCreate of an eager start: the instance
// and its leased task go in one statement, with the hook entry in the same
// transaction. Nothing is notified: the task is not claimable until its
// lease expires.
func (s *Store) instanceCreateLeased(ctx context.Context, p *db.InstanceCreateParams, plan *transition.CreatePlan) (db.CreateResult, error) {
	var res db.CreateResult
	namespace, queue := db.CreatePlacement(p.Namespace, p.Queue)
	create := func(q *pgsqlc.Queries) error {
		row, err := q.InstanceInsertLeased(ctx, pgsqlc.InstanceInsertLeasedParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Params:       jsonArg(p.Params),
			Metadata:     jsonArg(p.Metadata),
			Now:          p.Now,
			Namespace:    namespace,
			Queue:        queue,
			Priority:     int32(p.Priority),
			LockOwner:    p.Lease.Owner,
			LockedUntil:  p.Lease.LockedUntil,
		})
		if err != nil {
			return err
		}
		inst := instanceFromRow(&pgsqlc.WorkflowInstance{
			WorkflowName: row.WorkflowName, InstanceID: row.InstanceID, Status: row.Status,
			Params: row.Params, Output: row.Output, ErrorName: row.ErrorName, ErrorMessage: row.ErrorMessage,
			PauseRequested: row.PauseRequested, RunNumber: row.RunNumber, CreatedAt: row.CreatedAt,
			UpdatedAt: row.UpdatedAt, StartedAt: row.StartedAt, CompletedAt: row.CompletedAt,
			RetentionUntil: row.RetentionUntil, Metadata: row.Metadata, RunAttempt: 1,
			Namespace: row.Namespace, Queue: row.Queue, Priority: row.Priority, DedupeKey: row.DedupeKey,
		})
		res = db.CreateResult{Instance: inst, LeasedTask: leasedTask(row.TaskID, inst, p.Lease)}
		if err := setDeadline(ctx, q, p, inst); err != nil {
			return err
		}
		if err := setParent(ctx, q, p.WorkflowName, p.ID, p.Parent, inst); err != nil {
			return err
		}
		if err := setTraceContext(ctx, q, p, inst); err != nil {
			return err
		}
		if err := s.logCreated(ctx, q, p.WorkflowName, p.Now, []db.CreateResult{res}); err != nil {
			return err
		}
		return recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, p.Now)
	}
	var err error
	if plan.Hook.Record() || p.DeadlineAt != nil || p.Parent != nil || p.TraceContext != "" || s.logging() {
		err = s.inTx(ctx, create)
	} else {
		// One statement is its own transaction: no BEGIN and COMMIT round trips.
		err = create(s.queries)
	}
	if err != nil {
		return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return res, nil
}

// setDeadline writes the deadline of a create that sets one (a statement
// of its own, so that a create without one runs none more) and records it
// on inst.
func setDeadline(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateParams, inst *db.Instance) error {
	if p.DeadlineAt == nil {
		return nil
	}
	d := p.DeadlineAt.UTC()
	inst.DeadlineAt = &d
	return q.InstanceSetDeadlines(ctx, pgsqlc.InstanceSetDeadlinesParams{
		WorkflowName: p.WorkflowName, InstanceIds: []string{p.ID}, Deadlines: []time.Time{d},
	})
}

// setDeadlines is setDeadline for the instances a batch create made.
func setDeadlines(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateManyParams, created []db.CreateResult) error {
	deadlines := make(map[string]time.Time)
	for _, item := range p.Instances {
		if item.DeadlineAt != nil {
			deadlines[item.ID] = item.DeadlineAt.UTC()
		}
	}
	if len(deadlines) == 0 {
		return nil
	}
	w := pgsqlc.InstanceSetDeadlinesParams{WorkflowName: p.WorkflowName}
	for _, c := range created {
		if d, ok := deadlines[c.Instance.ID]; ok {
			c.Instance.DeadlineAt = &d
			w.InstanceIds = append(w.InstanceIds, c.Instance.ID)
			w.Deadlines = append(w.Deadlines, d)
		}
	}
	if len(w.InstanceIds) == 0 {
		return nil
	}
	return q.InstanceSetDeadlines(ctx, w)
}

// setTraceContext writes the trace context of a create that carries one (a
// statement of its own, so that a create without one runs none more) and
// records it on inst.
func setTraceContext(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateParams, inst *db.Instance) error {
	if p.TraceContext == "" {
		return nil
	}
	inst.TraceContext = p.TraceContext
	return q.InstanceSetTraceContexts(ctx, pgsqlc.InstanceSetTraceContextsParams{
		TraceContext: p.TraceContext, WorkflowName: p.WorkflowName, InstanceIds: []string{p.ID},
	})
}

// setTraceContexts is setTraceContext for the instances a batch create
// made: one statement per distinct trace context (a batch has one: its
// caller's), none when no item carries one.
func setTraceContexts(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateManyParams, created []db.CreateResult) error {
	var byID map[string]string
	for _, item := range p.Instances {
		if item.TraceContext != "" {
			if byID == nil {
				byID = make(map[string]string)
			}
			byID[item.ID] = item.TraceContext
		}
	}
	if byID == nil {
		return nil
	}
	var (
		order []string
		ids   = make(map[string][]string)
	)
	for _, c := range created {
		if c.Deduplicated {
			continue
		}
		tc, ok := byID[c.Instance.ID]
		if !ok {
			continue
		}
		c.Instance.TraceContext = tc
		if _, seen := ids[tc]; !seen {
			order = append(order, tc)
		}
		ids[tc] = append(ids[tc], c.Instance.ID)
	}
	for _, tc := range order {
		if err := q.InstanceSetTraceContexts(ctx, pgsqlc.InstanceSetTraceContextsParams{
			TraceContext: tc, WorkflowName: p.WorkflowName, InstanceIds: ids[tc],
		}); err != nil {
			return err
		}
	}
	return nil
}

// leasedTask is the first task of inst as an eager start's create wrote it.
func leasedTask(id int64, inst *db.Instance, lease *db.CreateLease) *db.Task {
	until := lease.LockedUntil
	return &db.Task{
		ID: id, WorkflowName: inst.WorkflowName, InstanceID: inst.ID, RunNumber: inst.RunNumber,
		Kind: db.TaskKindRun, RunAt: inst.CreatedAt, Status: db.TaskStatusProcessing,
		LockOwner: lease.Owner, LockedUntil: &until, Version: 1, Attempts: 1,
		Queue: inst.Queue, InstancePriority: inst.Priority,
	}
}

// InstanceCreateMany inserts, in one transaction, the instances whose ids are
// free together with their tasks (and, when p.RecordHooks is set, a create
// hook entry each), and returns those in input order. Existing ids, and
// repeats of an id within the batch, are skipped. When any was created, the
// wake channel is notified once.
func (s *Store) InstanceCreateMany(ctx context.Context, p *db.InstanceCreateManyParams) ([]db.CreateResult, error) {
	if len(p.Instances) == 0 {
		return []db.CreateResult{}, nil
	}
	var created []db.CreateResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		var err error
		created, err = s.createMany(ctx, q, p, "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating instances: %w", interpretError(err))
	}
	return created, nil
}

// createMany is InstanceCreateMany in the caller's transaction, with
// defaultQueue the queue of an item without one (then
// workflow.DefaultQueue): createLimited when an item has limits (and the
// Lease is then ignored).
func (s *Store) createMany(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceCreateManyParams, defaultQueue string) ([]db.CreateResult, error) {
	for i := range p.Instances {
		if len(p.Instances[i].Limits) > 0 {
			return s.createLimited(ctx, q, p, defaultQueue)
		}
	}
	started := []string{}
	if p.Lease != nil {
		started = make([]string, min(max(p.Lease.Max, 0), len(p.Instances)))
		for i := range started {
			started[i] = p.Instances[i].ID
		}
	}
	created, n, err := insertMany(ctx, q, p, defaultQueue, p.Now, started)
	if err != nil || n == 0 {
		return created, err
	}
	newIDs := make([]string, 0, n)
	newQueues := make([]string, 0, n)
	newPriorities := make([]int16, 0, n)
	for _, c := range created {
		if !c.Deduplicated {
			newIDs = append(newIDs, c.Instance.ID)
			newQueues = append(newQueues, c.Instance.Queue)
			newPriorities = append(newPriorities, int16(c.Instance.Priority))
		}
	}
	if err := setDeadlines(ctx, q, p, created); err != nil {
		return nil, err
	}
	if err := setTraceContexts(ctx, q, p, created); err != nil {
		return nil, err
	}
	leased := 0
	if len(started) == 0 {
		if err := q.TaskInsertMany(ctx, pgsqlc.TaskInsertManyParams{
			WorkflowName:       p.WorkflowName,
			Now:                p.Now,
			InstanceIds:        newIDs,
			Queues:             newQueues,
			InstancePriorities: newPriorities,
		}); err != nil {
			return nil, err
		}
	} else {
		tasks, err := q.TaskInsertManyLeased(ctx, pgsqlc.TaskInsertManyLeasedParams{
			WorkflowName: p.WorkflowName,
			Now:          p.Now,
			LockOwner:    p.Lease.Owner,
			LockedUntil:  p.Lease.LockedUntil,
			LeasedIds:    started,
			InstanceIds:  newIDs,
			Queues:       newQueues,

			InstancePriorities: newPriorities,
		})
		if err != nil {
			return nil, err
		}
		taskIDs := make(map[string]int64, len(tasks))
		for _, t := range tasks {
			taskIDs[t.InstanceID] = t.ID
		}
		for i := range created {
			if created[i].Deduplicated {
				continue
			}
			if id, ok := taskIDs[created[i].Instance.ID]; ok {
				created[i].LeasedTask = leasedTask(id, created[i].Instance, p.Lease)
				leased++
			}
		}
	}
	if err := s.logCreated(ctx, q, p.WorkflowName, p.Now, created); err != nil {
		return nil, err
	}
	if h := transition.Create(false, p.RecordHooks).Hook; h.Record() {
		if err := q.OutboxRecordMany(ctx, pgsqlc.OutboxRecordManyParams{
			Reason:       string(h.Reason),
			Now:          p.Now,
			InstanceIds:  newIDs,
			WorkflowName: p.WorkflowName,
		}); err != nil {
			return nil, err
		}
	}
	if leased == len(newIDs) {
		return created, nil // every task is leased: there is nothing to claim
	}
	return created, s.notifyWake(ctx, q, p.WorkflowName)
}

// InstanceGet returns one instance or db.ErrNotFound.
func (s *Store) InstanceGet(ctx context.Context, ref db.InstanceRef) (*db.Instance, error) {
	row, err := s.queries.InstanceGet(ctx, pgsqlc.InstanceGetParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
		Namespace:    ref.Namespace,
	})
	if err != nil {
		return nil, fmt.Errorf("getting instance: %w", interpretError(err))
	}
	inst := instanceFromRow(&row)
	if err := fillWaitingFor(ctx, s.queries, []*db.Instance{inst}); err != nil {
		return nil, fmt.Errorf("getting instance: %w", interpretError(err))
	}
	return inst, nil
}

// InstanceList returns a page of instances, newest update first, continuing
// after p.Cursor when it is set.
func (s *Store) InstanceList(ctx context.Context, p *db.InstanceListParams) ([]*db.Instance, error) {
	arg := pgsqlc.InstanceListParams{
		WorkflowName: textArg(p.WorkflowName),
		Namespace:    textArg(p.Namespace),
		Queue:        textArg(p.Queue),
		Max:          int32(p.Limit),
	}
	if p.Limit <= 0 {
		arg.Max = defaultListLimit
	}
	if len(p.Statuses) > 0 {
		arg.Statuses = make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			arg.Statuses[i] = string(st)
		}
	}
	if c := p.Cursor; c != nil {
		updated := c.UpdatedAt
		name, id := c.WorkflowName, c.ID
		arg.CursorUpdatedAt = &updated
		arg.CursorWorkflowName = &name
		arg.CursorInstanceID = &id
	}
	if p.OmitPayloads || p.PayloadBudget > 0 {
		return s.instanceListBounded(ctx, p, arg)
	}
	var filled []*db.Instance
	rows, err := s.queries.InstanceList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", interpretError(err))
	}
	if waitingAny(rows) {
		// A page with queued limited instances is read again with what
		// holds them back, from one snapshot; other pages cost nothing more.
		err = s.inSnapshot(ctx, func(q *pgsqlc.Queries) error {
			if rows, err = q.InstanceList(ctx, arg); err != nil {
				return err
			}
			list := instancesFromRows(rows)
			if err := fillWaitingFor(ctx, q, list); err != nil {
				return err
			}
			filled = list
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", interpretError(err))
		}
		return filled, nil
	}
	return instancesFromRows(rows), nil
}

// InstancePause, InstanceResume, InstanceTerminate and InstanceRestart
// apply the rule of their name in package transition (which says what each
// does) through instanceChange: the instance locked and read, then one
// InstanceChangeApply statement.

// InstancePause applies transition.Pause.
func (s *Store) InstancePause(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Pause, "pausing instance")
}

// InstanceResume applies transition.Resume.
func (s *Store) InstanceResume(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Resume, "resuming instance")
}

// InstanceTerminate applies transition.Terminate, and to the instance's
// children with the terminate policy in the same transaction
// (terminateChildren). The instance's parent, when it has one, is locked
// before the instance (InstanceLockParentOf): the terminate sends the
// instance's end to it, and every transaction that locks a parent and its
// child locks the parent first.
func (s *Store) InstanceTerminate(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.changeInstance(ctx, p, transition.Terminate, "terminating instance", true, nil)
}

// InstanceRestart applies transition.Restart, and terminates the children
// of the instance's earlier runs with the terminate policy that have not
// ended, in the same transaction (terminateChildren): the new run never
// reads their ends. Steps and events of earlier runs are kept for audit and
// never delivered again.
func (s *Store) InstanceRestart(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Restart, "restarting instance")
}

// taskOps are the task_op values of InstanceChangeApply.
var taskOps = map[transition.TaskOp]string{
	transition.TaskKeep:    "none",
	transition.TaskDelete:  "delete",
	transition.TaskRequeue: "requeue",
}

// instanceChange applies a management transition's rule to the instance it
// locks, in one transaction: the instance's status is read and locked, the
// rule plans the change, and InstanceChangeApply writes the whole plan in
// one statement. It returns the instance after it.
func (s *Store) instanceChange(ctx context.Context, p *db.InstanceChangeParams, rule transition.ChangeFunc, doing string) (*db.Instance, error) {
	return s.instanceChangeWith(ctx, p, rule, doing, nil)
}

// instanceChangeWith is instanceChange with a step of the caller's, run in
// the change's transaction with the instance locked (row) before the rule:
// it returns the rule to apply (nil leaves the instance as it is).
func (s *Store) instanceChangeWith(ctx context.Context, p *db.InstanceChangeParams, rule transition.ChangeFunc, doing string,
	before func(q *pgsqlc.Queries, row *pgsqlc.WorkflowInstance) (transition.ChangeFunc, error)) (*db.Instance, error) {
	return s.changeInstance(ctx, p, rule, doing, false, before)
}

// changeInstance is instanceChangeWith, which locks the instance's parent
// first when parentFirst is set (a change that may end the instance, and
// so lock its parent to send it the end).
func (s *Store) changeInstance(ctx context.Context, p *db.InstanceChangeParams, rule transition.ChangeFunc, doing string, parentFirst bool,
	before func(q *pgsqlc.Queries, row *pgsqlc.WorkflowInstance) (transition.ChangeFunc, error)) (*db.Instance, error) {
	var inst *db.Instance
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		if parentFirst {
			if err := q.InstanceLockParentOf(ctx, pgsqlc.InstanceLockParentOfParams{
				WorkflowName: p.WorkflowName, InstanceID: p.ID, Namespace: p.Namespace,
			}); err != nil {
				return err
			}
		}
		row, err := q.InstanceGetForUpdate(ctx, pgsqlc.InstanceGetForUpdateParams{
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
		plan, err := rule(dftype.InstanceStatus(row.Status), p.RecordHooks)
		if err != nil || plan.Status == "" {
			inst = instanceFromRow(&row)
			return err
		}
		applied, err := q.InstanceChangeApply(ctx, pgsqlc.InstanceChangeApplyParams{
			Status:         string(plan.Status),
			PauseRequested: plan.PauseRequested,
			NewRun:         plan.NewRun,
			Now:            p.Now,
			WorkflowName:   p.WorkflowName,
			InstanceID:     p.ID,
			TaskOp:         taskOps[plan.Task.Op],
			Kind:           string(plan.Task.Kind),
			Priority:       int16(plan.Task.Priority),
			ResetAttempts:  plan.Task.ResetAttempts,
			HookReason:     string(plan.Hook.Reason),
			Channel:        s.wakeChannel,
			Notify:         plan.Notify,
		})
		if err != nil {
			return err
		}
		var waiting *db.WaitingFor
		if row.Limited {
			if waiting, err = s.limitChange(ctx, q, p, dftype.InstanceStatus(row.Status), &plan); err != nil {
				return err
			}
		}
		inst = instanceFromRow(&pgsqlc.WorkflowInstance{
			WorkflowName: applied.WorkflowName, InstanceID: applied.InstanceID, Status: applied.Status,
			Params: applied.Params, Output: applied.Output, ErrorName: applied.ErrorName, ErrorMessage: applied.ErrorMessage,
			PauseRequested: applied.PauseRequested, RunNumber: applied.RunNumber, CreatedAt: applied.CreatedAt,
			UpdatedAt: applied.UpdatedAt, StartedAt: applied.StartedAt, CompletedAt: applied.CompletedAt,
			RetentionUntil: applied.RetentionUntil, Metadata: applied.Metadata, Limited: row.Limited,
			Namespace: applied.Namespace, Queue: applied.Queue, Priority: applied.Priority, DedupeKey: applied.DedupeKey,
			DeadlineAt: applied.DeadlineAt, RunAttempt: applied.RunAttempt,
		})
		inst.Parent = parentFromRow(&row)
		if e, ok := transition.ChangeEvent(&plan, p.WorkflowName, p.ID, inst.RunNumber, time.Time{}); ok {
			events := []db.LifecycleEvent{e}
			if waiting != nil {
				events = append(events, transition.LimitWaitEvent(p.WorkflowName, p.ID, inst.RunNumber, waiting, time.Time{}))
			}
			if err := s.logLifecycle(ctx, q, p.Now, events...); err != nil {
				return err
			}
		}
		switch {
		case plan.Status == dftype.StatusTerminated:
			if n := db.TerminatedChildNotify(inst, p.RecordHooks); n != nil {
				if !parentFirst {
					return errors.New("ending a child without its parent locked first")
				}
				if err := s.notifyParentTx(ctx, q, n, p.Now); err != nil {
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

// limitChange applies a management change's consequences on a limited
// instance's slots, in the change's transaction: a terminate gives them
// back, a restart takes them again (admission.Restart), a resume of an
// instance still waiting for a slot leaves it without a task. It returns
// what a restart made the new run wait for (admission.Restart), else nil.
func (s *Store) limitChange(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceChangeParams, from dftype.InstanceStatus, plan *transition.ChangePlan) (*db.WaitingFor, error) {
	tx := &limitTx{q: q, channel: s.wakeChannel, logStarted: s.logging()}
	ref := db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.ID}
	now := limitNow(p.Now)
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

// waitingAny reports whether a page holds a queued limited instance.
// instanceListBounded is InstanceList with p.OmitPayloads or
// p.PayloadBudget: InstanceListBounded reads the page's payloads within the
// budget only.
func (s *Store) instanceListBounded(ctx context.Context, p *db.InstanceListParams, list pgsqlc.InstanceListParams) ([]*db.Instance, error) {
	arg := pgsqlc.InstanceListBoundedParams{
		OmitPayloads: p.OmitPayloads, PayloadBudget: int64(p.PayloadBudget),
		WorkflowName: list.WorkflowName, Statuses: list.Statuses, Namespace: list.Namespace, Queue: list.Queue,
		CursorUpdatedAt: list.CursorUpdatedAt, CursorWorkflowName: list.CursorWorkflowName, CursorInstanceID: list.CursorInstanceID,
		Max: list.Max,
	}
	read := func(q *pgsqlc.Queries) ([]*db.Instance, bool, error) {
		rows, err := q.InstanceListBounded(ctx, arg)
		if err != nil {
			return nil, false, err
		}
		out := make([]*db.Instance, len(rows))
		waiting := false
		for i := range rows {
			out[i] = instanceFromBoundedRow(&rows[i])
			waiting = waiting || (rows[i].Limited && rows[i].Status == string(dftype.StatusQueued))
		}
		return out, waiting, nil
	}
	out, waiting, err := read(s.queries)
	if err == nil && waiting {
		// As InstanceList: the page and what holds its queued limited
		// instances back, from one snapshot.
		err = s.inSnapshot(ctx, func(q *pgsqlc.Queries) error {
			var err error
			if out, _, err = read(q); err != nil {
				return err
			}
			return fillWaitingFor(ctx, q, out)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", interpretError(err))
	}
	return out, nil
}

func waitingAny(rows []pgsqlc.WorkflowInstance) bool {
	for i := range rows {
		if rows[i].Limited && rows[i].Status == string(dftype.StatusQueued) {
			return true
		}
	}
	return false
}

func instancesFromRows(rows []pgsqlc.WorkflowInstance) []*db.Instance {
	list := make([]*db.Instance, len(rows))
	for i := range rows {
		list[i] = instanceFromRow(&rows[i])
	}
	return list
}

// inSnapshot runs fn in a read-only repeatable-read transaction: every
// query of fn reads one snapshot.
func (s *Store) inSnapshot(ctx context.Context, fn func(q *pgsqlc.Queries) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(s.queries.WithTx(tx)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
