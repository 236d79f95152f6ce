package postgres

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// defaultListLimit is the page size of the lists when none is given: the
// module's one default (internal/paging).
const defaultListLimit = paging.DefaultPageSize

// InstanceCreate inserts a queued instance and its first task (kind run, due
// now) in one transaction, with a create hook entry when p.RecordHooks is set,
// and notifies the wake channel. It returns db.ErrAlreadyExists when the id is
// taken.
func (s *Store) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	plan := transition.Create(p.Lease != nil, p.RecordHooks)
	if plan.Leased {
		return s.instanceCreateLeased(ctx, p, &plan)
	}
	var inst *db.Instance
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.InstanceInsert(ctx, pgsqlc.InstanceInsertParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Params:       jsonArg(p.Params),
			Metadata:     jsonArg(p.Metadata),
			Now:          p.Now,
		})
		if err != nil {
			return err
		}
		if err := q.TaskInsert(ctx, pgsqlc.TaskInsertParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Now:          p.Now,
		}); err != nil {
			return err
		}
		if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, p.Now); err != nil {
			return err
		}
		inst = instanceFromRow(&row)
		return s.notifyWake(ctx, q, p.WorkflowName)
	})
	if err != nil {
		return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return db.CreateResult{Instance: inst}, nil
}

// instanceCreateLeased is InstanceCreate of an eager start: the instance
// and its leased task go in one statement, with the hook entry in the same
// transaction. Nothing is notified: the task is not claimable until its
// lease expires.
func (s *Store) instanceCreateLeased(ctx context.Context, p *db.InstanceCreateParams, plan *transition.CreatePlan) (db.CreateResult, error) {
	var res db.CreateResult
	create := func(q *pgsqlc.Queries) error {
		row, err := q.InstanceInsertLeased(ctx, pgsqlc.InstanceInsertLeasedParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Params:       jsonArg(p.Params),
			Metadata:     jsonArg(p.Metadata),
			Now:          p.Now,
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
			RetentionUntil: row.RetentionUntil, Metadata: row.Metadata,
		})
		res = db.CreateResult{Instance: inst, LeasedTask: leasedTask(row.TaskID, inst, p.Lease)}
		return recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, p.Now)
	}
	var err error
	if plan.Hook.Record() {
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

// leasedTask is the first task of inst as an eager start's create wrote it.
func leasedTask(id int64, inst *db.Instance, lease *db.CreateLease) *db.Task {
	until := lease.LockedUntil
	return &db.Task{
		ID: id, WorkflowName: inst.WorkflowName, InstanceID: inst.ID, RunNumber: inst.RunNumber,
		Kind: db.TaskKindRun, RunAt: inst.CreatedAt, Status: db.TaskStatusProcessing,
		LockOwner: lease.Owner, LockedUntil: &until, Version: 1, Attempts: 1,
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
	ids := make([]string, len(p.Instances))
	params := make([][]byte, len(p.Instances))
	metadata := make([][]byte, len(p.Instances))
	for i, item := range p.Instances {
		ids[i] = item.ID
		params[i] = jsonArg(item.Params)
		metadata[i] = jsonArg(item.Metadata)
	}
	started := []string{}
	if p.Lease != nil {
		started = ids[:min(max(p.Lease.Max, 0), len(ids))]
	}
	var created []db.CreateResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		rows, err := q.InstanceInsertMany(ctx, pgsqlc.InstanceInsertManyParams{
			WorkflowName: p.WorkflowName,
			StartedIds:   started,
			Now:          p.Now,
			InstanceIds:  ids,
			Params:       params,
			Metadata:     metadata,
		})
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			created = []db.CreateResult{}
			return nil
		}
		byID := make(map[string]*pgsqlc.WorkflowInstance, len(rows))
		for i := range rows {
			byID[rows[i].InstanceID] = &rows[i]
		}
		created = make([]db.CreateResult, 0, len(rows))
		newIDs := make([]string, 0, len(rows))
		for _, id := range ids {
			if row, ok := byID[id]; ok {
				created = append(created, db.CreateResult{Instance: instanceFromRow(row)})
				newIDs = append(newIDs, id)
				delete(byID, id)
			}
		}
		leased := 0
		if len(started) == 0 {
			if err := q.TaskInsertMany(ctx, pgsqlc.TaskInsertManyParams{
				WorkflowName: p.WorkflowName,
				Now:          p.Now,
				InstanceIds:  newIDs,
			}); err != nil {
				return err
			}
		} else {
			tasks, err := q.TaskInsertManyLeased(ctx, pgsqlc.TaskInsertManyLeasedParams{
				WorkflowName: p.WorkflowName,
				Now:          p.Now,
				LockOwner:    p.Lease.Owner,
				LockedUntil:  p.Lease.LockedUntil,
				LeasedIds:    started,
				InstanceIds:  newIDs,
			})
			if err != nil {
				return err
			}
			taskIDs := make(map[string]int64, len(tasks))
			for _, t := range tasks {
				taskIDs[t.InstanceID] = t.ID
			}
			for i := range created {
				if id, ok := taskIDs[created[i].Instance.ID]; ok {
					created[i].LeasedTask = leasedTask(id, created[i].Instance, p.Lease)
					leased++
				}
			}
		}
		if h := transition.Create(false, p.RecordHooks).Hook; h.Record() {
			if err := q.OutboxRecordMany(ctx, pgsqlc.OutboxRecordManyParams{
				Reason:       string(h.Reason),
				Now:          p.Now,
				InstanceIds:  newIDs,
				WorkflowName: p.WorkflowName,
			}); err != nil {
				return err
			}
		}
		if leased == len(created) {
			return nil // every task is leased: there is nothing to claim
		}
		return s.notifyWake(ctx, q, p.WorkflowName)
	})
	if err != nil {
		return nil, fmt.Errorf("creating instances: %w", interpretError(err))
	}
	return created, nil
}

