package httpapi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// everyNamespaceRoute is a request to a route that acts on or reads every
// namespace at once.
type everyNamespaceRoute struct {
	method, pattern, path, body string
}

// everyNamespaceRoutes are a request to each route of every namespace
// (under /api), which a caller limited to namespaces may not call.
func everyNamespaceRoutes() []everyNamespaceRoute {
	return []everyNamespaceRoute{
		{"GET", "/api/events", "/api/events", ""},
		// Allowed, the stream refuses a bad filter before it starts.
		{"GET", "/api/events/stream", "/api/events/stream?type=instance.exploded", ""},
		{"GET", "/api/workers", "/api/workers", ""},
		{"GET", "/api/workers/:id", "/api/workers/w1", ""},
		{"POST", "/api/workers/:id/drain", "/api/workers/w1/drain", ""},
		{"GET", "/api/queues", "/api/queues", ""},
		{"GET", "/api/queues/:name", "/api/queues/default", ""},
		{"PUT", "/api/queues/:name", "/api/queues/q", `{"maxRunning":1}`},
		{"GET", "/api/schedules", "/api/schedules", ""},
		{"GET", "/api/schedules/:id", "/api/schedules/s1", ""},
		{"POST", "/api/schedules", "/api/schedules", `{"id":"s2","workflowName":"greet","cron":"* * * * *","enabled":false}`},
		{"PATCH", "/api/schedules/:id", "/api/schedules/s1", `{"cron":"0 * * * *"}`},
		{"DELETE", "/api/schedules/:id", "/api/schedules/s3", ""},
		{"POST", "/api/schedules/:id/enable", "/api/schedules/s1/enable", ""},
		{"POST", "/api/schedules/:id/disable", "/api/schedules/s1/disable", ""},
		{"POST", "/api/flows", "/api/flows", doubler("1.0.0")},
		{"POST", "/api/_runner/tick", "/api/_runner/tick", `{}`},
	}
}

// requireEveryNamespaceRoutes checks that the table above names exactly
// the routes the server marks as acting on every namespace.
func requireEveryNamespaceRoutes(t *testing.T, srv *httpapi.Server) {
	t.Helper()
	var marked, listed []string
	for _, r := range srv.Routes() {
		if r.EveryNamespace {
			marked = append(marked, r.Method+" "+r.Path)
		}
	}
	for _, r := range everyNamespaceRoutes() {
		listed = append(listed, r.method+" "+r.pattern)
	}
	slices.Sort(marked)
	slices.Sort(listed)
	require.Equal(t, listed, marked)
}

// withFleet serves schedules, flows and the tick, with a schedule s1 and a
// schedule s3 to delete.
func withFleet(t *testing.T) []func(*httpapi.Config, *testharness.Harness) {
	return []func(*httpapi.Config, *testharness.Harness){withSchedules(t, nil), withFlows(t, nil), withTick}
}

// A token limited to namespaces reads and changes nothing that spans every
// namespace: another tenant's schedule params, the workers (hosts, pids,
// counters), the queues with every namespace's running counts, the
// lifecycle events; an unlimited token with the scope may.
func TestNamespacedTokenIsRefusedEveryNamespaceRoutes(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "s-admin", append(withFleet(t), withTokens(
			"admin:s-admin:*,tick", "reader:s-read:read", "acme:s-acme:*@acme", "def:s-def:*@default",
		))...)
		requireEveryNamespaceRoutes(t, b.server)
		for _, id := range []string{"s1", "s3"} {
			b.call(t, http.MethodPost, "/api/schedules", fmt.Sprintf(`{"id":%q,"workflowName":"greet","cron":"* * * * *","params":{"secret":"of default"},"enabled":false}`, id), "Authorization: Bearer s-admin").
				requireOK(t, http.StatusCreated, nil)
		}
		for _, r := range everyNamespaceRoutes() {
			for _, secret := range []string{"s-acme", "s-def"} {
				for _, selector := range []string{"", "?namespace=acme", "?namespace=default"} {
					path := r.path
					if selector != "" {
						path += strings.Replace(selector, "?", map[bool]string{true: "&", false: "?"}[strings.Contains(path, "?")], 1)
					}
					resp := b.call(t, r.method, path, r.body, "Authorization: Bearer "+secret)
					require.Equal(t, http.StatusForbidden, resp.status, "%s %s with %s: %s", r.method, path, secret, resp.body)
					resp.requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
					require.NotContains(t, string(resp.body), "of default")
				}
			}
			resp := b.call(t, r.method, r.path, r.body, "Authorization: Bearer s-admin")
			require.NotEqual(t, http.StatusForbidden, resp.status, "%s %s with the admin token: %s", r.method, r.path, resp.body)
		}
		// The reader reads them.
		for _, p := range []string{"/api/schedules", "/api/workers", "/api/queues", "/api/events"} {
			b.call(t, http.MethodGet, p, "", "Authorization: Bearer s-read").requireOK(t, http.StatusOK, nil)
		}
		// Nothing the tenants sent changed the schedule.
		s1, err := b.api.GetSchedule(b.ctx, "s1")
		require.NoError(t, err)
		require.Equal(t, "0 * * * *", s1.Cron, "the admin's PATCH alone")
	})
}

