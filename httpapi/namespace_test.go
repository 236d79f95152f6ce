package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// withTokens configures the server with token specs.
func withTokens(specs ...string) func(*httpapi.Config, *testharness.Harness) {
	return func(c *httpapi.Config, _ *testharness.Harness) {
		for _, spec := range specs {
			tok, err := httpapi.ParseToken(spec)
			if err != nil {
				panic(err)
			}
			c.Tokens = append(c.Tokens, tok)
		}
	}
}

// instanceRoutes are every route that reads or changes one instance, with a
// body each accepts.
var instanceRoutes = []struct{ method, suffix, body string }{
	{http.MethodGet, "", ""},
	{http.MethodGet, "/history", ""},
	{http.MethodPost, "/pause", "{}"},
	{http.MethodPost, "/resume", "{}"},
	{http.MethodPost, "/terminate", "{}"},
	{http.MethodPost, "/restart", "{}"},
	{http.MethodPost, "/events", `{"type":"approval","payload":{"by":"mallory"}}`},
}

func TestNamespacedTokensSeeOnlyTheirNamespace(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "s-admin", withTokens(
			"admin:s-admin:*", "acme:s-acme:*@acme", "globex:s-globex:read,create,manage,events@globex,initech",
		))
		acme := apiclient.New(b.srv.URL, "s-acme", b.srv.Client())
		globex := apiclient.New(b.srv.URL, "s-globex", b.srv.Client())

		// A token limited to namespaces acts in its first without a selector.
		a1, err := acme.Create(b.ctx, "approve", dftype.CreateRequest{ID: "a1"})
		require.NoError(t, err)
		require.Equal(t, "acme", a1.Namespace)
		g1, err := globex.Create(b.ctx, "approve", dftype.CreateRequest{ID: "g1"})
		require.NoError(t, err)
		require.Equal(t, "globex", g1.Namespace)
		i1, err := globex.WithNamespace("initech").Create(b.ctx, "approve", dftype.CreateRequest{ID: "i1"})
		require.NoError(t, err)
		require.Equal(t, "initech", i1.Namespace)
		b.h.RunUntilIdle()

		// globex cannot see or touch acme's instance through any route: it
		// is not found, exactly as an id that does not exist.
		for _, r := range instanceRoutes {
			for _, id := range []string{"a1", "nobody"} {
				resp := b.call(t, r.method, "/api/workflows/approve/instances/"+id+r.suffix, r.body, "Authorization: Bearer s-globex")
				resp.requireError(t, http.StatusNotFound, apiclient.CodeInstanceNotFound)
			}
			// Selecting acme is refused outright.
			b.call(t, r.method, "/api/workflows/approve/instances/a1"+r.suffix+"?namespace=acme", r.body, "Authorization: Bearer s-globex").
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "namespace")
			b.call(t, r.method, "/api/workflows/approve/instances/a1"+r.suffix, r.body, "Authorization: Bearer s-globex", httpapi.NamespaceHeader+": acme").
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "namespace")
		}
		b.call(t, http.MethodPost, "/api/workflows/approve/instances?namespace=acme", `{"id":"x"}`, "Authorization: Bearer s-globex").
			requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
		b.call(t, http.MethodPost, "/api/workflows/approve/instances/batch?namespace=acme", `{"instances":[{"id":"x"}]}`, "Authorization: Bearer s-globex").
			requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
		b.call(t, http.MethodGet, "/api/workflows/approve/instances?namespace=acme", "", "Authorization: Bearer s-globex").
			requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
		// acme's id is taken for every namespace, but creating it from globex
		// says only that the id exists.
		_, err = globex.Create(b.ctx, "approve", dftype.CreateRequest{ID: "a1"})
		require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)

		// What acts on the whole fleet (a queue's limits, a worker's drain)
		// is not a namespaced token's, whatever its scopes; an unlimited
		// token with manage may.
		for _, secret := range []string{"s-acme", "s-globex"} {
			b.call(t, http.MethodPut, "/api/queues/default", `{"maxRunning":1}`, "Authorization: Bearer "+secret).
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "limited to namespaces")
			b.call(t, http.MethodPost, "/api/workers/anyone/drain", "", "Authorization: Bearer "+secret).
				requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "limited to namespaces")
		}
		b.call(t, http.MethodPost, "/api/workers/anyone/drain", "", "Authorization: Bearer s-admin").
			requireError(t, http.StatusNotFound, apiclient.CodeWorkerNotFound)

		// Lists hold only the token's namespace.
		list, err := globex.List(b.ctx, client.ListParams{WorkflowName: "approve"})
		require.NoError(t, err)
		require.Equal(t, []string{"g1"}, ids(list.Instances))
		list, err = globex.WithNamespace("initech").List(b.ctx, client.ListParams{WorkflowName: "approve"})
		require.NoError(t, err)
		require.Equal(t, []string{"i1"}, ids(list.Instances))

		// acme's instance was left alone, and acme can drive it.
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
		require.NoError(t, acme.SendEvent(b.ctx, "approve", "a1", "approval", json.RawMessage(`{"by":"ada"}`)))
		b.h.RunUntilIdle()
		done, err := acme.Get(b.ctx, "approve", "a1")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, done.Status)
		require.JSONEq(t, `{"by":"ada"}`, string(done.Output))

		// An unlimited token acts in "default" without a selector, and in any
		// namespace it selects.
		admin := b.api
		_, err = admin.Get(b.ctx, "approve", "a1")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
		got, err := admin.WithNamespace("acme").Get(b.ctx, "approve", "a1")
		require.NoError(t, err)
		require.Equal(t, "acme", got.Namespace)
	})
}

