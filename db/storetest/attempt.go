package storetest

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// testAttempts covers retries and deadlines in the store: attempts kept in
// history, max attempts that do not overflow, the running steps a
// heartbeat reports, deadlines written at create, and a workflow retry's
// checkpoint.
func testAttempts(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("MaxAttemptsDoNotOverflow", func(t *testing.T) {
		// A retry limit of math.MaxInt (or 1<<32 + 5) used to reach
		// Postgres as int32(limit+1): a wrong, even negative, number in
		// history. Every path that writes a step stores what a 32-bit
		// column holds, or UnlimitedAttempts.
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		// The last, in range, is stored as it is.
		huge := []int{math.MaxInt, 1<<32 + 6, math.MaxInt32 + 1, -5, 7}
		for i, n := range huge {
			p := b.checkpoint(task)
			// Complete rows go through the group commit; the retrying row
			// of the suspend below through the fenced statements.
			p.Steps = []db.StepWrite{{Key: "s" + string(rune('0'+i)), Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: n, Result: json.RawMessage(`1`)}}
			_, err := b.store.Checkpoint(b.ctx, p)
			require.NoError(t, err)
		}
		p := b.checkpoint(task)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(time.Minute), db.TaskKindRetry
		p.Steps = []db.StepWrite{{Key: "r", Type: db.StepTypeDo, Status: db.StepStatusRetrying, Attempts: 3, MaxAttempts: math.MaxInt, NextRetryAt: new(b.at(time.Minute))}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		p = b.checkpoint(task)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(time.Minute), db.TaskKindRetry
		p.Steps = []db.StepWrite{{Key: "r7", Type: db.StepTypeDo, Status: db.StepStatusRetrying, Attempts: 2, MaxAttempts: 7, NextRetryAt: new(b.at(time.Minute))}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost, "the suspend above gave the task back")
		task = b.claimIDAt(t, "a", b.at(time.Minute))
		p = b.checkpoint(task)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(2*time.Minute), db.TaskKindRetry
		p.Steps = []db.StepWrite{{Key: "r7", Type: db.StepTypeDo, Status: db.StepStatusRetrying, Attempts: 2, MaxAttempts: 7, NextRetryAt: new(b.at(2 * time.Minute))}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		byKey := map[string]*db.Step{}
		for _, st := range b.steps(t, "a", 1) {
			byKey[st.Key] = st
		}
		require.Len(t, byKey, len(huge)+2)
		for i, n := range huge {
			want := db.UnlimitedAttempts
			if n == 7 {
				want = 7
			}
			require.Equal(t, want, byKey["s"+string(rune('0'+i))].MaxAttempts, "group-committed step with max %d", n)
		}
		require.Equal(t, db.UnlimitedAttempts, byKey["r"].MaxAttempts)
		require.Equal(t, 3, byKey["r"].Attempts)
		require.Equal(t, 7, byKey["r7"].MaxAttempts, "a fenced write keeps an in-range max")
	})

	t.Run("FailedAttemptsKept", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")

		// Attempt 1 fails and retries (a suspend), attempt 2 fails for good
		// (a continue, then the run errors).
		start1 := b.at(time.Second)
		p := b.checkpoint(task)
		p.Now = b.at(2 * time.Second)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(time.Minute), db.TaskKindRetry
		p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusRetrying, Attempts: 1, MaxAttempts: 2,
			NextRetryAt: new(b.at(time.Minute)), ErrorName: "E1", ErrorMessage: "first", StartedAt: &start1}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		task = b.claimIDAt(t, "a", b.at(time.Minute))
		start2 := b.at(time.Minute + time.Second)
		p = b.checkpoint(task)
		p.Now = b.at(time.Minute + 3*time.Second)
		p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: 2, MaxAttempts: 2,
			ErrorName: "E2", ErrorMessage: "second", StartedAt: &start2}}
		require.False(t, p.Batchable(), "a failed attempt commits alone")
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		// A repetition (a retried commit) keeps one row per attempt.
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		attempts, err := b.store.StepAttemptList(b.ctx, &db.StepAttemptListParams{WorkflowName: workflowName, InstanceID: "a", RunNumber: 1})
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.Equal(t, "s", attempts[0].StepKey)
		require.Equal(t, 1, attempts[0].Attempt)
		require.Equal(t, 1, attempts[0].RunAttempt)
		require.Equal(t, start1, *attempts[0].StartedAt)
		require.Equal(t, b.at(2*time.Second), attempts[0].EndedAt)
		require.Equal(t, "E1", attempts[0].ErrorName)
		require.Equal(t, "first", attempts[0].ErrorMessage)
		require.Equal(t, 2, attempts[1].Attempt)
		require.Equal(t, start2, *attempts[1].StartedAt)
		require.Equal(t, "E2", attempts[1].ErrorName)

		st := b.steps(t, "a", 1)[0]
		require.Equal(t, start2, *st.StartedAt, "the step row carries its latest attempt's start")

		// A stale holder's failed attempt writes nothing.
		current := b.claimIDAt(t, "a", b.at(time.Minute+2*lease))
		_ = current
		p.Steps[0].Attempts = 3
		_, err = b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrLeaseLost)
		attempts, err = b.store.StepAttemptList(b.ctx, &db.StepAttemptListParams{WorkflowName: workflowName, InstanceID: "a", RunNumber: 1})
		require.NoError(t, err)
		require.Len(t, attempts, 2)
	})

	t.Run("FailedAttemptEndsRun", func(t *testing.T) {
		// The checkpoint that records a step's final failure and errors the
		// run keeps the attempt too (the attempt row goes before the task
		// is deleted).
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		p := b.checkpoint(task)
		p.Outcome, p.ErrorName, p.ErrorMessage = db.OutcomeError, "E", "boom"
		p.Steps = []db.StepWrite{{Key: "s", Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: 1, MaxAttempts: 1, ErrorName: "E", ErrorMessage: "boom", StartedAt: new(b.now)}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusErrored, b.get(t, "a").Status)
		attempts, err := b.store.StepAttemptList(b.ctx, &db.StepAttemptListParams{WorkflowName: workflowName, InstanceID: "a", RunNumber: 1})
		require.NoError(t, err)
		require.Len(t, attempts, 1)
	})

	t.Run("RunningStepsByHeartbeat", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		require.Empty(t, b.task(t, "a").RunningSteps, "nothing before the first heartbeat")
		running := []db.RunningStep{{Key: "charge", Attempt: 2, StartedAt: b.at(time.Second)}}
		require.NoError(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(task), LockedUntil: b.at(lease), RunningSteps: running}))
		require.Equal(t, running, b.task(t, "a").RunningSteps)

		// Another holder's claim hides the old holder's steps.
		b.claimIDAt(t, "a", b.at(2*lease))
		require.Empty(t, b.task(t, "a").RunningSteps)
	})

	t.Run("DeadlineAtCreate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		deadline := b.at(time.Hour)
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "a", Params: json.RawMessage(`{}`), Now: new(b.now), DeadlineAt: &deadline,
		})
		require.NoError(t, err)
		require.Equal(t, deadline, *res.Instance.DeadlineAt)
		require.Equal(t, 1, res.Instance.RunAttempt)
		require.Equal(t, res.Instance, b.get(t, "a"))

		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now),
			Instances: []db.InstanceCreateItem{{ID: "b", DeadlineAt: &deadline}, {ID: "c"}},
		})
		require.NoError(t, err)
		require.Len(t, created, 2)
		require.Equal(t, deadline, *b.get(t, "b").DeadlineAt)
		require.Equal(t, b.get(t, "b"), created[0].Instance)
		require.Nil(t, b.get(t, "c").DeadlineAt)

		leased, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "d", Now: new(b.now), DeadlineAt: &deadline, Lease: b.eagerLease(1),
		})
		require.NoError(t, err)
		require.Equal(t, deadline, *leased.Instance.DeadlineAt)
		require.Equal(t, deadline, *b.get(t, "d").DeadlineAt)

		// A claim's fresh run carries the deadline.
		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{workflowName}, Max: 10, Now: b.now, LockedUntil: b.now.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, claims, 3)
		for _, c := range claims {
			require.NotNil(t, c.FreshRun, "%s never started", c.Task.InstanceID)
			requireFreshRun(t, b, &c)
			if c.Task.InstanceID == "c" {
				require.Nil(t, c.FreshRun.DeadlineAt)
			} else {
				require.Equal(t, deadline, *c.FreshRun.DeadlineAt, c.Task.InstanceID)
			}
		}
	})

	t.Run("RetryRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "done", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`1`)}}
		_, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "bad", Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: 1, MaxAttempts: 1, ErrorName: "E", StartedAt: new(b.now)}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		// The run fails: a workflow retry suspends it instead of ending it.
		p = b.checkpoint(task)
		p.Outcome, p.NextRunAt, p.NextKind = db.OutcomeSuspend, b.at(time.Minute), db.TaskKindRetry
		p.RetryRun = &db.RunRetry{ResetSteps: []string{"bad"}, ErrorName: "E", ErrorMessage: "run failed"}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)

		inst := b.get(t, "a")
		require.Equal(t, dftype.StatusWaiting, inst.Status)
		require.Equal(t, 2, inst.RunAttempt)
		require.Equal(t, "E", inst.ErrorName)
		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 1)
		require.Equal(t, "done", steps[0].Key, "the failed step is gone, the completed one kept")
		require.Equal(t, db.TaskKindRetry, b.task(t, "a").Kind)
		require.Equal(t, b.at(time.Minute), b.task(t, "a").RunAt)

		// The next attempt's failures are kept under run attempt 2.
		task = b.claimIDAt(t, "a", b.at(time.Minute))
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "bad", Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: 1, MaxAttempts: 1, ErrorName: "E", StartedAt: new(b.now)}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		attempts, err := b.store.StepAttemptList(b.ctx, &db.StepAttemptListParams{WorkflowName: workflowName, InstanceID: "a", RunNumber: 1})
		require.NoError(t, err)
		require.Len(t, attempts, 2)
		require.Equal(t, []int{1, 2}, []int{attempts[0].RunAttempt, attempts[1].RunAttempt})

		// A stale retry changes nothing.
		stale := b.checkpoint(&db.Task{ID: task.ID, Version: task.Version - 1, WorkflowName: workflowName, InstanceID: "a", RunNumber: 1})
		stale.Outcome, stale.NextRunAt, stale.NextKind = db.OutcomeSuspend, b.at(time.Minute), db.TaskKindRetry
		stale.RetryRun = &db.RunRetry{ResetSteps: []string{"done"}}
		_, err = b.store.Checkpoint(b.ctx, stale)
		require.ErrorIs(t, err, db.ErrLeaseLost)
		require.Equal(t, 2, b.get(t, "a").RunAttempt)
		require.Len(t, b.steps(t, "a", 1), 2)

		// A restart starts again from run attempt 1.
		restarted, err := b.store.InstanceRestart(b.ctx, b.change("a"))
		require.NoError(t, err)
		require.Equal(t, 1, restarted.RunAttempt)
		require.Equal(t, 1, b.get(t, "a").RunAttempt)
	})
}
