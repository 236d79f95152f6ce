package runner_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// registerTenantParent registers "tparent": it invokes "waiter" as step
// "sum" with a compensation that invokes "waiter" again, then fails for
// good, so that the compensation starts a second child.
func registerTenantParent(h *testharness.Harness) {
	registerChildren(h)
	undo := workflow.CompensateWithInvoke(func(json.RawMessage) (workflow.InvokeOptions, error) {
		return workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: 2}}, nil
	})
	workflow.MustRegister(h.Registry, "tparent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
		if _, err := workflow.Invoke[int](step, "sum", workflow.InvokeOptions{
			Workflow: "waiter", Params: ev.Payload, Compensation: []workflow.StepOption{undo},
		}); err != nil {
			return 0, err
		}
		return 0, workflow.NonRetryable(errors.New("give up"))
	})
}

// The children of an instance of a namespace, those its Invoke steps start
// and those its compensations start, live in that namespace: its callers
// see them, and a caller of another namespace neither reads them, nor
// sends them events, nor lists them.
func TestInvokeChildLivesInItsParentsNamespace(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerTenantParent(h)
		ctx := h.Context()
		acme, other := h.Client.Namespace("acme"), h.Client.Namespace(workflow.DefaultNamespace)
		_, err := acme.Create(ctx, "tparent", dftype.CreateRequest{ID: "p", Params: mustJSON(t, addParams{A: 1})})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("tparent", "p", dftype.StatusWaiting)

		// requireAcmeOnly checks that the children of p are acme's alone.
		requireAcmeOnly := func(n int) []*dftype.InstanceInfo {
			t.Helper()
			children, err := acme.Children(ctx, "tparent", "p")
			require.NoError(t, err)
			require.Len(t, children, n)
			for _, c := range children {
				require.Equal(t, "acme", c.Namespace, "child %s", c.ID)
				got, err := acme.Get(ctx, c.WorkflowName, c.ID)
				require.NoError(t, err)
				require.Equal(t, "acme", got.Namespace)
				_, err = other.Get(ctx, c.WorkflowName, c.ID)
				require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "another namespace reads the child %s", c.ID)
				err = other.SendEvent(ctx, c.WorkflowName, c.ID, "go", nil)
				require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "another namespace sends the child %s an event", c.ID)
			}
			_, err = other.Children(ctx, "tparent", "p")
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
			parent, err := acme.Get(ctx, "tparent", "p")
			require.NoError(t, err)
			require.Len(t, parent.Children, n)
			return children
		}
		children := requireAcmeOnly(1)
		h.RequireStatus("waiter", children[0].ID, dftype.StatusWaiting)

		require.NoError(t, acme.SendEvent(ctx, "waiter", children[0].ID, "go", nil))
		h.RunUntilIdle()
		// The parent failed for good: its compensation started a child.
		h.RequireStatus("tparent", "p", dftype.StatusWaiting)
		var comp *dftype.InstanceInfo
		for _, c := range requireAcmeOnly(2) {
			if c.Parent.StepKey == workflow.CompensationStepPrefix+"sum" {
				comp = c
			}
		}
		require.NotNil(t, comp, "the compensation's child")
		require.NoError(t, acme.SendEvent(ctx, "waiter", comp.ID, "go", nil))
		h.RunUntilIdle()
		h.RequireStatus("tparent", "p", dftype.StatusErrored)
	})
}

// oldChildID is how the engine once derived the id of the child of an
// Invoke step from its parent alone: what a caller who knows the parent's
// id can work out.
func oldChildID(parentWorkflow, parentID string, run int, key string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%s", parentWorkflow, parentID, run, key))
	return fmt.Sprintf("%s-%d-%s", parentID, run, hex.EncodeToString(sum[:10]))
}

// The id the engine picks for a child cannot be worked out from its
// parent: an instance created first with the id the parent alone gives
// (in another namespace, where its creator may create) does not make the
// Invoke fail, and two parents' children, or two runs', never share ids.
func TestInvokeChildIDCannotBeTakenFirst(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "adder", Params: ev.Payload})
		})
		ctx := h.Context()
		squatter := h.Client.Namespace("squatter")
		for _, wf := range []string{"adder", "waiter"} {
			_, err := squatter.Create(ctx, wf, dftype.CreateRequest{ID: oldChildID("parent", "p", 1, "sum"), Params: mustJSON(t, addParams{})})
			require.NoError(t, err)
		}
		_, err := h.Client.Namespace("acme").Create(ctx, "parent", dftype.CreateRequest{ID: "p", Params: mustJSON(t, addParams{A: 1, B: 2})})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out int
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, 3, out, "the invoke started its own child")

		_, err = h.Client.Restart(ctx, "parent", "p")
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireOutput("parent", "p", &out)
		children, err := h.Client.Children(ctx, "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 2)
		require.NotEqual(t, children[0].ID, children[1].ID)
		for i, c := range children {
			require.True(t, strings.HasPrefix(c.ID, fmt.Sprintf("p-%d-", i+1)), "the id %s names its parent and run", c.ID)
			require.Len(t, c.ID, len(fmt.Sprintf("p-%d-", i+1))+24, "and ends in 24 random hex digits: %s", c.ID)
			require.NotEqual(t, oldChildID("parent", "p", i+1, "sum"), c.ID)
		}
	})
}