// InstanceGet returns one instance or db.ErrNotFound.
func (s *Store) InstanceGet(ctx context.Context, ref db.InstanceRef) (*db.Instance, error) {
	row, err := s.queries.InstanceGet(ctx, pgsqlc.InstanceGetParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("getting instance: %w", interpretError(err))
	}
	return instanceFromRow(&row), nil
}

// InstanceList returns a page of instances, newest update first, continuing
// after p.Cursor when it is set.
func (s *Store) InstanceList(ctx context.Context, p *db.InstanceListParams) ([]*db.Instance, error) {
	arg := pgsqlc.InstanceListParams{
		WorkflowName: textArg(p.WorkflowName),
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
	rows, err := s.queries.InstanceList(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", interpretError(err))
	}
	list := make([]*db.Instance, len(rows))
	for i := range rows {
		list[i] = instanceFromRow(&rows[i])
	}
	return list, nil
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

// InstanceTerminate applies transition.Terminate.
func (s *Store) InstanceTerminate(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Terminate, "terminating instance")
}

// InstanceRestart applies transition.Restart. Steps and events of earlier
// runs are kept for audit and never delivered again.
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
	var inst *db.Instance
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.InstanceGetForUpdate(ctx, pgsqlc.InstanceGetForUpdateParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
		})
		if err != nil {
			return err
		}
		plan, err := rule(workflow.InstanceStatus(row.Status), p.RecordHooks)
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
		inst = instanceFromRow(&pgsqlc.WorkflowInstance{
			WorkflowName: applied.WorkflowName, InstanceID: applied.InstanceID, Status: applied.Status,
			Params: applied.Params, Output: applied.Output, ErrorName: applied.ErrorName, ErrorMessage: applied.ErrorMessage,
			PauseRequested: applied.PauseRequested, RunNumber: applied.RunNumber, CreatedAt: applied.CreatedAt,
			UpdatedAt: applied.UpdatedAt, StartedAt: applied.StartedAt, CompletedAt: applied.CompletedAt,
			RetentionUntil: applied.RetentionUntil, Metadata: applied.Metadata,
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, interpretError(err))
	}
	return inst, nil
}