// A trigger creates in its own namespace (Trigger.Namespace, default
// "default"): a token limited to other namespaces may not fire it, and a
// request may not move it to another namespace.
func TestTriggerCreatesInItsNamespace(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "s-admin", withTriggers(
			httpapi.Trigger{Path: "/hooks/default", Workflow: "greet"},
			httpapi.Trigger{Path: "/hooks/acme", Workflow: "greet", Namespace: "acme"},
		), withTokens("admin:s-admin:*", "acme:s-acme:create@acme", "def:s-def:*@default"))
		before := b.countAll(t)

		// acme may not create in default through its trigger, selector or
		// not; default's token may not reach acme's.
		for _, tc := range []struct{ secret, path string }{
			{"s-acme", "/hooks/default"},
			{"s-acme", "/hooks/default?namespace=acme"},
			{"s-acme", "/hooks/default?namespace=default"},
			{"s-def", "/hooks/acme"},
			{"s-def", "/hooks/acme?namespace=acme"},
		} {
			resp := b.call(t, http.MethodPost, tc.path, `{"name":"Ada"}`, "Authorization: Bearer "+tc.secret)
			require.Contains(t, []int{http.StatusForbidden, http.StatusBadRequest}, resp.status, "%s %s: %s", tc.secret, tc.path, resp.body)
		}
		b.call(t, http.MethodPost, "/hooks/default?namespace=acme", `{"name":"Ada"}`, "Authorization: Bearer s-acme").
			requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "namespace")
		b.call(t, http.MethodPost, "/hooks/acme?namespace=default", `{"name":"Ada"}`, "Authorization: Bearer s-admin").
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, `acts in namespace "acme"`)
		require.Equal(t, before, b.countAll(t), "a refused trigger created nothing")

		inAcme := b.triggeredIn(t, b.call(t, http.MethodPost, "/hooks/acme", `{"name":"Ada"}`, "Authorization: Bearer s-acme"))
		require.Equal(t, "acme", inAcme.Namespace)
		inAcme = b.triggeredIn(t, b.call(t, http.MethodPost, "/hooks/acme?namespace=acme", `{"name":"Ada"}`, "Authorization: Bearer s-admin"))
		require.Equal(t, "acme", inAcme.Namespace)
		inDefault := b.triggeredIn(t, b.call(t, http.MethodPost, "/hooks/default", `{"name":"Ada"}`, "Authorization: Bearer s-def"))
		require.Equal(t, workflow.DefaultNamespace, inDefault.Namespace)

		// The command-line form names the namespace after the workflow.
		tr, err := httpapi.ParseTrigger("POST /hooks/x=greet@acme,name=body.n")
		require.NoError(t, err)
		require.Equal(t, httpapi.Trigger{Method: "POST", Path: "/hooks/x", Workflow: "greet", Namespace: "acme", Params: map[string]string{"name": "body.n"}}, tr)
		for _, spec := range []string{"/hooks/x=greet@", "/hooks/x=greet@bad ns"} {
			_, err := httpapi.ParseTrigger(spec)
			require.Error(t, err, spec)
		}
		_, err = httpapi.ParseTriggersJSON([]byte(`[{"path":"/hooks/x","workflow":"greet","namespace":"-bad"}]`))
		require.Error(t, err)
	})
}

// countAll counts the instances of greet in every namespace.
func (b *testBundle) countAll(t *testing.T) int {
	t.Helper()
	n := 0
	for _, ns := range []string{workflow.DefaultNamespace, "acme"} {
		list, err := b.h.Client.Namespace(ns).List(b.ctx, client.ListParams{WorkflowName: "greet"})
		require.NoError(t, err)
		n += len(list.Instances)
	}
	return n
}

// triggeredIn requires a 202 answer of a trigger and returns the instance
// it created, of any namespace.
func (b *testBundle) triggeredIn(t *testing.T, r *response) *dftype.InstanceInfo {
	t.Helper()
	var out httpapi.TriggerResponse
	r.requireOK(t, http.StatusAccepted, &out)
	info, err := b.h.Client.Get(b.ctx, "greet", out.InstanceID)
	require.NoError(t, err)
	return info
}

