package workflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestStepResultTooDeep runs a step whose result nests 1000 arrays deep (a
// 2 KB answer of an upstream service, past SQLite's JSON limit) on both
// backends: the step fails with ErrPayloadTooDeep's message, the instance
// errors with it instead of retrying a checkpoint forever, and nothing too
// deep is stored. (How many attempts the step makes is the runner's choice:
// it makes ErrPayloadTooLarge non-retryable and should do the same for
// ErrPayloadTooDeep; until then the step's retry policy applies.)
func TestStepResultTooDeep(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		deep := json.RawMessage(strings.Repeat("[", 1000) + strings.Repeat("]", 1000))
		workflow.MustRegister(h.Registry, "fetch", workflow.Func[json.RawMessage, json.RawMessage](
			func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (json.RawMessage, error) {
				return workflow.Do(step, "fetch", func(ctx context.Context) (json.RawMessage, error) { return deep, nil })
			}))
		_, err := h.Client.Create(h.Context(), "fetch", workflow.CreateRequest{ID: "f-1"})
		require.NoError(t, err)

		h.RunUntilIdle()

		info := h.RequireStatus("fetch", "f-1", workflow.StatusErrored)
		require.NotNil(t, info.Error)
		require.Contains(t, info.Error.Message, `result of step "fetch" nests arrays and objects deeper than 256 levels`)
		hist := h.History("fetch", "f-1")
		require.Len(t, hist.Steps, 1)
		step := hist.Steps[0]
		require.Equal(t, "errored", step.Status)
		require.NotNil(t, step.Error)
		require.Contains(t, step.Error.Message, "deeper than 256 levels")
		require.Empty(t, step.Result)
		require.Nil(t, info.Output)
	})
}
