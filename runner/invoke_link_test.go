package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// forgedParent is metadata that names the parent step "sum" of parent/p,
// as the engine once recorded a child's link there.
const forgedParent = `{"parent":{"workflowName":"parent","instanceId":"p","runNumber":1,"step":"sum","policy":"terminate","depth":1}}`

// A plain create whose metadata names a parent step is no child: its end
// reaches no parent, and the waiting parent gets its real child's output.
func TestInvokeChildEndComesOnlyFromTheChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "forger", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return 666, nil
		})
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "waiter", Params: ev.Payload})
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p", Params: mustJSON(t, addParams{A: 20})})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("parent", "p", dftype.StatusWaiting)

		_, err = h.Client.Create(h.Context(), "forger", dftype.CreateRequest{ID: "f", Metadata: json.RawMessage(forgedParent)})
		require.NoError(t, err, "metadata is the caller's: any key is accepted")
		h.RunUntilIdle()
		h.RequireStatus("forger", "f", dftype.StatusComplete)
		h.RequireStatus("parent", "p", dftype.StatusWaiting)
		forger, err := h.Client.Get(h.Context(), "forger", "f")
		require.NoError(t, err)
		require.Nil(t, forger.Parent, "metadata makes no parent link")
		require.JSONEq(t, forgedParent, string(forger.Metadata), "and is kept as given")

		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 1)
		h.SendEvent("waiter", children[0].ID, "go", nil)
		h.RunUntilIdle()
		var out int
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, 20, out, "the real child's output")
		child, err := h.Client.Get(h.Context(), "waiter", children[0].ID)
		require.NoError(t, err)
		require.JSONEq(t, `null`, string(orNull(child.Metadata)), "the engine keeps the link out of the child's metadata")
	})
}

// A caller's own metadata key "parent", of any shape, is just metadata:
// the instance's Invoke steps work, and its children nest from depth 1.
func TestInvokeWithUserMetadataKeyParent(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithRunnerConfig(func(c *runner.Config) { c.MaxInvokeDepth = 1 }))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "sum", workflow.InvokeOptions{
				Workflow: "adder", Params: ev.Payload, Metadata: json.RawMessage(`{"parent":"order-42"}`),
			})
		})
		for id, md := range map[string]string{
			"string": `{"parent":"order-42"}`,
			// A forged link with a depth past the limit counts for nothing.
			"forged": `{"parent":{"workflowName":"parent","instanceId":"x","runNumber":1,"step":"sum","depth":99}}`,
		} {
			_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: id, Params: mustJSON(t, addParams{A: 1, B: 2}), Metadata: json.RawMessage(md)})
			require.NoError(t, err)
		}
		h.RunUntilIdle()
		for _, id := range []string{"string", "forged"} {
			var out int
			h.RequireOutput("parent", id, &out)
			require.Equal(t, 3, out, id)
			children, err := h.Client.Children(h.Context(), "parent", id)
			require.NoError(t, err)
			require.Len(t, children, 1)
			child, err := h.Client.Get(h.Context(), "adder", children[0].ID)
			require.NoError(t, err)
			require.Equal(t, &dftype.ParentRef{WorkflowName: "parent", InstanceID: id, RunNumber: 1, StepKey: "sum", Policy: dftype.ParentTerminate, Depth: 1}, child.Parent)
			require.JSONEq(t, `{"parent":"order-42"}`, string(child.Metadata), "the invoke's own metadata, as given")
		}
	})
}

// An Invoke reached after a compensation was asked for starts no child:
// the run stops there as at Do, and the saga runs.
func TestInvokeStopsForARequestedCompensation(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		var undone atomic.Int32
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			if _, err := workflow.DoWithCompensation(step, "a", func(ctx context.Context) (int, error) { return 1, nil },
				func(ctx context.Context, _ int) error { undone.Add(1); return nil }); err != nil {
				return 0, err
			}
			if _, err := workflow.Invoke[int](step, "first", workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: 1}}); err != nil {
				return 0, err
			}
			return workflow.Invoke[int](step, "second", workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: 2}})
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunUntilIdle()
		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 1)
		h.SendEvent("waiter", children[0].ID, "go", nil)
		require.Equal(t, 1, h.RunDue(), "the child runs and wakes its parent")

		// The parent's task is due (its child ended) when the compensation
		// is asked for: its replay passes "first" and reaches "second".
		_, err = h.Client.Compensate(h.Context(), "parent", "p")
		require.NoError(t, err)
		h.RunUntilIdle()
		children, err = h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 1, "no child was started after the compensation was asked for")
		info := h.RequireStatus("parent", "p", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, info.Error.Name)
		require.Equal(t, int32(1), undone.Load())
		for _, st := range h.History("parent", "p").Steps {
			require.NotEqual(t, "second", st.Name, "the stopped invoke left no step")
		}
	})
}

// An Invoke step name cannot take the prefix reserved for compensations.
func TestInvokeReservedStepName(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	registerChildren(h)
	var got error
	workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
		_, got = workflow.Invoke[int](step, workflow.CompensationStepPrefix+"x", workflow.InvokeOptions{Workflow: "adder"})
		return 0, nil
	})
	_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
	require.NoError(t, err)
	h.RunUntilIdle()
	h.RequireStatus("parent", "p", dftype.StatusComplete)
	require.ErrorIs(t, got, workflow.ErrInvalidStepName)
	children, err := h.Client.Children(h.Context(), "parent", "p")
	require.NoError(t, err)
	require.Empty(t, children)
}

// A fixed InvokeOptions.ID names one child for good: the restarted
// parent's Invoke finds it taken by the old run's child and fails; an id
// with the run number in it starts a child per run.
func TestInvokeFixedChildIDAfterParentRestart(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "fixed", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "adder", ID: "order-42-charge", Params: addParams{A: 1, B: 2}})
		})
		workflow.MustRegister(h.Registry, "perrun", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			id := fmt.Sprintf("order-43-charge-%d", ev.RunNumber)
			return workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "adder", ID: id, Params: addParams{A: 1, B: 2}})
		})
		for _, wf := range []string{"fixed", "perrun"} {
			_, err := h.Client.Create(h.Context(), wf, dftype.CreateRequest{ID: "p"})
			require.NoError(t, err)
		}
		h.RunUntilIdle()
		for _, wf := range []string{"fixed", "perrun"} {
			h.RequireStatus(wf, "p", dftype.StatusComplete)
			_, err := h.Client.Restart(h.Context(), wf, "p")
			require.NoError(t, err)
		}
		h.RunUntilIdle()

		info := h.RequireStatus("fixed", "p", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameInvokeRefused, info.Error.Name)
		require.Contains(t, info.Error.Message, "is not the child of step")

		var out int
		h.RequireOutput("perrun", "p", &out)
		require.Equal(t, 3, out)
		children, err := h.Client.Children(h.Context(), "perrun", "p")
		require.NoError(t, err)
		require.Len(t, children, 2, "one child per run")
	})
}

// orNull is raw, or null when empty.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
