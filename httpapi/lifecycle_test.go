package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
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
func (s *sseStream) next(t *testing.T) dftype.LifecycleEvent {
	t.Helper()
	for s.sc.Scan() {
		if data, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok {
			var e dftype.LifecycleEvent
			require.NoError(t, json.Unmarshal([]byte(data), &e))
			return e
		}
	}
	t.Fatalf("the stream ended: %v", s.sc.Err())
	return dftype.LifecycleEvent{}
}

func TestLifecycleStream(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "before"})
		require.NoError(t, err)

		// Without a resume point the stream starts after the newest event.
		s := openStream(t, b, "/api/events/stream?workflow=greet&type=instance.created")
		_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "live"})
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
	_, err := b.h.Client.Namespace("globex").Create(b.ctx, "greet", dftype.CreateRequest{ID: "g"})
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

// TestLifecycleStreamWokenByWakeups: the stream reads the log when the
// host's wake-ups signal (Config.LifecycleWakeups), not only at its poll
// interval, here an hour: without the signal the second event would not
// come before the stream's deadline.
func TestLifecycleStreamWokenByWakeups(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		wake := make(chan struct{}, 1)
		var stopped atomic.Int32
		b := setupOn(t, backend, "", func(c *httpapi.Config, _ *testharness.Harness) {
			c.LifecyclePollInterval = time.Hour
			c.LifecycleWakeups = func() (<-chan struct{}, func()) {
				return wake, func() { stopped.Add(1) }
			}
		})
		s := openStream(t, b, "/api/events/stream?workflow=greet&type=instance.created")
		signal := func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		for _, id := range []string{"first", "second"} {
			_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
			signal()
			require.Equal(t, id, s.next(t).InstanceID)
		}
		require.NoError(t, s.body())
		require.Eventually(t, func() bool { return stopped.Load() == 1 }, 10*time.Second, 10*time.Millisecond,
			"the stream stops its wake-ups when the client goes away")
	})
}

// TestLifecycleStreamWaitsForAnEarlierIDToCommit: on Postgres a
// transaction may commit after another that took a later event id. The
// stream holds the later events back until the earlier id is read (up to
// StreamGapGrace), so a follower misses neither and gets them in id order.
func TestLifecycleStreamWaitsForAnEarlierIDToCommit(t *testing.T) {
	t.Parallel()
	b := setupOn(t, testharness.Postgres, "", func(c *httpapi.Config, _ *testharness.Harness) {
		c.LifecyclePollInterval = 20 * time.Millisecond
	})
	pg, ok := b.h.Store.(*postgres.Store)
	require.True(t, ok, "the harness's Postgres store")
	s := openStream(t, b, "/api/events/stream?workflow=greet&type=instance.created")

	// A transaction takes an id and holds it, uncommitted.
	tx, err := pg.Pool().Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	_, err = tx.Exec(b.ctx, `INSERT INTO lifecycle_event (type, workflow_name, instance_id, run_number, at)
		VALUES ('instance.created', 'greet', 'late', 1, now())`)
	require.NoError(t, err)
	// A later id commits first; the stream reads it many times meanwhile.
	_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "early"})
	require.NoError(t, err)
	time.Sleep(25 * 20 * time.Millisecond)
	require.NoError(t, tx.Commit(b.ctx))

	require.Equal(t, "late", s.next(t).InstanceID, "the earlier id, once committed, comes first")
	require.Equal(t, "early", s.next(t).InstanceID, "then the one held back")
}

// TestLifecycleWorkerEvents: a worker's registration, drain and
// deregistration are lifecycle events that name the worker and no
// instance; GET /events and the stream filter them by worker.
func TestLifecycleWorkerEvents(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		register := func(id string) {
			t.Helper()
			_, err := b.h.Store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{ID: id, Hostname: "h", PID: 1, MaxConcurrency: 1, Now: b.h.Now()})
			require.NoError(t, err)
		}
		register("w-1")
		register("w-2")
		s := openStream(t, b, "/api/events/stream?worker=w-1")
		_, err := b.api.DrainWorker(b.ctx, "w-1")
		require.NoError(t, err)
		e := s.next(t)
		require.Equal(t, "worker.draining", e.Type)
		require.Equal(t, "w-1", e.WorkerID)
		_, err = b.h.Store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w-2", Now: b.h.Now()})
		require.NoError(t, err)
		_, err = b.h.Store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w-1", Now: b.h.Now()})
		require.NoError(t, err)
		e = s.next(t)
		require.Equal(t, "worker.offline", e.Type, "w-2's events are not w-1's")
		require.Equal(t, "w-1", e.WorkerID)
		require.Equal(t, "deregistered", e.Detail)

		page, err := b.api.ListLifecycleEvents(b.ctx, client.LifecycleListParams{WorkerID: "w-1"})
		require.NoError(t, err)
		var types []string
		for _, e := range page.Events {
			require.Equal(t, "w-1", e.WorkerID)
			require.Empty(t, e.WorkflowName)
			require.Empty(t, e.InstanceID)
			types = append(types, e.Type)
		}
		require.Equal(t, []string{"worker.online", "worker.draining", "worker.offline"}, types)
		page, err = b.api.ListLifecycleEvents(b.ctx, client.LifecycleListParams{Types: []string{"worker.online"}})
		require.NoError(t, err)
		require.Len(t, page.Events, 2, "every worker's registration")
		var raw struct {
			Events []map[string]any `json:"events"`
		}
		b.call(t, http.MethodGet, "/api/events?worker=w-2&type=worker.offline", "").requireOK(t, http.StatusOK, &raw)
		require.Len(t, raw.Events, 1)
		require.Equal(t, "w-2", raw.Events[0]["workerId"])
		require.Equal(t, "", raw.Events[0]["workflowName"])
	})
}