// tenantAuthorize is an AuthorizeFunc as docs/http-api.md suggests one: the
// admin may do anything; the tenant of acme may do any action, in acme
// only, as RequestNamespace tells.
func tenantAuthorize(r *http.Request, action httpapi.Action) error {
	switch r.Header.Get("Authorization") {
	case "Bearer s-admin":
		return nil
	case "Bearer s-acme":
		ns, err := httpapi.RequestNamespace(r)
		if err != nil {
			return err
		}
		if ns == "" {
			ns = workflow.DefaultNamespace
		}
		if ns != "acme" {
			return fmt.Errorf("%w: the tenant of acme may not act in namespace %q", httpapi.ErrForbidden, ns)
		}
		return nil
	}
	return fmt.Errorf("%w: unknown credentials", httpapi.ErrUnauthorized)
}

// An AuthorizeFunc that limits a caller to a namespace by RequestNamespace
// limits it on every route: the routes of every namespace (RequestNamespace
// answers AllNamespaces, whatever the request selects), the triggers (their
// namespace), /metrics behind Guard, the console's principal, and the
// queues and priorities its creates may name.
func TestAuthorizeFuncNamespaceLimitBindsEveryRoute(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "s-admin", append(withFleet(t), func(c *httpapi.Config, h *testharness.Harness) {
			c.Authorize = tenantAuthorize
		}, withTriggers(httpapi.Trigger{Path: "/hooks/default", Workflow: "greet"}, httpapi.Trigger{Path: "/hooks/acme", Workflow: "greet", Namespace: "acme"}))...)
		requireEveryNamespaceRoutes(t, b.server)
		b.call(t, http.MethodPost, "/api/schedules", `{"id":"s1","workflowName":"greet","cron":"* * * * *","enabled":false}`, "Authorization: Bearer s-admin").
			requireOK(t, http.StatusCreated, nil)
		for _, r := range everyNamespaceRoutes() {
			path := r.path + map[bool]string{true: "&", false: "?"}[strings.Contains(r.path, "?")] + "namespace=acme"
			b.call(t, r.method, path, r.body, "Authorization: Bearer s-acme").
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, `namespace "*"`)
		}

		// In acme the tenant works as before.
		b.call(t, http.MethodPost, "/api/workflows/greet/instances?namespace=acme", `{"id":"a1","params":{"name":"Ada"}}`, "Authorization: Bearer s-acme").
			requireOK(t, http.StatusCreated, nil)
		b.call(t, http.MethodGet, "/api/workflows/greet/instances/a1?namespace=acme", "", "Authorization: Bearer s-acme").
			requireOK(t, http.StatusOK, nil)
		b.call(t, http.MethodGet, "/api/workflows/greet/instances/a1", "", "Authorization: Bearer s-acme").
			requireError(t, http.StatusForbidden, apiclient.CodeForbidden, `namespace "default"`)

		// Triggers: only acme's.
		b.call(t, http.MethodPost, "/hooks/default?namespace=acme", `{"name":"Ada"}`, "Authorization: Bearer s-acme").
			requireError(t, http.StatusForbidden, apiclient.CodeForbidden, `namespace "default"`)
		require.Equal(t, "acme", b.triggeredIn(t, b.call(t, http.MethodPost, "/hooks/acme", `{"name":"Ada"}`, "Authorization: Bearer s-acme")).Namespace)

		// Creates: the workflow's queue and priorities up to 0, unless the
		// AuthorizeFunc allows every namespace.
		for _, body := range []string{`{"id":"a2","queue":"payments"}`, `{"id":"a2","priority":1000}`} {
			b.call(t, http.MethodPost, "/api/workflows/greet/instances?namespace=acme", body, "Authorization: Bearer s-acme").
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "limited to namespaces")
		}
		_, err := b.h.Client.Get(b.ctx, "greet", "a2")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
		b.call(t, http.MethodPost, "/api/workflows/greet/instances?namespace=acme", `{"id":"a3","queue":"payments","priority":1000}`, "Authorization: Bearer s-admin").
			requireOK(t, http.StatusCreated, nil)

		// /metrics behind Guard.
		guarded, err := httpapi.Guard(nil, tenantAuthorize, httpapi.ActionMetrics, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("metrics"))
		}))
		require.NoError(t, err)
		for secret, want := range map[string]int{"s-acme": http.StatusForbidden, "s-admin": http.StatusOK} {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/metrics?namespace=acme", nil)
			req.Header.Set("Authorization", "Bearer "+secret)
			guarded.ServeHTTP(rec, req)
			require.Equal(t, want, rec.Code, "/metrics with %s: %s", secret, rec.Body)
		}

		// The console's principal.
		auth, err := httpapi.NewAuthenticator(nil, tenantAuthorize)
		require.NoError(t, err)
		req := httptest.NewRequest(http.MethodGet, "/ui/workers?namespace=acme", nil)
		for secret, every := range map[string]bool{"s-acme": false, "s-admin": true} {
			p, err := auth.Login(req, secret)
			require.NoError(t, err)
			require.True(t, p.Can(req, httpapi.ActionRead), secret)
			require.Equal(t, every, p.CanEveryNamespace(req, httpapi.ActionRead), secret)
		}
	})
}

