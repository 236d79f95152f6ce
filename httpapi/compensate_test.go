package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestCompensateRoute(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		_, err := b.api.Create(b.ctx, "approve", dftype.CreateRequest{ID: "c-1"})
		require.NoError(t, err)
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "c-1", dftype.StatusWaiting)

		info, err := b.api.Compensate(b.ctx, "approve", "c-1")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, info.Status)
		b.h.RunUntilIdle()
		got := b.h.RequireStatus("approve", "c-1", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, got.Error.Name)

		_, err = b.api.Compensate(b.ctx, "approve", "c-1")
		var apiErr *apiclient.APIError
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, apiclient.CodeInstanceTerminal, apiErr.Code)
		_, err = b.api.Compensate(b.ctx, "approve", "missing")
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, apiclient.CodeInstanceNotFound, apiErr.Code)
	})
}
