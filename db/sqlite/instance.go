package sqlite

import (
	"context"
	"fmt"
	"math"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

// defaultListLimit is the page size of InstanceList when none is given.
const defaultListLimit = 50

// InstanceCreate inserts a queued instance and its first task (kind run, due
// now) in one transaction, with a create hook entry when p.RecordHooks is set.
// It returns db.ErrAlreadyExists when the id is taken.
func (s *Store) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (*db.Instance, error) {
	var inst *db.Instance
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		if p.Lease != nil {
			started, err := insertLeased(ctx, q, p.WorkflowName, p.ID, p.Params, p.Metadata, now, p.Lease)
			if err != nil {
				return err
			}
			if started == nil {
				return db.ErrAlreadyExists
			}
			inst = started
			return recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.ID, db.HookReasonCreate, now)
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
		if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.ID, db.HookReasonCreate, now); err != nil {
			return err
		}
		inst = instanceFromRow(&row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating instance: %w", interpretError(err))
	}
	return inst, nil
}

// InstanceCreateMany inserts, in one transaction, the instances whose ids are
// free together with their tasks (and, when p.RecordHooks is set, a create
// hook entry each), and returns those in input order. Existing ids, and
// repeats of an id within the batch, are skipped. The rows go in one
// statement each: SQLite has no array parameters, and within the one
// transaction on the embedded database a statement costs microseconds.
func (s *Store) InstanceCreateMany(ctx context.Context, p *db.InstanceCreateManyParams) ([]*db.Instance, error) {
	if len(p.Instances) == 0 {
		return []*db.Instance{}, nil
	}
	var created []*db.Instance
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		created = make([]*db.Instance, 0, len(p.Instances))
		for i, item := range p.Instances {
			if p.Lease != nil && i < p.Lease.Max {
				inst, err := insertLeased(ctx, q, p.WorkflowName, item.ID, item.Params, item.Metadata, now, p.Lease)
				if err != nil {
					return err
				}
				if inst == nil {
					continue // the id is taken
				}
				if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, item.ID, db.HookReasonCreate, now); err != nil {
					return err
				}
				created = append(created, inst)
				continue
			}
			row, err := q.InstanceInsertIfAbsent(ctx, litesqlc.InstanceInsertIfAbsentParams{
				WorkflowName: p.WorkflowName,
				InstanceID:   item.ID,
				Params:       jsonArg(item.Params),
				Metadata:     jsonArg(item.Metadata),
				Now:          now,
			})
			if isNoRows(err) {
				continue // the id is taken
			}
			if err != nil {
				return err
			}
			if err := q.TaskInsert(ctx, litesqlc.TaskInsertParams{
				WorkflowName: p.WorkflowName,
				InstanceID:   item.ID,
				Now:          now,
			}); err != nil {
				return err
			}
			if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, item.ID, db.HookReasonCreate, now); err != nil {
				return err
			}
			created = append(created, instanceFromRow(&row))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating instances: %w", interpretError(err))
	}
	return created, nil
}

// insertLeased inserts the instance of an eager start, running, and its
// first task leased to lease.Owner, unless the id is taken, in which case it
// returns nil and writes nothing. The instance's LeasedTask is set.
func insertLeased(ctx context.Context, q *litesqlc.Queries, workflowName, id string, params, metadata []byte, now int64, lease *db.CreateLease) (*db.Instance, error) {
	row, err := q.InstanceInsertStartedIfAbsent(ctx, litesqlc.InstanceInsertStartedIfAbsentParams{
		WorkflowName: workflowName,
		InstanceID:   id,
		Params:       jsonArg(params),
		Metadata:     jsonArg(metadata),
		Now:          now,
	})
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	task, err := q.TaskInsertLeased(ctx, litesqlc.TaskInsertLeasedParams{
		WorkflowName: workflowName,
		InstanceID:   id,
		Now:          now,
		LockOwner:    lease.Owner,
		LockedUntil:  micros(lease.LockedUntil),
	})
	if err != nil {
		return nil, err
	}
	inst := instanceFromRow(&row)
	inst.LeasedTask = taskFromRow(&task)
	return inst, nil
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

// InstancePause pauses an instance: queued and waiting become paused at once,
// running becomes waitingForPause (the runner parks it at the next step
// boundary), paused and waitingForPause stay as they are. It returns
// db.ErrTerminal for terminal instances.
func (s *Store) InstancePause(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	inst, err := s.instanceChange(ctx, p, false, func(q *litesqlc.Queries, now int64, row *litesqlc.WorkflowInstance) (*litesqlc.WorkflowInstance, error) {
		var (
			status         db.InstanceStatus
			pauseRequested bool
		)
		switch db.InstanceStatus(row.Status) {
		case db.StatusRunning:
			status, pauseRequested = db.StatusWaitingForPause, true
		case db.StatusQueued, db.StatusWaiting:
			status = db.StatusPaused
		default:
			return row, nil
		}
		return setStatus(ctx, q, p, now, status, pauseRequested)
	})
	if err != nil {
		return nil, fmt.Errorf("pausing instance: %w", err)
	}
	return inst, nil
}

// InstanceResume turns a paused instance into a queued one whose task is due
// now with a new version, which fences out a runner that loaded the paused
// instance and is about to park it; it records a resume hook entry when
// p.RecordHooks is set. Every other status, terminal ones included, is left
// alone.
func (s *Store) InstanceResume(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	inst, err := s.instanceChange(ctx, p, true, func(q *litesqlc.Queries, now int64, row *litesqlc.WorkflowInstance) (*litesqlc.WorkflowInstance, error) {
		if db.InstanceStatus(row.Status) != db.StatusPaused {
			return row, nil
		}
		after, err := setStatus(ctx, q, p, now, db.StatusQueued, false)
		if err != nil {
			return nil, err
		}
		if err := q.TaskUpsertDue(ctx, litesqlc.TaskUpsertDueParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			RunNumber:    row.RunNumber,
			Kind:         string(db.TaskKindResume),
			Priority:     int64(db.TaskKindResume.Priority()),
			Now:          now,
		}); err != nil {
			return nil, err
		}
		if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.ID, db.HookReasonResume, now); err != nil {
			return nil, err
		}
		return after, nil
	})
	if err != nil {
		return nil, fmt.Errorf("resuming instance: %w", err)
	}
	return inst, nil
}