// A token limited to namespaces puts its instances on their workflow's
// queue or on a queue its namespace is given (Config.NamespaceQueues), at
// a priority of at most Config.NamespaceMaxPriority: queues and priorities
// are shared by every namespace. Anything else is 403 and creates nothing;
// an unlimited token chooses freely.
func TestNamespacedCreatesKeepToTheirQueuesAndPriorities(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "s-admin", withTokens("admin:s-admin:*", "acme:s-acme:*@acme"), func(c *httpapi.Config, _ *testharness.Harness) {
			c.NamespaceQueues = map[string][]string{"acme": {"acme-bulk"}, "globex": {"payments"}}
			c.NamespaceMaxPriority = 10
		})
		for _, body := range []string{
			`{"id":"x","queue":"payments"}`,
			`{"id":"x","priority":11}`,
			`{"id":"x","priority":1000,"queue":"acme-bulk"}`,
		} {
			b.call(t, http.MethodPost, "/api/workflows/greet/instances", body, "Authorization: Bearer s-acme").
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "limited to namespaces")
			b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"y"},`+body+`]}`, "Authorization: Bearer s-acme").
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "limited to namespaces")
		}
		for _, id := range []string{"x", "y"} {
			_, err := b.h.Client.Get(b.ctx, "greet", id)
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "a refused create wrote %s", id)
		}

		var info dftype.InstanceInfo
		for _, body := range []string{`{"id":"a","queue":"acme-bulk","priority":10}`, `{"id":"b","queue":"default","priority":-1000}`} {
			b.call(t, http.MethodPost, "/api/workflows/greet/instances", body, "Authorization: Bearer s-acme").requireOK(t, http.StatusCreated, &info)
			require.Equal(t, "acme", info.Namespace)
		}
		require.Equal(t, "default", info.Queue, "the workflow's own queue, named")
		b.call(t, http.MethodPost, "/api/workflows/greet/instances?namespace=globex", `{"id":"c","queue":"payments","priority":1000}`, "Authorization: Bearer s-admin").
			requireOK(t, http.StatusCreated, &info)
		require.Equal(t, "payments", info.Queue)
		require.Equal(t, 1000, info.Priority)

		// The configuration is checked.
		for _, cfg := range []func(*httpapi.Config){
			func(c *httpapi.Config) { c.NamespaceMaxPriority = workflow.MaxPriority + 1 },
			func(c *httpapi.Config) { c.NamespaceQueues = map[string][]string{"acme": {"bad queue"}} },
			func(c *httpapi.Config) { c.NamespaceQueues = map[string][]string{"-bad": {"q"}} },
		} {
			c := &httpapi.Config{Client: b.h.Client}
			cfg(c)
			_, err := httpapi.New(c)
			require.Error(t, err)
		}
	})
}

// Ids are unique per workflow across namespaces: a create whose id another
// namespace uses gets the answer of any taken id, 409
// INSTANCE_ID_ALREADY_EXISTS with the same message as for an id of its own
// namespace, which says nothing of the instance that holds it.
func TestIDOfAnotherNamespaceAnswersLikeAnyTakenID(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "s-admin", withTokens("admin:s-admin:*", "def:s-def:*@default"))
		b.call(t, http.MethodPost, "/api/workflows/greet/instances?namespace=acme", `{"id":"taken","params":{"name":"acme-secret"}}`, "Authorization: Bearer s-admin").
			requireOK(t, http.StatusCreated, nil)
		b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"own","params":{"name":"x"}}`, "Authorization: Bearer s-def").
			requireOK(t, http.StatusCreated, nil)

		other := b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"taken"}`, "Authorization: Bearer s-def")
		msgOther := other.requireError(t, http.StatusConflict, apiclient.CodeInstanceIDAlreadyExists)
		own := b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"own"}`, "Authorization: Bearer s-def")
		msgOwn := own.requireError(t, http.StatusConflict, apiclient.CodeInstanceIDAlreadyExists)
		require.Equal(t, strings.ReplaceAll(msgOwn, "own", "taken"), msgOther, "the same answer as an id of its own namespace")
		for _, leak := range []string{"acme", "acme-secret", "createdAt"} {
			require.NotContains(t, string(other.body), leak)
		}
		var batch apiclient.InstanceBatch
		b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"taken"}]}`, "Authorization: Bearer s-def").
			requireOK(t, http.StatusCreated, &batch)
		require.Empty(t, batch.Instances, "a batch skips a taken id, whatever its namespace")
	})
}
