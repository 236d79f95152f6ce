package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// TaskClaim leases up to p.Max due tasks of the named workflows on the
// named queues in one write transaction: pending tasks with run_at <= p.Now
// and processing tasks whose lease expired, higher instance priority first,
// then resuming kinds, then oldest run_at. Each claimed
// task's version and attempts go up by one (and its lease losses, when the
// claim took over an expired lease) and its queued or waiting instance
// becomes running. Tasks of paused and terminal instances are never
// claimed. SQLite has no SKIP LOCKED and needs none: the transaction holds
// the database's single write lock, so concurrent claims run one after the
// other and never see each other's tasks as due.
func (s *Store) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]db.Claim, error) {
	if p.Max <= 0 || len(p.WorkflowNames) == 0 {
		return []db.Claim{}, nil
	}
	var tasks []db.Claim
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, nowArg(p.Now))
		if err != nil {
			return err
		}
		rows, err := q.TaskClaim(ctx, litesqlc.TaskClaimParams{
			LockOwner:     p.Owner,
			LockedUntil:   micros(p.LockedUntil),
			WorkflowNames: listArg(p.WorkflowNames),
			Queues:        listArg(p.Queues),
			Now:           now,
			Max:           int64(p.Max),

			ExcludeSuspects: boolArg(p.ExcludeSuspects),
		})
		if err != nil {
			return err
		}
		tasks = make([]db.Claim, len(rows))
		if len(rows) == 0 {
			return nil
		}
		ids := make([]int64, len(rows))
		for i := range rows {
			ids[i] = rows[i].ID
			tasks[i].Task = taskFromRow(&rows[i])
		}
		fresh, err := q.InstanceListFresh(ctx, listArg(ids))
		if err != nil {
			return err
		}
		if err := q.InstanceStartClaimed(ctx, litesqlc.InstanceStartClaimedParams{
			Now:     now,
			TaskIds: listArg(ids),
		}); err != nil {
			return err
		}
		// The instances of runs that never started, as the claim left them;
		// their starts are logged in the claim's transaction.
		started := make(map[[2]string]*db.Instance, len(fresh))
		var log lifecycleBuf
		for i := range fresh {
			inst := instanceFromRow(&fresh[i])
			inst.Status = dftype.StatusRunning
			at := timeFromMicros(now)
			inst.StartedAt, inst.UpdatedAt = &at, at
			started[[2]string{inst.WorkflowName, inst.ID}] = inst
			s.bufferLifecycle(&log, now, transition.StartedEvent(inst.WorkflowName, inst.ID, inst.RunNumber, at))
		}
		if err := log.flush(ctx, q); err != nil {
			return err
		}
		for i := range tasks {
			t := tasks[i].Task
			tasks[i].FreshRun = started[[2]string{t.WorkflowName, t.InstanceID}]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claiming tasks: %w", interpretError(err))
	}
	// RETURNING has no order; the claim order is the contract's.
	slices.SortFunc(tasks, func(ca, cb db.Claim) int {
		a, b := ca.Task, cb.Task
		return cmp.Or(
			cmp.Compare(b.InstancePriority, a.InstancePriority), // higher first
			cmp.Compare(a.Kind.Priority(), b.Kind.Priority()),
			a.RunAt.Compare(b.RunAt),
			cmp.Compare(a.ID, b.ID),
		)
	})
	return tasks, nil
}

// TaskHeartbeat extends the lease of a held task; db.ErrLeaseLost when the
// task's version moved on or it is no longer processing.
func (s *Store) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) (err error) {
		n, err = q.TaskHeartbeat(ctx, litesqlc.TaskHeartbeatParams{
			LockedUntil:  micros(p.LockedUntil),
			RunningSteps: textArg(string(db.EncodeRunningSteps(p.Task.Version, p.RunningSteps))),
			ID:           p.Task.ID,
			Version:      p.Task.Version,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("extending task lease: %w", interpretError(err))
	}
	if n == 0 {
		return db.ErrLeaseLost
	}
	return nil
}

// TaskRelease gives a held task back to the queue, pending and due at
// p.RunAt, recording p.LastError (and a lease loss with p.CountLeaseLoss);
// db.ErrLeaseLost when the version moved on.
func (s *Store) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) (err error) {
		n, err = q.TaskRelease(ctx, litesqlc.TaskReleaseParams{
			RunAt:          micros(p.RunAt),
			LastError:      textArg(p.LastError),
			ID:             p.Task.ID,
			Version:        p.Task.Version,
			CountLeaseLoss: boolArg(p.CountLeaseLoss),
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("releasing task: %w", interpretError(err))
	}
	if n == 0 {
		return db.ErrLeaseLost
	}
	return nil
}

// TaskGet returns the task of an instance, or db.ErrNotFound when it has none.
func (s *Store) TaskGet(ctx context.Context, ref db.InstanceRef) (*db.Task, error) {
	row, err := s.queriesFor(ctx, false).TaskGet(ctx, litesqlc.TaskGetParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("getting task: %w", interpretError(err))
	}
	t := taskFromRow(&row)
	if row.RunningSteps != nil {
		db.DecodeRunningSteps([]byte(*row.RunningSteps), t)
	}
	return t, nil
}

// TaskNextRunAt returns the earliest time at which TaskClaim would find work
// for the named workflows on the named queues: the earliest run_at of a pending task or lease
// expiry of a processing one, ignoring paused and terminal instances. It
// returns nil when there is none.
func (s *Store) TaskNextRunAt(ctx context.Context, p *db.TaskNextRunAtParams) (*time.Time, error) {
	if len(p.WorkflowNames) == 0 {
		return nil, nil
	}
	next, err := s.queriesFor(ctx, false).TaskNextRunAt(ctx, litesqlc.TaskNextRunAtParams{WorkflowNames: listArg(p.WorkflowNames), Queues: listArg(p.Queues)})
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finding next task time: %w", interpretError(err))
	}
	return new(timeFromMicros(next)), nil
}
