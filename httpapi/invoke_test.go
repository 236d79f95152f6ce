package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestInstanceShowsParentAndChildren: GET of an instance shows the Invoke
// step that started it (parent) and the children its steps started, on
// both backends, in the raw JSON and through the Go client.
func TestInstanceShowsParentAndChildren(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", func(_ *httpapi.Config, h *testharness.Harness) {
			workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
				out, err := workflow.Invoke[greetOutput](step, "hello", workflow.InvokeOptions{
					Workflow: "greet", Params: greetParams{Name: "child"}, ID: "kid",
				})
				return out.Greeting, err
			})
		})
		b.call(t, http.MethodPost, "/api/workflows/parent/instances", `{"id":"dad"}`).requireOK(t, http.StatusCreated, nil)
		b.h.RunUntilIdle()

		var parent apiclient.Instance
		b.call(t, http.MethodGet, "/api/workflows/parent/instances/dad", "").requireOK(t, http.StatusOK, &parent)
		require.Equal(t, dftype.StatusComplete, parent.Details.Status)
		require.Equal(t, `"hello, child"`, string(parent.Details.Output))
		require.Equal(t, []*dftype.ChildRef{{WorkflowName: "greet", ID: "kid", Status: dftype.StatusComplete, RunNumber: 1, StepKey: "hello"}}, parent.Children)
		require.Nil(t, parent.Parent)

		child, err := b.api.Get(b.ctx, "greet", "kid")
		require.NoError(t, err)
		require.Equal(t, &dftype.ParentRef{WorkflowName: "parent", InstanceID: "dad", RunNumber: 1, StepKey: "hello", Policy: dftype.ParentTerminate, Depth: 1}, child.Parent)
		require.Empty(t, child.Children)
		require.Contains(t, string(b.call(t, http.MethodGet, "/api/workflows/greet/instances/kid", "").body),
			`"parent":{"workflowName":"parent","instanceId":"dad","runNumber":1,"step":"hello","policy":"terminate","depth":1}`)
	})
}
