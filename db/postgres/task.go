package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/dftype"
)

// planSettings precede the statements of the hot path in their pipelines
// (TaskClaim, CheckpointBatch, and those of EventSend and
// checkpointConsume): planner settings local to the transaction that leave
// the planner only plain index scans joined by nested loops, whatever the
// statistics say (there may be none: tables that were never analyzed): the
// statements join a few rows of their own to a few rows of the tables, by
// key. Each branch of the claim is then an ordered scan of its partial index
// that stops after max rows, and marks the entries of dead rows it meets so
// that no later claim visits them again; a bitmap scan would revisit every
// dead row on every claim until vacuum runs (see TaskClaim in task.sql).
// Sorts stay enabled: the claimed rows must be sorted, and a disabled node
// that cannot be avoided adds its huge disabling cost to the plan, which
// then crosses the JIT thresholds and spends a second compiling a statement
// that runs in a millisecond. JIT is switched off for the same reason,
// should the plan's cost ever cross them.
//
// These statements always run their generic plan (force_generic_plan), made
// once per connection under these settings and kept until statistics change:
// a plan that is right for any statistics needs no replanning, and planning
// a statement of five parts costs more than running it (about a millisecond
// each call). Left to choose, Postgres would replan the group commit at
// every call, as a custom plan knows the real length of its arrays and so
// always looks cheaper than the generic one. Without the disabled scans, a
// plan made while the tables are small (a scan of the instance table joined
// by hash, or a bitmap scan of the queue) would be kept once they are large,
// which without autovacuum is forever. The instances these statements join
// are found by primary key even by a plan made on empty tables, as the list
// indexes of workflow_instance cannot serve a lookup (migration 00007).
var planSettings = []string{
	"SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), " +
		"set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), " +
		"set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)",
}

