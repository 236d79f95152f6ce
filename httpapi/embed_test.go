package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// embedded checks the API of a host program that serves it under
// /host/engine beside a route of its own, /host/own: real requests through
// the host's server, with the typed client and raw.
func embedded(t *testing.T, b *testBundle, url string) {
	t.Helper()
	api := apiclient.New(url, "", nil).WithPrefix("/host/engine")
	info, err := api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "e-1", Params: json.RawMessage(`{"name":"host"}`)})
	require.NoError(t, err)
	require.Equal(t, dftype.StatusQueued, info.Status)
	b.h.RunUntilIdle()
	got, err := api.Get(b.ctx, "greet", "e-1")
	require.NoError(t, err)
	require.JSONEq(t, `{"greeting":"hello, host"}`, string(got.Output))

	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, url+"/host/engine/workflows/greet/instances", strings.NewReader(`{"id":"e-2"}`))
	require.NoError(t, err)
	r := b.send(t, req)
	r.requireOK(t, http.StatusCreated, nil)
	require.Equal(t, "/host/engine/workflows/greet/instances/e-2", r.header.Get("Location"))

	// The API's own errors, in its shape, under the host's prefix.
	_, err = api.Get(b.ctx, "greet", "nope")
	require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
	req, err = http.NewRequestWithContext(b.ctx, http.MethodGet, url+"/host/engine/no/such/route", nil)
	require.NoError(t, err)
	b.send(t, req).requireError(t, http.StatusNotFound, apiclient.CodeNotFound, "GET /host/engine/no/such/route")

	// The host's own route is the host's.
	req, err = http.NewRequestWithContext(b.ctx, http.MethodGet, url+"/host/own", nil)
	require.NoError(t, err)
	r = b.send(t, req)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "the host's", string(r.body))
}

func embeddedServer(t *testing.T, backend testharness.Backend, prefix string) (*testBundle, *httpapi.Server) {
	t.Helper()
	b := setupOn(t, backend, "")
	srv, err := httpapi.New(&httpapi.Config{Client: b.h.Client, Prefix: prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	return b, srv
}

// TestEmbeddedInEcho mounts the API on a group of a host's echo server.
func TestEmbeddedInEcho(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b, srv := embeddedServer(t, backend, "/host/engine")
		e := echo.New()
		e.GET("/host/own", func(c echo.Context) error { return c.String(http.StatusOK, "the host's") })
		require.NoError(t, srv.Register(e.Group("/host/engine")))
		ts := httptest.NewServer(e)
		t.Cleanup(ts.Close)
		embedded(t, b, ts.URL)

		// A group elsewhere than Config.Prefix is refused.
		require.ErrorContains(t, srv.Register(echo.New().Group("/elsewhere")), `"/elsewhere" is not Config.Prefix "/host/engine"`)
	})
}

// TestEmbeddedInServeMux mounts Handler on a host's net/http ServeMux.
func TestEmbeddedInServeMux(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b, srv := embeddedServer(t, backend, "/host/engine")
		mux := http.NewServeMux()
		mux.HandleFunc("GET /host/own", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the host's") })
		mux.Handle("/host/engine/", srv.Handler())
		ts := httptest.NewServer(mux)
		t.Cleanup(ts.Close)
		embedded(t, b, ts.URL)
	})
}
