package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// claimPlanSettings precede TaskClaim in its pipeline: planner settings
// local to the claim's transaction that leave the planner only ordered plain
// index scans of the task table, whatever the statistics say (there may be
// none: tables that were never analyzed). Each branch of the claim is then
// an ordered scan of its partial index that stops after max rows, and marks
// the entries of dead rows it meets so that no later claim visits them
// again; a bitmap scan would revisit every dead row on every claim until
// vacuum runs (see TaskClaim in task.sql). Sorts stay enabled: the claimed
// rows must be sorted, and a disabled node that cannot be avoided adds its
// huge disabling cost to the plan, which then crosses the JIT thresholds and
// spends a second compiling a statement that runs in a millisecond. JIT is
// switched off for the same reason, should the plan's cost ever cross them.
//
// The claim is also planned afresh at every execution (force_custom_plan):
// the generic plan Postgres would cache after five executions of the
// prepared statement is costed once, often while the tables are still
// empty, where every index of workflow_instance looks as good as its
// primary key, and is kept until statistics change, which without
// autovacuum is never. A custom plan costs the tables as they are.
var claimPlanSettings = []string{
	"SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), " +
		"set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_custom_plan', true)",
}

// TaskClaim leases up to p.Max due tasks of the named workflows in one
// statement: pending tasks with run_at <= p.Now and processing tasks whose
// lease expired, resuming kinds first, then oldest run_at. Each claimed task's
// version and attempts go up by one and its queued or waiting instance
// becomes running. Tasks of paused and terminal instances are never claimed,
// and rows another transaction holds locked are skipped, never waited on.
func (s *Store) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]*db.Task, error) {
	if p.Max <= 0 || len(p.WorkflowNames) == 0 {
		return []*db.Task{}, nil
	}
	params := pgsqlc.TaskClaimParams{
		WorkflowNames: p.WorkflowNames,
		Now:           nowArg(p.Now),
		Max:           int32(min(p.Max, math.MaxInt32)),
		LockOwner:     p.Owner,
		LockedUntil:   p.LockedUntil,
	}
	var rows []pgsqlc.TaskClaimRow
	err := s.pipeline(ctx, claimPlanSettings, nil, func(q *pgsqlc.Queries) error {
		var err error
		rows, err = q.TaskClaim(ctx, params)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming tasks: %w", interpretError(err))
	}
	tasks := make([]*db.Task, len(rows))
	for i := range rows {
		row := pgsqlc.WorkflowTask(rows[i])
		tasks[i] = taskFromRow(&row)
	}
	return tasks, nil
}

// TaskHeartbeat extends the lease of a held task; db.ErrLeaseLost when the
// task's version moved on or it is no longer processing.
func (s *Store) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	n, err := s.queries.TaskHeartbeat(ctx, pgsqlc.TaskHeartbeatParams{
		LockedUntil: p.LockedUntil,
		ID:          p.Task.ID,
		Version:     p.Task.Version,
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
// p.RunAt, recording p.LastError; db.ErrLeaseLost when the version moved on.
// When p.RunAt has come by the database clock (the call carries no "now"),
// it notifies the wake channel in the same transaction.
func (s *Store) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.TaskRelease(ctx, pgsqlc.TaskReleaseParams{
			RunAt:     p.RunAt,
			LastError: textArg(p.LastError),
			ID:        p.Task.ID,
			Version:   p.Task.Version,
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
	return taskFromRow(&row), nil
}

// TaskNextRunAt returns the earliest time at which TaskClaim would find work
// for the named workflows: the earliest run_at of a pending task or lease
// expiry of a processing one, ignoring paused and terminal instances. It
// returns nil when there is none.
func (s *Store) TaskNextRunAt(ctx context.Context, workflowNames []string) (*time.Time, error) {
	if len(workflowNames) == 0 {
		return nil, nil
	}
	next, err := s.queries.TaskNextRunAt(ctx, workflowNames)
	if isNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("finding next task time: %w", interpretError(err))
	}
	next = next.UTC()
	return &next, nil
}
