package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

func testCheckpointBatch(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("CommitsEachFencedItem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		var tasks []*db.Task
		for _, id := range []string{"c", "a", "b"} {
			b.create(t, id)
			tasks = append(tasks, b.claim(t, id))
		}
		// b's lease is lost: the instance was restarted, at a new task version.
		staleB := tasks[2]
		_, err := b.store.InstanceRestart(b.ctx, b.change("b"))
		require.NoError(t, err)
		_, err = b.store.InstancePause(b.ctx, b.change("a"))
		require.NoError(t, err)
		bBefore, bTaskBefore := b.get(t, "b"), b.task(t, "b")
		instBefore := map[string]*db.Instance{"c": b.get(t, "c"), "a": b.get(t, "a")}
		taskBefore := map[string]*db.Task{"c": b.task(t, "c"), "a": b.task(t, "a")}

		var ps []*db.CheckpointParams
		for i, task := range tasks {
			p := b.checkpoint(task)
			p.Now = b.at(2 * time.Second)
			p.Steps = []db.StepWrite{{
				Key: fmt.Sprintf("step-%d", i), Type: db.StepTypeDo, Status: db.StepStatusComplete,
				Attempts: 1, MaxAttempts: 6, Timeout: time.Minute, Result: json.RawMessage(`{"n": ` + fmt.Sprint(i) + `}`),
			}}
			ps = append(ps, p)
		}
		ps[2].Task = ref(staleB)
		res, err := b.batcher(t).CheckpointBatch(b.ctx, ps)
		require.NoError(t, err)
		require.Len(t, res, 3)

		require.NoError(t, res[0].Err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusRunning}, res[0].Result)
		require.NoError(t, res[1].Err)
		require.True(t, res[1].Result.PauseRequested, "a pause requested meanwhile is reported")
		require.ErrorIs(t, res[2].Err, db.ErrLeaseLost)
		require.Nil(t, res[2].Result)

		for i, id := range []string{"c", "a"} {
			steps := b.steps(t, id, 1)
			require.Len(t, steps, 1)
			require.Equal(t, fmt.Sprintf("step-%d", i), steps[0].Key)
			require.Equal(t, db.StepStatusComplete, steps[0].Status)
			require.Equal(t, `{"n": `+fmt.Sprint(i)+`}`, string(steps[0].Result), "the result is kept byte for byte")
			require.Equal(t, time.Minute, steps[0].Timeout)
			require.Nil(t, steps[0].WakeAt)
			require.Nil(t, steps[0].NextRetryAt)
			require.Empty(t, steps[0].ErrorName)
			requireTimePtr(t, b.at(2*time.Second), steps[0].CompletedAt)
			// Only the step is written: the lease is the heartbeat's to
			// renew, and updated_at moves on status transitions.
			require.Equal(t, taskBefore[id], b.task(t, id), "the task is not written")
			require.Equal(t, instBefore[id], b.get(t, id), "the instance is not written")
		}
		require.Equal(t, bBefore, b.get(t, "b"), "the stale item changed nothing")
		require.Equal(t, bTaskBefore, b.task(t, "b"))
		require.Empty(t, b.steps(t, "b", 1))
		require.Empty(t, b.steps(t, "b", 2))
	})

	t.Run("NullableStepColumns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		p := b.checkpoint(task)
		wake := b.at(time.Minute)
		p.Steps = []db.StepWrite{
			{Key: "nap", Type: db.StepTypeSleep, Status: db.StepStatusComplete, WakeAt: &wake},
			{Key: "wait", Type: db.StepTypeWaitForEvent, Status: db.StepStatusErrored, WakeAt: &wake,
				WaitEventType: "go", ErrorName: "EventTimeoutError", ErrorMessage: "no event"},
		}
		res, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{p})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		steps := b.steps(t, "a", 1)
		require.Len(t, steps, 2)
		requireTimePtr(t, wake, steps[0].WakeAt)
		require.Nil(t, steps[0].Result)
		require.Equal(t, "go", steps[1].WaitEventType)
		require.Equal(t, "EventTimeoutError", steps[1].ErrorName)
		require.Equal(t, "no event", steps[1].ErrorMessage)
	})

	t.Run("EndsRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		tasks := map[string]*db.Task{}
		for _, id := range []string{"done", "going", "failed", "stale"} {
			b.create(t, id)
			tasks[id] = b.claim(t, id)
		}
		// stale's lease is lost: the instance was restarted meanwhile.
		_, err := b.store.InstanceRestart(b.ctx, b.change("stale"))
		require.NoError(t, err)
		staleBefore, staleTaskBefore := b.get(t, "stale"), b.task(t, "stale")

		step := func(key string) []db.StepWrite {
			return []db.StepWrite{{Key: key, Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, Result: json.RawMessage(`"` + key + `"`)}}
		}
		done := b.checkpoint(tasks["done"])
		done.Outcome, done.Output, done.Steps = db.OutcomeComplete, json.RawMessage(`{"total": 42}`), step("last")
		going := b.checkpoint(tasks["going"])
		going.Steps = step("next")
		failed := b.checkpoint(tasks["failed"])
		failed.Outcome, failed.ErrorName, failed.ErrorMessage = db.OutcomeError, "PaymentError", "card declined"
		stale := b.checkpoint(tasks["stale"])
		stale.Outcome, stale.Output = db.OutcomeComplete, json.RawMessage(`1`)
		for _, p := range []*db.CheckpointParams{done, going, failed, stale} {
			p.Now = b.at(3 * time.Second)
		}

		res, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{done, going, failed, stale})
		require.NoError(t, err)
		require.Len(t, res, 4)
		require.NoError(t, res[0].Err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusComplete}, res[0].Result)
		require.NoError(t, res[1].Err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusRunning}, res[1].Result)
		require.NoError(t, res[2].Err)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusErrored}, res[2].Result)
		require.ErrorIs(t, res[3].Err, db.ErrLeaseLost)

		inst := b.get(t, "done")
		require.Equal(t, dftype.StatusComplete, inst.Status)
		require.JSONEq(t, `{"total": 42}`, string(inst.Output))
		require.Empty(t, inst.ErrorName)
		requireTimePtr(t, b.at(3*time.Second), inst.CompletedAt)
		require.Equal(t, b.at(3*time.Second), inst.UpdatedAt.UTC())
		steps := b.steps(t, "done", 1)
		require.Len(t, steps, 1, "the steps of an ending checkpoint are written with it")
		require.Equal(t, "last", steps[0].Key)

		inst = b.get(t, "failed")
		require.Equal(t, dftype.StatusErrored, inst.Status)
		require.Nil(t, inst.Output)
		require.Equal(t, "PaymentError", inst.ErrorName)
		require.Equal(t, "card declined", inst.ErrorMessage)
		requireTimePtr(t, b.at(3*time.Second), inst.CompletedAt)

		for _, id := range []string{"done", "failed"} {
			_, err := b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
			require.ErrorIs(t, err, db.ErrNotFound, "an ended run has no task")
		}
		require.Equal(t, dftype.StatusRunning, b.get(t, "going").Status)
		require.Len(t, b.steps(t, "going", 1), 1)
		require.Equal(t, tasks["going"].Version, b.task(t, "going").Version, "a continuing run keeps its task")

		require.Equal(t, staleBefore, b.get(t, "stale"), "the stale item changed nothing")
		require.Equal(t, staleTaskBefore, b.task(t, "stale"))
	})

	t.Run("RejectsOtherOutcomes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		for _, outcome := range []db.CheckpointOutcome{db.OutcomeSuspend, db.OutcomePark} {
			p := b.checkpoint(task)
			p.Outcome = outcome
			require.False(t, p.Batchable())
			_, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{p})
			require.ErrorIs(t, err, db.ErrNotBatchable, "outcome %v", outcome)
		}
		p := b.checkpoint(task)
		p.ConsumeEvent = &db.ConsumeEvent{}
		require.False(t, p.Batchable())
		_, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{p})
		require.ErrorIs(t, err, db.ErrNotBatchable, "consuming an event")
		require.Equal(t, dftype.StatusRunning, b.get(t, "a").Status, "nothing was written")
		res, err := b.batcher(t).CheckpointBatch(b.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, res)
	})
}
