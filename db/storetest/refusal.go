package storetest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// testRefusal checks how a backend reports a write whose values the
// database refuses: with db.ErrInvalidData, having written nothing, and
// leaving the caller's lease as it was, so the runner can fail the step
// instead of retrying a write that can never succeed.
func testRefusal(t *testing.T, newStore func(t *testing.T) db.Store) {
	stepWith := func(key string, result json.RawMessage) db.StepWrite {
		return db.StepWrite{Key: key, Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: result}
	}

	t.Run("InvalidJSONStepResult", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		taskBefore := b.task(t, "a")

		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{stepWith("fetch", json.RawMessage(`{"a":`))}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrInvalidData)
		require.NotErrorIs(t, err, db.ErrLeaseLost)
		require.Nil(t, res)
		require.Empty(t, b.steps(t, "a", 1), "nothing written")
		require.Equal(t, taskBefore, b.task(t, "a"), "the lease is still held")

		// The holder goes on: a step that fails for good is written.
		p = b.checkpoint(task)
		p.Steps = []db.StepWrite{{Key: "fetch", Type: db.StepTypeDo, Status: db.StepStatusErrored, Attempts: 1, MaxAttempts: 1, ErrorName: "E", ErrorMessage: "storing its result: refused"}}
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Len(t, b.steps(t, "a", 1), 1)
	})

	t.Run("InvalidJSONOutput", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		task := b.claim(t, "a")
		p := b.checkpoint(task)
		p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`[1,`)
		_, err := b.store.Checkpoint(b.ctx, p)
		require.ErrorIs(t, err, db.ErrInvalidData)
		require.Equal(t, dftype.StatusRunning, b.get(t, "a").Status, "the instance did not end")

		p.Outcome, p.Output = db.OutcomeError, nil
		p.ErrorName, p.ErrorMessage = "E", "storing the output: refused"
		_, err = b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusErrored, b.get(t, "a").Status)
	})

	t.Run("BatchWithOneRefusedItem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "a")
		b.create(t, "b")
		tasks := b.claimAt(t, b.now, 10)
		require.Len(t, tasks, 2)
		good := b.checkpoint(tasks[0])
		good.Steps = []db.StepWrite{stepWith("s", json.RawMessage(`1`))}
		bad := b.checkpoint(tasks[1])
		bad.Steps = []db.StepWrite{stepWith("s", json.RawMessage(`nope`))}
		_, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{good, bad})
		require.ErrorIs(t, err, db.ErrInvalidData)
		require.Empty(t, b.steps(t, tasks[0].InstanceID, 1), "the batch commits whole or not at all")

		results, err := b.batcher(t).CheckpointBatch(b.ctx, []*db.CheckpointParams{good})
		require.NoError(t, err)
		require.NoError(t, results[0].Err)
	})

	t.Run("InvalidJSONParams", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "a", Params: json.RawMessage(`{"id":`), Now: new(b.now),
		})
		require.ErrorIs(t, err, db.ErrInvalidData)
		_, err = b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a"})
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	// Valid JSON that one backend or the other cannot store: each is
	// either stored byte for byte or refused with ErrInvalidData, never
	// another error. (SQLite's json_valid refuses JSON nested deeper than
	// 1000 levels; Postgres refuses text that is not UTF-8.)
	t.Run("StoredExactlyOrRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		values := map[string]json.RawMessage{
			"deep":    json.RawMessage(strings.Repeat("[", 1001) + strings.Repeat("]", 1001)),
			"notutf8": json.RawMessage("\"\xff\xfe\""),
			"nul":     json.RawMessage(`"a\u0000b"`),
		}
		for name, value := range values {
			b.create(t, name)
			task := b.claim(t, name)
			p := b.checkpoint(task)
			p.Steps = []db.StepWrite{stepWith("s", value)}
			_, err := b.store.Checkpoint(b.ctx, p)
			if err != nil {
				t.Logf("%s: refused: %v", name, err)
				require.ErrorIs(t, err, db.ErrInvalidData, name)
				require.Empty(t, b.steps(t, name, 1), name)
				continue
			}
			steps := b.steps(t, name, 1)
			require.Len(t, steps, 1, name)
			require.Equal(t, string(value), string(steps[0].Result), name)
		}
	})
}
