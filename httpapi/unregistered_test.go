package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestReadsOfUnregisteredWorkflows: the instances of a workflow this server
// does not register (another deployment's "billing") are listed, alone and
// in GET /instances, read and their history shown; creating one is refused,
// a name neither registered nor stored is WORKFLOW_NOT_FOUND, and another
// namespace sees none of them. On both backends.
func TestReadsOfUnregisteredWorkflows(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "billing", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (any, error) { return nil, nil })
		other, err := client.New(&client.Config{Store: b.h.Store, Registry: reg})
		require.NoError(t, err)
		for _, id := range []string{"inv-1", "inv-2"} {
			_, err := other.Create(b.ctx, "billing", dftype.CreateRequest{ID: id, Params: json.RawMessage(`{"customer":"cus_1"}`)})
			require.NoError(t, err)
		}
		_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "g-1"})
		require.NoError(t, err)

		var page apiclient.InstancePage
		b.call(t, http.MethodGet, "/api/workflows/billing/instances", "").requireOK(t, http.StatusOK, &page)
		require.Len(t, page.Instances, 2)
		require.Equal(t, "billing", page.Instances[0].WorkflowName)

		b.call(t, http.MethodGet, "/api/instances?pageSize=3", "").requireOK(t, http.StatusOK, &page)
		names := map[string]int{}
		for _, i := range page.Instances {
			names[i.WorkflowName]++
		}
		require.Equal(t, map[string]int{"billing": 2, "greet": 1}, names)
		require.False(t, page.HasNextPage)

		var inst apiclient.Instance
		b.call(t, http.MethodGet, "/api/workflows/billing/instances/inv-1", "").requireOK(t, http.StatusOK, &inst)
		require.Equal(t, dftype.StatusQueued, inst.Details.Status)
		require.JSONEq(t, `{"customer":"cus_1"}`, string(inst.Params))
		var hist apiclient.HistoryPage
		b.call(t, http.MethodGet, "/api/workflows/billing/instances/inv-1/history", "").requireOK(t, http.StatusOK, &hist)
		require.Equal(t, "inv-1", hist.Instance.ID)

		b.call(t, http.MethodGet, "/api/workflows/billing/instances/inv-9", "").
			requireError(t, http.StatusNotFound, apiclient.CodeInstanceNotFound)
		b.call(t, http.MethodPost, "/api/workflows/billing/instances", `{"id":"inv-3"}`).
			requireError(t, http.StatusNotFound, apiclient.CodeWorkflowNotFound)
		b.call(t, http.MethodGet, "/api/workflows/biling/instances", "").
			requireError(t, http.StatusNotFound, apiclient.CodeWorkflowNotFound, "biling")
		b.call(t, http.MethodGet, "/api/workflows/biling/instances/inv-1", "").
			requireError(t, http.StatusNotFound, apiclient.CodeWorkflowNotFound)

		// Another namespace holds none of them.
		b.call(t, http.MethodGet, "/api/workflows/billing/instances?namespace=other", "").
			requireError(t, http.StatusNotFound, apiclient.CodeWorkflowNotFound)
		b.call(t, http.MethodGet, "/api/instances?namespace=other", "").requireOK(t, http.StatusOK, &page)
		require.Empty(t, page.Instances)
		b.call(t, http.MethodGet, "/api/workflows/billing/instances/inv-1?namespace=other", "").
			requireError(t, http.StatusNotFound, apiclient.CodeWorkflowNotFound)
	})
}
