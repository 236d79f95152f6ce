package runner_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestInvokeDefaultDepthLimitIs16 runs chains of nested invokes with the
// runner's default MaxInvokeDepth: "chain" with n invokes "chain" with
// n-1 until 0, so a chain of n has children at depths 1 to n. Sixteen
// nested invokes complete; the seventeenth is refused with InvokeDepthError,
// and every parent above it fails with its child instead of waiting.
func TestInvokeDefaultDepthLimitIs16(t *testing.T) {
	t.Parallel()
	require.Equal(t, 16, workflow.DefaultMaxInvokeDepth)
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "chain", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
			if ev.Payload == 0 {
				return 0, nil
			}
			below, err := workflow.Invoke[int](step, "below", workflow.InvokeOptions{Workflow: "chain", Params: ev.Payload - 1})
			return below + 1, err
		})
		for id, n := range map[string]int{"sixteen": 16, "seventeen": 17} {
			_, err := h.Client.Create(h.Context(), "chain", dftype.CreateRequest{ID: id, Params: mustJSON(t, n)})
			require.NoError(t, err)
		}
		h.RunUntilIdle()

		var out int
		h.RequireOutput("chain", "sixteen", &out)
		require.Equal(t, 16, out, "16 nested invokes are within the default limit")

		// Walk down the refused chain to its deepest instance.
		chain := []*dftype.InstanceInfo{h.Status("chain", "seventeen")}
		for {
			children, err := h.Client.Children(h.Context(), "chain", chain[len(chain)-1].ID)
			require.NoError(t, err)
			if len(children) == 0 {
				break
			}
			require.Len(t, children, 1)
			chain = append(chain, children[0])
		}
		require.Len(t, chain, 17, "the root and its children at depths 1 to 16; none at 17")
		deepest, err := h.Client.Get(h.Context(), "chain", chain[16].ID)
		require.NoError(t, err)
		require.Equal(t, 16, deepest.Parent.Depth)
		require.Equal(t, dftype.StatusErrored, deepest.Status)
		require.Equal(t, workflow.ErrorNameInvokeDepth, deepest.Error.Name)
		require.Contains(t, deepest.Error.Message, "invoke nesting too deep")
		require.Contains(t, deepest.Error.Message, "would start a child at depth 17, past the limit of 16")
		steps := h.History("chain", deepest.ID).Steps
		require.Len(t, steps, 1)
		require.Equal(t, "below", steps[0].Name)
		require.Equal(t, workflow.ErrorNameInvokeDepth, steps[0].Error.Name, "the refusal is recorded, so replays agree")
		for _, inst := range chain[:16] {
			info := h.RequireStatus("chain", inst.ID, dftype.StatusErrored)
			require.Equal(t, workflow.ErrorNameChildFailed, info.Error.Name, "each parent fails with its child: none is left waiting")
		}
	})
}
