package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestEventAnswerShowsErrorAndOutputOnlyToReaders: the answer of a sent
// event is the instance's status; its error and output (what the read
// scope guards) are left out for a token that may send events but not
// read.
func TestEventAnswerShowsErrorAndOutputOnlyToReaders(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", withTokens("sender:s3nd:events", "both:b0th:read,events"))
		// The first run fails with a secret in its error, and the workflow
		// retries an hour later: the instance takes events meanwhile, and
		// its status carries the error.
		workflow.MustRegister(b.h.Registry, "retried", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "call", func(ctx context.Context) (string, error) {
				return "", errors.New("token sk-123 was refused")
			}, workflow.WithNoRetries()); err != nil {
				return "", err
			}
			return workflow.WaitForEvent[string](step, "go", workflow.WaitOptions{Type: "go"})
		}, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 1, Delay: time.Hour}))
		_, err := b.h.Client.Create(b.ctx, "retried", dftype.CreateRequest{ID: "r"})
		require.NoError(t, err)
		b.h.RunDue() // the first run only: the retry is an hour away
		info, err := b.h.Client.Get(b.ctx, "retried", "r")
		require.NoError(t, err)
		require.False(t, info.Status.Terminal(), "%s", info.Status)
		require.NotNil(t, info.Error, "the failed run's error is on the instance")

		send := func(secret string) apiclient.EventSent {
			t.Helper()
			var out apiclient.EventSent
			b.call(t, http.MethodPost, "/api/workflows/retried/instances/r/events", `{"type":"other"}`, "Authorization: Bearer "+secret).
				requireOK(t, http.StatusAccepted, &out)
			return out
		}
		got := send("b0th")
		require.Equal(t, info.Status, got.Status.Status)
		require.NotNil(t, got.Status.Error, "a reader sees the error")
		require.Contains(t, got.Status.Error.Message, "sk-123")
		got = send("s3nd")
		require.Equal(t, info.Status, got.Status.Status)
		require.Nil(t, got.Status.Error, "the events scope reads no error")
		require.Nil(t, got.Status.Output, "the events scope reads no output")

		// A custom AuthorizeFunc is asked for the read action.
		srv, err := httpapi.New(&httpapi.Config{Client: b.h.Client, Authorize: func(r *http.Request, a httpapi.Action) error {
			if a == httpapi.ActionRead && r.Header.Get("X-Who") != "reader" {
				return httpapi.ErrForbidden
			}
			return nil
		}})
		require.NoError(t, err)
		for who, wantError := range map[string]bool{"reader": true, "sender": false} {
			req := httptest.NewRequestWithContext(b.ctx, http.MethodPost, "/api/workflows/retried/instances/r/events", strings.NewReader(`{"type":"other"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Who", who)
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, req)
			require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
			var out apiclient.EventSent
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &out))
			require.Equal(t, wantError, out.Status.Error != nil, "%s: %s", who, w.Body.String())
		}
	})
}

// TestEventAnswerSaysDelivered: the answer says whether a waiting step took
// the event (delivered, naming the step for a reader) or it was buffered
// because nothing waits for its type; a buffered event is kept and
// delivered once a step waits for its type.
func TestEventAnswerSaysDelivered(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", withTokens("sender:s3nd:events", "both:b0th:read,events,create"))
		send := func(secret, id, eventType string) apiclient.EventSent {
			t.Helper()
			var out apiclient.EventSent
			b.call(t, http.MethodPost, "/api/workflows/approve/instances/"+id+"/events",
				`{"type":"`+eventType+`","payload":{"approved":true}}`, "Authorization: Bearer "+secret).
				requireOK(t, http.StatusAccepted, &out)
			return out
		}
		for _, id := range []string{"a1", "a2"} {
			_, err := b.h.Client.Create(b.ctx, "approve", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)

		// A mistyped type: stored, buffered, nothing woken.
		got := send("b0th", "a1", "approvl")
		require.Equal(t, apiclient.EventBuffered, got.Delivery)
		require.Empty(t, got.Step)
		require.Equal(t, dftype.StatusWaiting, got.Status.Status)
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
		hist := b.h.History("approve", "a1")
		require.Len(t, hist.Events, 1, "the buffered event is kept")
		require.Equal(t, "approvl", hist.Events[0].Type)

		// The right type: delivered to the waiting step.
		got = send("b0th", "a1", "approval")
		require.Equal(t, apiclient.EventDelivered, got.Delivery)
		require.Equal(t, "wait for approval", got.Step)
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "a1", dftype.StatusComplete)

		// An events-only token learns the delivery, not the step.
		got = send("s3nd", "a2", "approval")
		require.Equal(t, apiclient.EventDelivered, got.Delivery)
		require.Empty(t, got.Step, "the step is for readers")
		got = send("s3nd", "a2", "approvl")
		require.Equal(t, apiclient.EventBuffered, got.Delivery, "a2's wait took the first event")
	})
}
