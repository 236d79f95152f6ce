package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
)

// registerWorker writes a worker row the way a runner's Start does.
func registerWorker(t *testing.T, b *testBundle, id string, queues ...string) {
	t.Helper()
	_, err := b.h.Store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{
		ID: id, Hostname: "host-1", PID: 7, Version: "v1", Labels: map[string]string{"zone": "a"},
		Queues: queues, Workflows: []string{"greet"}, MaxConcurrency: 4, Now: b.h.Now(),
	})
	require.NoError(t, err)
}

func TestWorkerRoutes(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		registerWorker(t, b, "w1", "default")
		registerWorker(t, b, "w2", "default", "emails")
		registerWorker(t, b, "w3", "emails")
		_, err := b.h.Store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w3", Now: b.h.Now()})
		require.NoError(t, err)

		var list apiclient.WorkerList
		b.call(t, http.MethodGet, "/api/workers", "").requireOK(t, http.StatusOK, &list)
		require.Len(t, list.Workers, 3)
		require.Equal(t, "w1", list.Workers[0].ID)
		require.Equal(t, map[string]string{"zone": "a"}, list.Workers[0].Labels)
		require.Equal(t, dftype.WorkerOnline, list.Workers[0].Status)

		// Filters and pages, through the typed client.
		page, err := b.api.ListWorkers(b.ctx, apiclient.WorkerListParams{Queue: "emails"})
		require.NoError(t, err)
		require.Equal(t, []string{"w2", "w3"}, workerIDs(page.Workers))
		page, err = b.api.ListWorkers(b.ctx, apiclient.WorkerListParams{Status: dftype.WorkerOnline, Queue: "emails"})
		require.NoError(t, err)
		require.Equal(t, []string{"w2"}, workerIDs(page.Workers))
		page, err = b.api.ListWorkers(b.ctx, apiclient.WorkerListParams{PageSize: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"w1", "w2"}, workerIDs(page.Workers))
		require.NotEmpty(t, page.NextCursor)
		page, err = b.api.ListWorkers(b.ctx, apiclient.WorkerListParams{PageSize: 2, Cursor: page.NextCursor})
		require.NoError(t, err)
		require.Equal(t, []string{"w3"}, workerIDs(page.Workers))
		require.Empty(t, page.NextCursor)
		b.call(t, http.MethodGet, "/api/workers?status=offline&limit=1", "").requireOK(t, http.StatusOK, &list)
		require.Equal(t, []string{"w3"}, workerIDs(list.Workers))

		w, err := b.api.GetWorker(b.ctx, "w2")
		require.NoError(t, err)
		require.Equal(t, []string{"default", "emails"}, w.Queues)
		require.Equal(t, 4, w.MaxConcurrency)

		// Drain: the worker is draining at once; again changes nothing.
		drained, err := b.api.DrainWorker(b.ctx, "w1")
		require.NoError(t, err)
		require.Equal(t, dftype.WorkerDraining, drained.Status)
		require.NotNil(t, drained.DrainRequestedAt)
		again, err := b.api.DrainWorker(b.ctx, "w1")
		require.NoError(t, err)
		require.Equal(t, drained.DrainRequestedAt, again.DrainRequestedAt)
		res, err := b.h.Store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "w1", Now: b.h.Now().Add(time.Second)})
		require.NoError(t, err)
		require.True(t, res.DrainRequested, "the worker sees the drain at its heartbeat")

		// Bad input: 4xx with a code, nothing written.
		b.call(t, http.MethodGet, "/api/workers/nobody", "").requireError(t, http.StatusNotFound, apiclient.CodeWorkerNotFound, "nobody")
		b.call(t, http.MethodPost, "/api/workers/nobody/drain", "").requireError(t, http.StatusNotFound, apiclient.CodeWorkerNotFound)
		b.call(t, http.MethodPost, "/api/workers/w3/drain", "").requireError(t, http.StatusConflict, apiclient.CodeWorkerOffline, "offline")
		_, err = b.api.DrainWorker(b.ctx, "w3")
		require.ErrorIs(t, err, dftype.ErrWorkerOffline)
		_, err = b.api.GetWorker(b.ctx, "nobody")
		require.ErrorIs(t, err, dftype.ErrWorkerNotFound)
		off, err := b.h.Store.WorkerGet(b.ctx, "w3")
		require.NoError(t, err)
		require.Nil(t, off.DrainRequestedAt, "a refused drain writes nothing")
		b.call(t, http.MethodGet, "/api/workers?status=sleeping", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "status")
		b.call(t, http.MethodGet, "/api/workers?queue=bad%20queue", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "queue")
		b.call(t, http.MethodGet, "/api/workers?cursor=%21%21", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "cursor")
		b.call(t, http.MethodGet, "/api/workers?limit=0", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
		b.call(t, http.MethodGet, "/api/workers?limit=1&pageSize=1", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
		b.call(t, http.MethodGet, "/api/workers?nope=1", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
		b.call(t, http.MethodPost, "/api/workers/w2/drain", `{"x":1}`).requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
		w2, err := b.h.Store.WorkerGet(b.ctx, "w2")
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusOnline, w2.Status)
	})
}

func TestWorkerRouteScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tokens = []httpapi.Token{
			httpapi.NewToken("reader", "reader-secret", httpapi.ActionRead),
			httpapi.NewToken("manager", "manager-secret", httpapi.ActionManage),
		}
	})
	registerWorker(t, b, "w1", "default")
	reader := apiclient.New(b.srv.URL, "reader-secret", nil)
	manager := apiclient.New(b.srv.URL, "manager-secret", nil)

	_, err := reader.ListWorkers(b.ctx, apiclient.WorkerListParams{})
	require.NoError(t, err)
	_, err = reader.GetWorker(b.ctx, "w1")
	require.NoError(t, err)
	_, err = reader.DrainWorker(b.ctx, "w1")
	require.ErrorIs(t, err, apiclient.ErrForbidden, "a drain needs the manage scope")
	_, err = manager.ListWorkers(b.ctx, apiclient.WorkerListParams{})
	require.ErrorIs(t, err, apiclient.ErrForbidden, "reading needs the read scope")
	w, err := manager.DrainWorker(b.ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, dftype.WorkerDraining, w.Status)
}

func workerIDs(ws []*dftype.WorkerInfo) []string {
	ids := []string{}
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}
