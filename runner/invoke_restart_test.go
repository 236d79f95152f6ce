package runner_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// A restart of a parent terminates the children its earlier run started
// with the terminate policy (the new run never reads their ends), leaves
// the abandoned ones running, and the new run starts children of its own
// and waits for them.
func TestRestartParentTerminatesChildrenOfEarlierRun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			calls := []workflow.InvokeCall{
				{Name: "kept", Options: workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: 1}}},
				{Name: "left", Options: workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: 2}, Policy: dftype.ParentAbandon}},
			}
			outs, errs, err := workflow.InvokeAll[int](step, calls, 0)
			if err != nil {
				return 0, err
			}
			if err := errors.Join(errs...); err != nil {
				return 0, err
			}
			return outs[0] + outs[1], nil
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunUntilIdle()
		old, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, old, 2)

		_, err = h.Client.Restart(h.Context(), "parent", "p")
		require.NoError(t, err)
		for _, c := range old {
			want := dftype.StatusTerminated
			if c.Parent.StepKey == "left" {
				want = dftype.StatusWaiting
			}
			h.RequireStatus("waiter", c.ID, want)
		}
		h.RunUntilIdle()
		h.RequireStatus("parent", "p", dftype.StatusWaiting)

		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 4, "the new run started two children of its own")
		for _, c := range children {
			if c.Parent.RunNumber == 2 {
				require.Equal(t, dftype.StatusWaiting, c.Status)
				h.SendEvent("waiter", c.ID, "go", nil)
			}
		}
		h.RunUntilIdle()
		var out int
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, 3, out)
	})
}
