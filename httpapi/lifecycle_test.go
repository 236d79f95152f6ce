package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// sseStream reads lifecycle events from an open stream.
type sseStream struct {
	sc   *bufio.Scanner
	body func() error
}

func openStream(t *testing.T, b *testBundle, path string, headers ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+path, nil)
	require.NoError(t, err)
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sseStream{sc: bufio.NewScanner(resp.Body), body: resp.Body.Close}
}

// next returns the next event of the stream.
func (s *sseStream) next(t *testing.T) workflow.LifecycleEvent {
	t.Helper()
	for s.sc.Scan() {
		if data, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			var e workflow.LifecycleEvent
			require.NoError(t, json.Unmarshal([]byte(data), &e))
			return e
		}
	}
	t.Fatalf("the stream ended: %v", s.sc.Err())
	return workflow.LifecycleEvent{}
}

func TestLifecycleStream(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		_, err := b.api.Create(b.ctx, "greet", workflow.CreateRequest{ID: "before"})
		require.NoError(t, err)

		// Without a resume point the stream starts after the newest event.
		s := openStream(t, b, "/api/events/stream?workflow=greet&type=instance.created")
		_, err = b.api.Create(b.ctx, "greet", workflow.CreateRequest{ID: "live"})
		require.NoError(t, err)
		e := s.next(t)
		require.Equal(t, "live", e.InstanceID, "only events after the stream began")
		require.Equal(t, "instance.created", e.Type)

		// Last-Event-ID resumes after an event (and wins over after=).
		list, err := b.api.ListLifecycleEvents(b.ctx, apiclientParams("greet"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(list.Events), 2)
		first := list.Events[0]
		require.Equal(t, "before", first.InstanceID)
		r := openStream(t, b, "/api/events/stream?workflow=greet&type=instance.created&after=999999",
			"Last-Event-ID: "+jsonInt(first.ID))
		require.Equal(t, "live", r.next(t).InstanceID, "resumed after the first event")
	})
}

func TestLifecycleRoutesRefuseNamespaceLimitedTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTokens("acme:s-acme:read@acme", "all:s-all:read"))
	for _, path := range []string{"/api/events", "/api/events/stream"} {
		r := b.call(t, http.MethodGet, path, "", "Authorization: Bearer s-acme")
		require.Equal(t, http.StatusForbidden, r.status, "%s: %s", path, r.body)
		require.Contains(t, string(r.body), string(apiclient.CodeForbidden))
	}
	b.call(t, http.MethodGet, "/api/events", "", "Authorization: Bearer s-all").requireOK(t, http.StatusOK, nil)
	// The per-instance route is the namespace's: an instance of another
	// namespace is not found.
	_, err := b.h.Client.Namespace("globex").Create(b.ctx, "greet", workflow.CreateRequest{ID: "g"})
	require.NoError(t, err)
	r := b.call(t, http.MethodGet, "/api/workflows/greet/instances/g/lifecycle", "", "Authorization: Bearer s-acme")
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	var page apiclient.LifecycleList
	b.call(t, http.MethodGet, "/api/workflows/greet/instances/g/lifecycle?namespace=globex", "", "Authorization: Bearer s-all").
		requireOK(t, http.StatusOK, &page)
	require.Len(t, page.Events, 1)
	require.Equal(t, "instance.created", page.Events[0].Type)
}

func apiclientParams(workflowName string) client.LifecycleListParams {
	return client.LifecycleListParams{WorkflowName: workflowName, Types: []string{"instance.created"}}
}

func jsonInt(n int64) string { return strconv.FormatInt(n, 10) }
