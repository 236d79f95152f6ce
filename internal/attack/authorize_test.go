//go:build attack

package attack_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// The binary cannot be given an Authorize hook: this attack runs at
// package level, against httpapi.Server on loopback over each backend.

// tenantHook is an Authorize hook as docs/http-api.md suggests one: the
// operator may do anything; the tenant may do every action, but only in
// the namespace "tenant", as RequestNamespace tells it.
func tenantHook(r *http.Request, action httpapi.Action) error {
	switch r.Header.Get("Authorization") {
	case "Bearer operator":
		return nil
	case "Bearer tenant":
		ns, err := httpapi.RequestNamespace(r)
		if err != nil {
			return err
		}
		if ns == "" {
			ns = workflow.DefaultNamespace
		}
		if ns != "tenant" {
			return fmt.Errorf("%w: the tenant may not act in namespace %q", httpapi.ErrForbidden, ns)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown credentials", httpapi.ErrUnauthorized)
}

// TestAuthorizeHookNamespaceLimitBindsEveryRoute: a tenant that such a
// hook limits to its namespace is refused every route of the server but
// those of its namespace: every route that spans every namespace
// (lifecycle events, workers and their drain, queues and their limits,
// schedules, flows, the tick), whatever namespace it selects; every
// instance route of another namespace; every trigger of another
// namespace. Its creates keep to their workflow's queue and priority 0.
func TestAuthorizeHookNamespaceLimitBindsEveryRoute(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "hello", func(ctx context.Context, ev workflow.Event[map[string]any], step workflow.Step) (string, error) {
			return "hi", nil
		})
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		sched, err := schedule.New(&schedule.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: quiet})
		require.NoError(t, err)
		flows, err := flow.New(&flow.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: quiet})
		require.NoError(t, err)
		srv, err := httpapi.New(&httpapi.Config{
			Client: h.Client, Authorize: tenantHook, Logger: quiet, Schedules: sched, Flows: flows,
			Tick: func(context.Context, int, int) (int, error) { return 0, nil },
			Triggers: []httpapi.Trigger{
				{Path: "/hooks/default", Workflow: "hello"},
				{Path: "/hooks/tenant", Workflow: "hello", Namespace: "tenant"},
			},
		})
		require.NoError(t, err)
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		send := func(method, path, body, secret string) (int, string) {
			req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("Content-Type", "application/json")
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(data)
		}
		_, err = h.Client.Create(h.Context(), "hello", dftype.CreateRequest{ID: "of-default"})
		require.NoError(t, err)

		every := 0
		for _, r := range srv.Routes() {
			if r.Action == "" || r.Path == "/hooks/tenant" {
				continue // health; the tenant's own trigger
			}
			path := r.Path
			for _, seg := range []string{":name", ":id", ":version"} {
				path = strings.ReplaceAll(path, seg, map[string]string{":name": "hello", ":id": "of-default", ":version": "1.0.0"}[seg])
			}
			selectors := []string{"?namespace=default"}
			if r.EveryNamespace {
				every++
				selectors = []string{"", "?namespace=tenant", "?namespace=default"}
			}
			for _, sel := range selectors {
				status, body := send(r.Method, path+sel, "{}", "tenant")
				require.Equal(t, http.StatusForbidden, status, "%s %s%s: %s", r.Method, path, sel, body)
				require.Contains(t, body, `"FORBIDDEN"`)
			}
		}
		require.Equal(t, 17, every, "the routes that span every namespace")

		// In its namespace the tenant works; its creates keep to the
		// workflow's queue and priority 0.
		status, body := send(http.MethodPost, "/hooks/tenant", `{}`, "tenant")
		require.Equal(t, http.StatusAccepted, status, body)
		status, body = send(http.MethodPost, "/api/workflows/hello/instances?namespace=tenant", `{"id":"t1"}`, "tenant")
		require.Equal(t, http.StatusCreated, status, body)
		for _, create := range []string{`{"id":"t2","queue":"shared"}`, `{"id":"t2","priority":1000}`} {
			status, body = send(http.MethodPost, "/api/workflows/hello/instances?namespace=tenant", create, "tenant")
			require.Equal(t, http.StatusForbidden, status, body)
		}
		_, err = h.Client.Get(h.Context(), "hello", "t2")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
		status, body = send(http.MethodPost, "/api/workflows/hello/instances?namespace=tenant", `{"id":"t3","queue":"shared","priority":1000}`, "operator")
		require.Equal(t, http.StatusCreated, status, body)
		inst, err := h.Client.Get(h.Context(), "hello", "of-default")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, inst.Status, "nothing the tenant sent reached default's instance")
	})
}