// TaskClaim leases up to p.Max due tasks of the named workflows on the
// named queues in one statement: pending tasks with run_at <= p.Now and
// processing tasks whose lease expired, higher instance priority first,
// then resuming kinds, then oldest run_at. Each claimed task's
// version and attempts go up by one (and its lease losses, when the claim
// took over an expired lease) and its queued or waiting instance becomes
// running. Tasks of paused and terminal instances are never claimed,
// and rows another transaction holds locked are skipped, never waited on.
// A claimed run that never started comes with its instance (Claim.FreshRun),
// and its instance.started is logged in the claim's statement.
func (s *Store) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]db.Claim, error) {
	if p.Max <= 0 || len(p.WorkflowNames) == 0 {
		return []db.Claim{}, nil
	}
	params := pgsqlc.TaskClaimParams{
		WorkflowNames: p.WorkflowNames,
		Queues:        emptyIfNil(p.Queues),
		Now:           nowArg(p.Now),
		Max:           int32(min(p.Max, math.MaxInt32)),
		LockOwner:     p.Owner,
		LockedUntil:   p.LockedUntil,

		ExcludeSuspects: p.ExcludeSuspects,
		// A fresh run's instance.started goes in the claim's statement.
		LogStarted: s.logging(),
	}
	var rows []pgsqlc.TaskClaimRow
	err := s.pipeline(ctx, planSettings, nil, func(q *pgsqlc.Queries) error {
		var err error
		rows, err = q.TaskClaim(ctx, params)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming tasks: %w", interpretError(err))
	}
	tasks := make([]db.Claim, len(rows))
	for i := range rows {
		r := &rows[i]
		tasks[i].Task = taskFromRow(&pgsqlc.WorkflowTask{
			ID: r.ID, WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, RunNumber: r.RunNumber,
			Kind: r.Kind, Priority: r.Priority, RunAt: r.RunAt, Status: r.Status, LockOwner: r.LockOwner,
			LockedUntil: r.LockedUntil, Version: r.Version, Attempts: r.Attempts, LastError: r.LastError,
			LeaseLosses: r.LeaseLosses, Queue: r.Queue, InstancePriority: r.InstancePriority,
		})
		if r.Fresh != nil && *r.Fresh && r.InstanceRunNumber != nil && r.InstanceCreatedAt != nil &&
			r.InstanceUpdatedAt != nil && r.InstancePauseRequested != nil {
			tasks[i].FreshRun = instanceFromRow(&pgsqlc.WorkflowInstance{
				WorkflowName:   r.WorkflowName,
				InstanceID:     r.InstanceID,
				Status:         string(dftype.StatusRunning),
				Params:         r.InstanceParams,
				Metadata:       r.InstanceMetadata,
				PauseRequested: *r.InstancePauseRequested,
				RunNumber:      *r.InstanceRunNumber,
				CreatedAt:      *r.InstanceCreatedAt,
				UpdatedAt:      *r.InstanceUpdatedAt,
				StartedAt:      r.InstanceStartedAt,
				RetentionUntil: r.InstanceRetentionUntil,
				Namespace:      deref(r.InstanceNamespace),
				Queue:          r.Queue,
				Priority:       int32(r.InstancePriority),
				DedupeKey:      r.InstanceDedupeKey,
				DeadlineAt:     r.InstanceDeadlineAt,
				RunAttempt:     1, // a run that never started was never retried
				Limited:        r.InstanceLimited != nil && *r.InstanceLimited,

				ParentWorkflowName: r.InstanceParentWorkflowName,
				ParentInstanceID:   r.InstanceParentInstanceID,
				ParentRunNumber:    r.InstanceParentRunNumber,
				ParentStepKey:      r.InstanceParentStepKey,
				ParentPolicy:       r.InstanceParentPolicy,
				TraceContext:       r.InstanceTraceContext,
			})
		}
	}
	return tasks, nil
}

// TaskHeartbeat extends the lease of a held task; db.ErrLeaseLost when the
// task's version moved on or it is no longer processing.
func (s *Store) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	n, err := s.queries.TaskHeartbeat(ctx, pgsqlc.TaskHeartbeatParams{
		LockedUntil:  p.LockedUntil,
		RunningSteps: db.EncodeRunningSteps(p.Task.Version, p.RunningSteps),
		ID:           p.Task.ID,
		Version:      p.Task.Version,
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
// When p.RunAt has come by the database clock (the call carries no "now"),
// it notifies the wake channel in the same transaction.
func (s *Store) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.TaskRelease(ctx, pgsqlc.TaskReleaseParams{
			RunAt:          p.RunAt,
			LastError:      textArg(p.LastError),
			ID:             p.Task.ID,
			Version:        p.Task.Version,
			CountLeaseLoss: p.CountLeaseLoss,
		})
		if isNoRows(err) {
			return db.ErrLeaseLost
		}
		if err != nil || !row.Due {
			return err
		}
		return s.notifyWake(ctx, q, row.WorkflowName)
	})
	if errors.Is(err, db.ErrLeaseLost) {
		return err
	}
	if err != nil {
		return fmt.Errorf("releasing task: %w", interpretError(err))
	}
	return nil
}

// TaskGet returns the task of an instance, or db.ErrNotFound when it has none.
func (s *Store) TaskGet(ctx context.Context, ref db.InstanceRef) (*db.Task, error) {
	row, err := s.queries.TaskGet(ctx, pgsqlc.TaskGetParams{
		WorkflowName: ref.WorkflowName,
		InstanceID:   ref.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("getting task: %w", interpretError(err))
	}
	return taskWithRunningSteps(&row), nil
}

// TaskNextRunAt returns the earliest time at which TaskClaim would find work
// for the named workflows on the named queues: the earliest run_at of a pending task or lease
// expiry of a processing one, ignoring paused and terminal instances. It
// returns nil when there is none.
func (s *Store) TaskNextRunAt(ctx context.Context, p *db.TaskNextRunAtParams) (*time.Time, error) {
	if len(p.WorkflowNames) == 0 {
		return nil, nil
	}
	next, err := s.queries.TaskNextRunAt(ctx, pgsqlc.TaskNextRunAtParams{WorkflowNames: p.WorkflowNames, Queues: emptyIfNil(p.Queues)})
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finding next task time: %w", interpretError(err))
	}
	next = next.UTC()
	return &next, nil
}
