package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestQueueRoutes sets, reads and lists queue limits over HTTP, refuses
// limits that are not positive and unknown queues with their codes, and
// shows the limit that holds an instance back in its JSON.
func TestQueueRoutes(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", func(_ *httpapi.Config, h *testharness.Harness) {
			workflow.MustRegister(h.Registry, "gated", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
				_, err := workflow.WaitForEvent[json.RawMessage](step, "gate", workflow.WaitOptions{Type: "go"})
				return "", err
			}, workflow.WithQueue("slow"))
			workflow.MustRegister(h.Registry, "keyless", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
				return "", nil
			}, workflow.WithConcurrencyKey(func(json.RawMessage) (string, error) { return "", errors.New("no key in the params") }, 1))
		})

		b.call(t, http.MethodGet, "/api/queues/slow", "").requireError(t, http.StatusNotFound, apiclient.CodeQueueNotFound)
		b.call(t, http.MethodPut, "/api/queues/slow", `{"maxRunning":0}`).requireError(t, http.StatusBadRequest, apiclient.CodeInvalidLimit)
		b.call(t, http.MethodPut, "/api/queues/slow", `{"maxRunning":-3}`).requireError(t, http.StatusBadRequest, apiclient.CodeInvalidLimit)
		b.call(t, http.MethodPut, "/api/queues/slow", `{"rate":{"limit":0,"period":"1 minute"}}`).requireError(t, http.StatusBadRequest, apiclient.CodeInvalidLimit)
		b.call(t, http.MethodGet, "/api/queues/slow", "").requireError(t, http.StatusNotFound, apiclient.CodeQueueNotFound)

		var q apiclient.Queue
		b.call(t, http.MethodPut, "/api/queues/slow", `{"maxRunning":1,"rate":{"limit":10,"period":"1 minute"}}`).requireOK(t, http.StatusOK, &q)
		require.Equal(t, "slow", q.Name)
		require.Equal(t, 1, q.MaxRunning)
		require.Equal(t, &apiclient.QueueRate{Limit: 10, Period: dftype.Duration(time.Minute)}, q.Rate)

		got, err := b.api.GetQueue(b.ctx, "slow")
		require.NoError(t, err)
		require.Equal(t, 1, got.MaxRunning)
		list, err := b.api.ListQueues(b.ctx)
		require.NoError(t, err)
		require.Len(t, list.Queues, 1)
		_, err = b.api.GetQueue(b.ctx, "nope")
		require.ErrorIs(t, err, workflow.ErrQueueNotFound)

		for _, id := range []string{"a", "b"} {
			_, err := b.api.Create(b.ctx, "gated", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		b.h.RunUntilIdle()
		info, err := b.api.Get(b.ctx, "gated", "b")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, info.Status)
		require.Equal(t, &dftype.WaitingFor{Kind: "concurrency", Scope: "queue", Name: "slow", Max: 1}, info.WaitingFor)
		var raw map[string]any
		b.call(t, http.MethodGet, "/api/workflows/gated/instances/b", "").requireOK(t, http.StatusOK, &raw)
		require.Equal(t, map[string]any{"kind": "concurrency", "scope": "queue", "name": "slow", "max": float64(1)}, raw["waitingFor"])

		b.call(t, http.MethodPost, "/api/workflows/keyless/instances", `{"id":"k"}`).requireError(t, http.StatusBadRequest, apiclient.CodeInvalidConcurrencyKey)
		b.call(t, http.MethodGet, "/api/workflows/keyless/instances/k", "").requireError(t, http.StatusNotFound, apiclient.CodeInstanceNotFound)
	})
}
