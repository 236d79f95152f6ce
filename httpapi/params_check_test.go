package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/testharness"
)

// TestCreateRefusesParamsThatDoNotDecode: a create (one or a batch) whose
// params cannot decode into the workflow's params type is answered 400
// INVALID_REQUEST with the decoder's message, and creates nothing.
func TestCreateRefusesParamsThatDoNotDecode(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"g1","params":"Ada"}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest,
				`decoding params of workflow "greet": json: cannot unmarshal string into Go value of type httpapi_test.greetParams`)
		b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"g2","params":{"name":"Bo"}},{"id":"g3","params":{"name":7}}]}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "instance 1: ", "cannot unmarshal number")
		rows, err := b.h.Store.InstanceList(b.ctx, &db.InstanceListParams{Limit: 10})
		require.NoError(t, err)
		require.Empty(t, rows, "nothing was created")

		var created apiclient.Instance
		b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"g4","params":{"name":"Ada"}}`).
			requireOK(t, http.StatusCreated, &created)
		require.Equal(t, "g4", created.ID)
	})
}
