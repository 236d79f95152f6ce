package sqlite

import (
	"context"
	"fmt"
	"math"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// defaultListLimit is the page size of the lists when none is given: the
// module's one default (internal/paging).
const defaultListLimit = paging.DefaultPageSize

// InstanceCreate inserts a queued instance and its first task (kind run, due
// now) in one transaction, with a create hook entry when p.RecordHooks is set.
// It returns db.ErrAlreadyExists when the id is taken.
func (s *Store) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	var inst db.CreateResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		plan := transition.Create(p.Lease != nil, p.RecordHooks)
		if plan.Leased {
			started, ok, err := insertLeased(ctx, q, p.WorkflowName, p.ID, p.Params, p.Metadata, now, p.Lease)
			if err != nil {
				return err
			}
			if !ok {
				return db.ErrAlreadyExists
			}
			inst = started
			return recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, now)
		}
		row, err := q.InstanceInsert(ctx, litesqlc.InstanceInsertParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Params:       jsonArg(p.Params),
			Metadata:     jsonArg(p.Metadata),
			Now:          now,
		})
		if err != nil {
			return err
		}
		if err := q.TaskInsert(ctx, litesqlc.TaskInsertParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			Now:          now,
		}); err != nil {
			return err
		}
		if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, now); err != nil {
			return err
		}
		inst = db.CreateResult{Instance: instanceFromRow(&row)}
		return nil
	})
	if err != nil {
		return db.CreateResult{}, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return inst, nil
}

// InstanceCreateMany inserts, in one transaction, the instances whose ids are
// free together with their tasks (and, when p.RecordHooks is set, a create
// hook entry each), and returns those in input order. Existing ids, and
// repeats of an id within the batch, are skipped. The rows go in one
// statement each: SQLite has no array parameters, and within the one
// transaction on the embedded database a statement costs microseconds.
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
		created = make([]db.CreateResult, 0, len(p.Instances))
		for i, item := range p.Instances {
			plan := transition.Create(p.Lease != nil && i < p.Lease.Max, p.RecordHooks)
			var lease *db.CreateLease
			if plan.Leased {
				lease = p.Lease
			}
			inst, ok, err := insertIfAbsent(ctx, q, p.WorkflowName, &item, now, lease)
			if err != nil {
				return err
			}
			if !ok {
				continue // the id is taken
			}
			if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, item.ID, now); err != nil {
				return err
			}
			created = append(created, inst)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating instances: %w", interpretError(err))
	}
	return created, nil
}

// insertIfAbsent inserts an instance with its first task, leased when
// lease is set, unless the id is taken, in which case it reports false and
// writes nothing.
func insertIfAbsent(ctx context.Context, q *litesqlc.Queries, workflowName string, item *db.InstanceCreateItem, now int64, lease *db.CreateLease) (db.CreateResult, bool, error) {
	if lease != nil {
		return insertLeased(ctx, q, workflowName, item.ID, item.Params, item.Metadata, now, lease)
	}
	row, err := q.InstanceInsertIfAbsent(ctx, litesqlc.InstanceInsertIfAbsentParams{
		WorkflowName: workflowName,
		InstanceID:   item.ID,
		Params:       jsonArg(item.Params),
		Metadata:     jsonArg(item.Metadata),
		Now:          now,
	})
	if isNoRows(err) {
		return db.CreateResult{}, false, nil
	}
	if err != nil {
		return db.CreateResult{}, false, err
	}
	if err := q.TaskInsert(ctx, litesqlc.TaskInsertParams{
		WorkflowName: workflowName,
		InstanceID:   item.ID,
		Now:          now,
	}); err != nil {
		return db.CreateResult{}, false, err
	}
	return db.CreateResult{Instance: instanceFromRow(&row)}, true, nil
}

// insertLeased inserts the instance of an eager start, running, and its
// first task leased to lease.Owner, unless the id is taken, in which case it
// reports false and writes nothing.
func insertLeased(ctx context.Context, q *litesqlc.Queries, workflowName, id string, params, metadata []byte, now int64, lease *db.CreateLease) (db.CreateResult, bool, error) {
	row, err := q.InstanceInsertStartedIfAbsent(ctx, litesqlc.InstanceInsertStartedIfAbsentParams{
		WorkflowName: workflowName,
		InstanceID:   id,
		Params:       jsonArg(params),
		Metadata:     jsonArg(metadata),
		Now:          now,
	})
	if isNoRows(err) {
		return db.CreateResult{}, false, nil
	}
	if err != nil {
		return db.CreateResult{}, false, err
	}
	task, err := q.TaskInsertLeased(ctx, litesqlc.TaskInsertLeasedParams{
		WorkflowName: workflowName,
		InstanceID:   id,
		Now:          now,
		LockOwner:    lease.Owner,
		LockedUntil:  micros(lease.LockedUntil),
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
	})
	if err != nil {
		return nil, fmt.Errorf("getting instance: %w", interpretError(err))
	}
	return instanceFromRow(&row), nil
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
		err  error
	)
	if p.WorkflowName == "" {
		rows, err = s.queriesFor(ctx, false).InstanceList(ctx, litesqlc.InstanceListParams{
			Statuses:           statuses,
			CursorUpdatedAt:    cursorAt,
			CursorWorkflowName: cursor.WorkflowName,
			CursorInstanceID:   cursor.ID,
			Max:                limit,
		})
	} else {
		rows, err = s.queriesFor(ctx, false).InstanceListWorkflow(ctx, litesqlc.InstanceListWorkflowParams{
			WorkflowName:       p.WorkflowName,
			Statuses:           statuses,
			CursorUpdatedAt:    cursorAt,
			CursorWorkflowName: cursor.WorkflowName,
			CursorInstanceID:   cursor.ID,
			Max:                limit,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", interpretError(err))
	}
	list := make([]*db.Instance, len(rows))
	for i := range rows {
		list[i] = instanceFromRow(&rows[i])
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
func (s *Store) InstanceTerminate(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Terminate, "terminating instance")
}

// InstanceRestart applies transition.Restart; earlier runs' steps and
// events stay for audit.
func (s *Store) InstanceRestart(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	return s.instanceChange(ctx, p, transition.Restart, "restarting instance")
}

// instanceChange applies a management transition's rule to an instance
// inside a write transaction, which no other writer can interleave with,
// and returns the instance after it.
func (s *Store) instanceChange(ctx context.Context, p *db.InstanceChangeParams, rule transition.ChangeFunc, doing string) (*db.Instance, error) {
	var inst *db.Instance
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		row, err := q.InstanceGet(ctx, litesqlc.InstanceGetParams{
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
		run := runRef{p.WorkflowName, p.ID, row.RunNumber}
		if err := applyTask(ctx, q, run, db.TaskRef{}, &plan.Task, now, now); err != nil {
			return err
		}
		inst = instanceFromRow(&row)
		return recordHook(ctx, q, plan.Hook, p.WorkflowName, p.ID, now)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", doing, interpretError(err))
	}
	return inst, nil
}