func ids(list []*dftype.InstanceInfo) []string {
	out := []string{}
	for _, i := range list {
		out = append(out, i.ID)
	}
	return out
}

func wireIDs(list []*apiclient.Instance) []string {
	out := []string{}
	for _, i := range list {
		out = append(out, i.ID)
	}
	return out
}

func TestNamespaceSelectorIsChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, "s-admin", withTokens("admin:s-admin:*"))
	for _, tc := range []struct {
		path    string
		headers []string
	}{
		{"/api/workflows/greet/instances/x?namespace=bad%20ns", nil},
		{"/api/workflows/greet/instances/x?namespace=a&namespace=b", nil},
		{"/api/workflows/greet/instances/x?namespace=a", []string{httpapi.NamespaceHeader + ": b"}},
		{"/api/workflows/greet/instances/x", []string{httpapi.NamespaceHeader + ": -bad"}},
	} {
		resp := b.call(t, http.MethodGet, tc.path, "", append(tc.headers, "Authorization: Bearer s-admin")...)
		resp.requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
	}
	// Query and header may agree.
	b.call(t, http.MethodGet, "/api/workflows/greet/instances?namespace=a", "", "Authorization: Bearer s-admin", httpapi.NamespaceHeader+": a").
		requireOK(t, http.StatusOK, nil)
}

func TestNamespacedTokenSpecs(t *testing.T) {
	t.Parallel()
	tok, err := httpapi.ParseToken("acme:s3:cret:read,create@acme, acme-eu")
	require.NoError(t, err)
	require.Equal(t, "acme", tok.Name)
	require.Equal(t, []httpapi.Action{httpapi.ActionRead, httpapi.ActionCreate}, tok.Scopes)
	require.Equal(t, []string{"acme", "acme-eu"}, tok.Namespaces)
	require.Equal(t, httpapi.NewToken("x", "s3:cret").Hash, tok.Hash, "the secret may hold colons")

	// "*" of a namespaced token grants the namespaced actions only.
	tok, err = httpapi.ParseToken("acme:s:*@acme")
	require.NoError(t, err)
	require.ElementsMatch(t, []httpapi.Action{httpapi.ActionRead, httpapi.ActionCreate, httpapi.ActionManage, httpapi.ActionEvents}, tok.Scopes)

	for _, spec := range []string{
		"acme:s:read@",             // no namespace
		"acme:s:read@bad ns",       // a bad name
		"acme:s:flows@acme",        // flows act outside namespaces
		"acme:s:schedules@acme",    // so do schedules
		"acme:s:read,tick@acme",    // and ticks
		"acme:s:read@acme,,globex", // an empty name
	} {
		_, err := httpapi.ParseToken(spec)
		require.Error(t, err, spec)
	}
	_, err = httpapi.New(&httpapi.Config{Client: setup(t, "").h.Client, Tokens: []httpapi.Token{
		{Name: "x", Hash: httpapi.NewToken("x", "s").Hash, Scopes: []httpapi.Action{httpapi.ActionFlows}, Namespaces: []string{"acme"}},
	}})
	require.Error(t, err, "a token built in Go is checked too")
}

func TestCreatePlacementOverHTTP(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "")
		var info dftype.InstanceInfo
		b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"a","queue":"fast","priority":5,"dedupeKey":"k"}`).
			requireOK(t, http.StatusCreated, &info)
		require.Equal(t, "fast", info.Queue)
		require.Equal(t, 5, info.Priority)
		require.Equal(t, "k", info.DedupeKey)
		require.Equal(t, workflow.DefaultNamespace, info.Namespace)
		require.False(t, info.Deduplicated)

		// The same key answers 200 with the holder.
		var again map[string]any
		resp := b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"b","dedupeKey":"k"}`)
		resp.requireOK(t, http.StatusOK, &again)
		require.Equal(t, "a", again["id"])
		require.Equal(t, true, again["deduplicated"])
		require.Equal(t, "/api/workflows/greet/instances/a", resp.header.Get("Location"))

		var batch apiclient.InstanceBatch
		b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"c","dedupeKey":"k"},{"id":"d","priority":-3,"queue":"slow"}]}`).
			requireOK(t, http.StatusCreated, &batch)
		require.Equal(t, []string{"a", "d"}, wireIDs(batch.Instances))
		require.True(t, batch.Instances[0].Deduplicated)
		require.Equal(t, -3, batch.Instances[1].Priority)

		list, err := b.api.List(b.ctx, client.ListParams{WorkflowName: "greet", Queue: "fast"})
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, ids(list.Instances))

		// Bad input: a code, and nothing written.
		for _, tc := range []struct {
			body string
			code apiclient.Code
		}{
			{`{"id":"x","priority":1001}`, apiclient.CodeInvalidPriority},
			{`{"id":"x","priority":-1001}`, apiclient.CodeInvalidPriority},
			{`{"id":"x","queue":"no spaces"}`, apiclient.CodeInvalidRequest},
			{`{"id":"x","dedupeKey":"a\u0000b"}`, apiclient.CodeInvalidRequest},
			{`{"id":"x","priority":"high"}`, apiclient.CodeInvalidRequest},
		} {
			b.call(t, http.MethodPost, "/api/workflows/greet/instances", tc.body).requireError(t, http.StatusBadRequest, tc.code)
			b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[`+tc.body+`]}`).requireError(t, http.StatusBadRequest, tc.code)
		}
		_, err = b.api.Get(b.ctx, "greet", "x")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "nothing was written")
		b.call(t, http.MethodGet, "/api/workflows/greet/instances?queue=bad%20queue", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)

		// The typed client maps the code back.
		_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "y", Priority: 5000})
		require.ErrorIs(t, err, workflow.ErrInvalidPriority)
	})
}
