package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestDeadlineAndAttemptsOverHTTP(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		workflow.MustRegister(b.h.Registry, "flaky", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
				if workflow.Attempt(ctx) < 3 {
					return 0, errors.New("not yet")
				}
				return 1, nil
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: workflow.UnlimitedRetries, Delay: time.Second}))
		}, workflow.WithDeadline(time.Hour))

		// The workflow's deadline, and a per-create one.
		now := b.h.Now()
		var created dftype.InstanceInfo
		b.call(t, http.MethodPost, "/api/workflows/flaky/instances", `{"id":"a"}`).requireOK(t, http.StatusCreated, &created)
		require.Equal(t, now.Add(time.Hour), *created.DeadlineAt)
		at := now.Add(10 * time.Minute)
		info, err := b.api.Create(b.ctx, "flaky", dftype.CreateRequest{ID: "b", Deadline: at})
		require.NoError(t, err)
		require.Equal(t, at, *info.DeadlineAt)

		// A deadline in the past is refused, and nothing is written.
		b.call(t, http.MethodPost, "/api/workflows/flaky/instances",
			`{"id":"c","deadline":"`+now.Add(-time.Minute).Format(time.RFC3339)+`"}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "deadline")
		b.call(t, http.MethodPost, "/api/workflows/flaky/instances/batch",
			`{"instances":[{"id":"d"},{"id":"e","deadline":"`+now.Add(-time.Minute).Format(time.RFC3339)+`"}]}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "deadline")
		for _, id := range []string{"c", "d", "e"} {
			_, err := b.api.Get(b.ctx, "flaky", id)
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound, id)
		}

		// The history route shows every attempt and the unlimited maximum.
		b.h.RunUntilIdle()
		var hist apiclient.HistoryPage
		b.call(t, http.MethodGet, "/api/workflows/flaky/instances/a/history", "").requireOK(t, http.StatusOK, &hist)
		require.Equal(t, dftype.StatusComplete, hist.Instance.Details.Status)
		require.False(t, hist.HasNextPage)
		require.Equal(t, 1, hist.Instance.RunAttempt)
		st := hist.Steps[0]
		require.Equal(t, workflow.UnlimitedAttempts, st.MaxAttempts)
		require.Len(t, st.AttemptLog, 3)
		require.Equal(t, "not yet", st.AttemptLog[0].Error.Message)
		require.Equal(t, "complete", st.AttemptLog[2].Status)
	})
}
