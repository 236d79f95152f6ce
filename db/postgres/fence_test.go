package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dftype"
)

// TestFenceSeesAReclaimCommittedWhileItWaits pins the fencing of the
// checkpoint statements against the race the statement snapshot opens: a
// checkpoint of a stale runner starts, then waits for the instance lock held
// by a transaction that reclaims the task (a new version, as a claim of
// another runner does) and commits. The checkpoint must check the version
// the reclaim committed, not the one of its snapshot: it reports
// db.ErrLeaseLost and writes nothing. The test waits for the checkpoint to
// be blocked on the reclaim's lock (pg_blocking_pids), never on a timer.
//
// The "task lock" cases reclaim without the instance lock, so the checkpoint
// gets the instance and waits on the task row itself: the group commit's
// share lock of the task (Continue and Complete checkpoints) must conflict
// with the reclaim's update and recheck the version it commits (a FOR KEY
// SHARE lock would neither wait nor recheck).
func TestFenceSeesAReclaimCommittedWhileItWaits(t *testing.T) {
	t.Parallel()
	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	type testCase struct {
		name     string
		query    string // the statement that waits, by its sqlc name
		write    func(ctx context.Context, s db.Store, p *db.CheckpointParams) error
		taskOnly bool // the reclaim does not lock the instance
	}
	cases := []testCase{
		{name: "batch", query: "CheckpointBatch", write: func(ctx context.Context, s db.Store, p *db.CheckpointParams) error {
			res, err := s.(db.BatchCheckpointer).CheckpointBatch(ctx, []*db.CheckpointParams{p})
			if err != nil {
				return err
			}
			return res[0].Err
		}},
		{name: "continue", query: "CheckpointBatch", write: func(ctx context.Context, s db.Store, p *db.CheckpointParams) error {
			_, err := s.Checkpoint(ctx, p)
			return err
		}},
		{name: "complete", query: "CheckpointBatch", write: func(ctx context.Context, s db.Store, p *db.CheckpointParams) error {
			p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`"done"`)
			_, err := s.Checkpoint(ctx, p)
			return err
		}},
		{name: "suspend", query: "CheckpointFence", write: func(ctx context.Context, s db.Store, p *db.CheckpointParams) error {
			p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, now.Add(time.Hour), db.TaskKindWake
			_, err := s.Checkpoint(ctx, p)
			return err
		}},
	}
	for _, tc := range cases[:3] {
		tc.name, tc.taskOnly = tc.name+" task lock", true
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			store := pgtest.NewStore(t, pgtest.WithMaxConns(4))
			ref := db.InstanceRef{WorkflowName: "w", ID: "i"}
			_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: ref.WorkflowName, ID: ref.ID, Now: &now})
			require.NoError(t, err)
			tasks, err := store.TaskClaim(ctx, &db.TaskClaimParams{
				Owner: "stale", WorkflowNames: []string{"w"}, Max: 1, Now: now, LockedUntil: now.Add(time.Minute),
			})
			require.NoError(t, err)
			require.Len(t, tasks, 1)
			stale := tasks[0].Task

			// The reclaim: lock the instance, then move the task on.
			tx, err := store.Pool().Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
			if !tc.taskOnly {
				_, err = tx.Exec(ctx, `SELECT 1 FROM workflow_instance
					WHERE workflow_name = $1 AND instance_id = $2 FOR NO KEY UPDATE`, ref.WorkflowName, ref.ID)
				require.NoError(t, err)
			}
			_, err = tx.Exec(ctx, `UPDATE workflow_task SET version = version + 1, lock_owner = 'fresh'
				WHERE id = $1`, stale.ID)
			require.NoError(t, err)

			done := make(chan error, 1)
			go func() {
				done <- tc.write(ctx, store, &db.CheckpointParams{
					Task:         db.TaskRef{ID: stale.ID, Version: stale.Version},
					WorkflowName: ref.WorkflowName,
					InstanceID:   ref.ID,
					RunNumber:    1,
					Now:          now.Add(time.Second),
					Steps: []db.StepWrite{{
						Key: "s", Type: db.StepTypeDo, Status: db.StepStatusComplete,
						Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`),
					}},
				})
			}()

			// Wait until the checkpoint is blocked by the reclaim (whose
			// server process is asked: through a pooler the connection's
			// own PID is the pooler's).
			var pid int
			require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
			require.Eventually(t, func() bool {
				var n int
				err := store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE '%name: ' || $2 || ' %'`,
					pid, tc.query).Scan(&n)
				return err == nil && n == 1
			}, 30*time.Second, 5*time.Millisecond, "the checkpoint never waited for the reclaim")
			require.NoError(t, tx.Commit(ctx))

			require.ErrorIs(t, <-done, db.ErrLeaseLost)
			steps, err := store.StepList(ctx, &db.StepListParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID, RunNumber: 1})
			require.NoError(t, err)
			require.Empty(t, steps)
			task, err := store.TaskGet(ctx, ref)
			require.NoError(t, err)
			require.Equal(t, stale.Version+1, task.Version)
			require.Equal(t, db.TaskStatusProcessing, task.Status)
			require.Equal(t, "fresh", task.LockOwner)
			require.Equal(t, now.Add(time.Minute), *task.LockedUntil)
			inst, err := store.InstanceGet(ctx, ref)
			require.NoError(t, err)
			require.Equal(t, dftype.StatusRunning, inst.Status)
		})
	}
}