// InstanceTerminate terminates a non-terminal instance and deletes its task,
// so a runner still holding it is fenced out. It returns db.ErrTerminal for
// terminal instances.
func (s *Store) InstanceTerminate(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	inst, err := s.instanceChange(ctx, p, false, func(q *litesqlc.Queries, now int64, _ *litesqlc.WorkflowInstance) (*litesqlc.WorkflowInstance, error) {
		after, err := setStatus(ctx, q, p, now, db.StatusTerminated, false)
		if err != nil {
			return nil, err
		}
		if err := q.TaskDelete(ctx, litesqlc.TaskDeleteParams{WorkflowName: p.WorkflowName, InstanceID: p.ID}); err != nil {
			return nil, err
		}
		return after, nil
	})
	if err != nil {
		return nil, fmt.Errorf("terminating instance: %w", err)
	}
	return inst, nil
}

// InstanceRestart starts a new run of any instance, terminal or not: run
// number + 1, queued, output, error and pause cleared, and a task due now
// whose version moved on so that a runner of the old run is fenced out. Steps
// and events of earlier runs are kept for audit and never delivered again.
// The new run is recorded as a create hook entry when p.RecordHooks is set.
func (s *Store) InstanceRestart(ctx context.Context, p *db.InstanceChangeParams) (*db.Instance, error) {
	var inst *db.Instance
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		row, err := q.InstanceRestart(ctx, litesqlc.InstanceRestartParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
		})
		if err != nil {
			return err
		}
		if err := q.TaskUpsertDue(ctx, litesqlc.TaskUpsertDueParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
			RunNumber:    row.RunNumber,
			Kind:         string(db.TaskKindRun),
			Priority:     int64(db.TaskKindRun.Priority()),
			Now:          now,
		}); err != nil {
			return err
		}
		if err := q.TaskResetAttempts(ctx, litesqlc.TaskResetAttemptsParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
		}); err != nil {
			return err
		}
		if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.ID, db.HookReasonCreate, now); err != nil {
			return err
		}
		inst = instanceFromRow(&row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("restarting instance: %w", interpretError(err))
	}
	return inst, nil
}

// instanceChange runs a management transition on an instance inside a write
// transaction, which no other writer can interleave with, and returns the
// instance after it. A terminal instance is db.ErrTerminal, or returned
// unchanged when terminalNoop is set.
func (s *Store) instanceChange(
	ctx context.Context,
	p *db.InstanceChangeParams,
	terminalNoop bool,
	change func(q *litesqlc.Queries, now int64, row *litesqlc.WorkflowInstance) (*litesqlc.WorkflowInstance, error),
) (*db.Instance, error) {
	var inst *db.Instance
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		row, err := q.InstanceGet(ctx, litesqlc.InstanceGetParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.ID,
		})
		if err != nil {
			return err
		}
		if db.InstanceStatus(row.Status).Terminal() {
			if !terminalNoop {
				return db.ErrTerminal
			}
			inst = instanceFromRow(&row)
			return nil
		}
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		after, err := change(q, now, &row)
		if err != nil {
			return err
		}
		inst = instanceFromRow(after)
		return nil
	})
	if err != nil {
		return nil, interpretError(err)
	}
	return inst, nil
}

func setStatus(ctx context.Context, q *litesqlc.Queries, p *db.InstanceChangeParams, now int64, status db.InstanceStatus, pauseRequested bool) (*litesqlc.WorkflowInstance, error) {
	row, err := q.InstanceSetStatus(ctx, litesqlc.InstanceSetStatusParams{
		Status:         string(status),
		PauseRequested: boolArg(pauseRequested),
		Now:            now,
		WorkflowName:   p.WorkflowName,
		InstanceID:     p.ID,
	})
	if err != nil {
		return nil, err
	}
	return &row, nil
}
