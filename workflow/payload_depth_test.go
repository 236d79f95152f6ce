package workflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestStepResultTooDeep runs a step whose result nests 1000 arrays deep (a
// 2 KB answer of an upstream service, past SQLite's JSON limit) on both
// backends: the step fails with ErrPayloadTooDeep's message, the instance
// errors with it instead of retrying a checkpoint forever, and nothing too
// deep is stored. A result that cannot be stored is not retried: the step
// makes one attempt. The same holds for a result Postgres could not store
// (a string with \u0000), on both backends.
func TestStepResultTooDeep(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		deep := json.RawMessage(strings.Repeat("[", 1000) + strings.Repeat("]", 1000))
		workflow.MustRegister(h.Registry, "nul", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
			return workflow.Do(step, "read", func(ctx context.Context) (string, error) { return "a\x00b", nil })
		})
		workflow.MustRegister(h.Registry, "fetch", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (json.RawMessage, error) {
			return workflow.Do(step, "fetch", func(ctx context.Context) (json.RawMessage, error) { return deep, nil })
		})
		_, err := h.Client.Create(h.Context(), "fetch", dftype.CreateRequest{ID: "f-1"})
		require.NoError(t, err)

		h.RunUntilIdle()

		info := h.RequireStatus("fetch", "f-1", dftype.StatusErrored)
		require.NotNil(t, info.Error)
		require.Contains(t, info.Error.Message, `result of step "fetch" nests arrays and objects deeper than 256 levels`)
		hist := h.History("fetch", "f-1")
		require.Len(t, hist.Steps, 1)
		step := hist.Steps[0]
		require.Equal(t, "errored", step.Status)
		require.NotNil(t, step.Error)
		require.Contains(t, step.Error.Message, "deeper than 256 levels")
		require.Empty(t, step.Result)
		require.Equal(t, 1, step.Attempts, "a result that cannot be stored is not retried")
		require.Nil(t, info.Output)

		_, err = h.Client.Create(h.Context(), "nul", dftype.CreateRequest{ID: "n-1"})
		require.NoError(t, err)
		h.RunUntilIdle()
		info = h.RequireStatus("nul", "n-1", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, `result of step "read" holds a string with \u0000`)
		hist = h.History("nul", "n-1")
		require.Len(t, hist.Steps, 1)
		require.Equal(t, 1, hist.Steps[0].Attempts, "a result that cannot be stored is not retried")
	})
}
