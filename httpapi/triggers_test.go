package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
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

// withTriggers configures triggers and the harness's clock.
func withTriggers(triggers ...httpapi.Trigger) func(*httpapi.Config, *testharness.Harness) {
	return func(c *httpapi.Config, h *testharness.Harness) {
		c.Triggers = triggers
		c.Clock = h.Clock
	}
}

// triggered requires a 202 answer of a trigger and returns the instance it
// created.
func (b *testBundle) triggered(t *testing.T, r *response) *dftype.InstanceInfo {
	t.Helper()
	var out httpapi.TriggerResponse
	r.requireOK(t, http.StatusAccepted, &out)
	require.NotEmpty(t, out.InstanceID)
	require.JSONEq(t, `{"instanceId":"`+out.InstanceID+`"}`, string(r.body))
	loc := r.header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/api/workflows/"), loc)
	require.True(t, strings.HasSuffix(loc, "/instances/"+out.InstanceID), loc)
	name := strings.TrimPrefix(strings.TrimSuffix(loc, "/instances/"+out.InstanceID), "/api/workflows/")
	info, err := b.h.Client.Get(b.ctx, name, out.InstanceID)
	require.NoError(t, err)
	return info
}

func TestTriggerRecordsProvenance(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTriggers(httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"}))

	r := b.call(t, "POST", "/hooks/greet", `{"name":"Ada"}`, "X-Request-Id: req-1", "Content-Type: application/json")
	inst := b.triggered(t, r)
	require.Equal(t, "req-1", r.header.Get("X-Request-Id"))
	require.Equal(t, "greet", inst.WorkflowName)
	require.JSONEq(t, `{"name":"Ada"}`, string(inst.Params), "the body is the params")

	prov, err := dftype.ProvenanceOf(inst.Metadata)
	require.NoError(t, err)
	require.Equal(t, &dftype.Provenance{
		Type: "http", Source: "POST /hooks/greet", ReceivedAt: b.h.Now().UTC(), RequestID: "req-1",
	}, prov)
	require.JSONEq(t, `{"trigger":{"type":"http","source":"POST /hooks/greet","receivedAt":"2026-01-01T09:00:00Z","requestId":"req-1"}}`,
		string(inst.Metadata))

	b.h.RunUntilIdle()
	var out greetOutput
	b.h.RequireOutput("greet", inst.ID, &out)
	require.Equal(t, "hello, Ada", out.Greeting)

	// Without X-Request-Id (or with an unreasonable one) the server makes one up.
	for _, headers := range [][]string{nil, {"X-Request-Id: " + strings.Repeat("x", 201)}} {
		r = b.call(t, "POST", "/hooks/greet", `{"name":"Grace"}`, headers...)
		inst = b.triggered(t, r)
		prov, err = dftype.ProvenanceOf(inst.Metadata)
		require.NoError(t, err)
		require.Len(t, prov.RequestID, 32)
		require.Equal(t, prov.RequestID, r.header.Get("X-Request-Id"))
	}

	// An empty body is null params.
	inst = b.triggered(t, b.call(t, "POST", "/hooks/greet", ""))
	require.Equal(t, "null", string(inst.Params))
}

func TestTriggerMapping(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTriggers(
		httpapi.Trigger{Method: "PUT", Path: "/hooks/orders/:id", Workflow: "steps", Params: map[string]string{
			"order.id":     "path.id",
			"order.lines":  "body.lines",
			"order.first":  "body.lines.0.sku",
			"order.note":   "body.note",
			"order.absent": "body.nope.deeper",
			"source":       "header.X-Source",
			"page":         "query.page",
			"missingQuery": "query.none",
			"raw":          "body",
		}},
		httpapi.Trigger{Method: "GET", Path: "/hooks/ping", Workflow: "steps", Params: map[string]string{"who": "query.who"}},
	))

	body := `{"lines":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1.50}],"note":null}`
	inst := b.triggered(t, b.call(t, "PUT", "/hooks/orders/o%2D42?page=3&page=4", body, "X-Source: shop"))
	require.JSONEq(t, `{
		"order": {
			"id": "o-42",
			"lines": [{"sku":"A-1","qty":2},{"sku":"B-2","qty":1.50}],
			"first": "A-1",
			"note": null
		},
		"source": "shop",
		"page": "3",
		"raw": `+body+`
	}`, string(inst.Params))
	require.Contains(t, string(inst.Params), `"qty":1.50`, "numbers are kept as written")

	inst = b.triggered(t, b.call(t, "GET", "/hooks/ping?who=me", ""))
	require.JSONEq(t, `{"who":"me"}`, string(inst.Params))
	prov, err := dftype.ProvenanceOf(inst.Metadata)
	require.NoError(t, err)
	require.Equal(t, "GET /hooks/ping", prov.Source)

	// Mappings that don't read the body ignore it, JSON or not.
	inst = b.triggered(t, b.call(t, "GET", "/hooks/ping", "not json"))
	require.JSONEq(t, `{}`, string(inst.Params))
}

func TestTriggerErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTriggers(
		httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"},
		httpapi.Trigger{Path: "/hooks/later", Workflow: "not-yet"},
		httpapi.Trigger{Path: "/hooks/mapped", Workflow: "greet", Params: map[string]string{"name": "body.name"}},
	), func(c *httpapi.Config, _ *testharness.Harness) { c.MaxBodyBytes = 1024 })

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     apiclient.Code
		has                      string
	}{
		{"not JSON", "POST", "/hooks/greet", `name=Ada`, 400, apiclient.CodeInvalidRequest, "not valid JSON"},
		{"trailing data", "POST", "/hooks/greet", `{} {}`, 400, apiclient.CodeInvalidRequest, "after the JSON body"},
		{"mapped not JSON", "POST", "/hooks/mapped", `{`, 400, apiclient.CodeInvalidRequest, "not valid JSON"},
		{"too large", "POST", "/hooks/greet", `{"name":"` + strings.Repeat("a", 2000) + `"}`, 413, apiclient.CodePayloadTooLarge, "limit is 1024"},
		{"unknown workflow", "POST", "/hooks/later", `{}`, 404, apiclient.CodeWorkflowNotFound, `"not-yet"`},
		{"wrong method", "GET", "/hooks/greet", ``, 405, apiclient.CodeMethodNotAllowed, ""},
		{"unknown hook", "POST", "/hooks/nope", `{}`, 404, apiclient.CodeNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.call(t, tc.method, tc.path, tc.body)
			r.requireError(t, tc.status, tc.code, tc.has)
		})
	}
	list, err := b.h.Client.List(b.ctx, client.ListParams{WorkflowName: "greet"})
	require.NoError(t, err)
	require.Empty(t, list.Instances, "a refused request creates nothing")
}

func TestTriggerNeedsCreateScope(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTriggers(httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"}),
		func(c *httpapi.Config, _ *testharness.Harness) {
			c.Tokens = []httpapi.Token{mustParseToken(t, "reader:reader:read"), mustParseToken(t, "hook:hook:create")}
		})
	b.call(t, "POST", "/hooks/greet", `{}`).requireError(t, 401, apiclient.CodeUnauthorized)
	b.call(t, "POST", "/hooks/greet", `{}`, "Authorization: Bearer reader").requireError(t, 403, apiclient.CodeForbidden, `"create"`)
	b.triggered(t, b.call(t, "POST", "/hooks/greet", `{}`, "Authorization: Bearer hook"))
	b.call(t, "GET", "/api/workflows", "", "Authorization: Bearer hook").requireError(t, 403, apiclient.CodeForbidden, `"read"`)
}

func TestTriggerWithoutAuthServesLoopbackOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withTriggers(httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"}))
	b.call(t, "POST", "/hooks/greet", `{}`, "Host: example.com").requireError(t, 403, apiclient.CodeForbidden, "loopback")
}

func TestTriggerConfigRejected(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	workflow.MustRegister(h.Registry, "greet", func(context.Context, workflow.Event[greetParams], workflow.Step) (greetOutput, error) {
		return greetOutput{}, nil
	})
	for _, tc := range []struct {
		name    string
		prefix  string
		trigger httpapi.Trigger
		has     string
	}{
		{"under the API", "", httpapi.Trigger{Path: "/api/hooks", Workflow: "greet"}, `segment "api" belongs to the API`},
		{"healthz", "", httpapi.Trigger{Path: "/healthz/x", Workflow: "greet"}, `"healthz"`},
		{"API at the root", "/", httpapi.Trigger{Path: "/workflows/x", Workflow: "greet"}, `"workflows"`},
		{"parameter first", "", httpapi.Trigger{Path: "/:any", Workflow: "greet"}, "belongs to the API"},
		{"method", "", httpapi.Trigger{Method: "TRACE", Path: "/hooks/x", Workflow: "greet"}, "method must be one of"},
		{"relative path", "", httpapi.Trigger{Path: "hooks/x", Workflow: "greet"}, "plain path"},
		{"wildcard", "", httpapi.Trigger{Path: "/hooks/*", Workflow: "greet"}, "plain path"},
		{"root", "", httpapi.Trigger{Path: "/", Workflow: "greet"}, "plain path"},
		{"workflow name", "", httpapi.Trigger{Path: "/hooks/x", Workflow: "no spaces"}, "invalid workflow name"},
		{"source", "", httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"a": "cookie.x"}}, `source "cookie.x"`},
		{"path parameter", "", httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"a": "path.id"}}, "no parameter :id"},
		{"no header name", "", httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"a": "header."}}, "names no header"},
		{"empty key segment", "", httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"a..b": "body"}}, "dot path"},
		{"overlapping keys", "", httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"a": "body", "a.b": "body"}}, "overlap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httpapi.New(&httpapi.Config{Client: h.Client, Prefix: tc.prefix, Triggers: []httpapi.Trigger{tc.trigger}})
			require.ErrorContains(t, err, tc.has)
		})
	}
	_, err := httpapi.New(&httpapi.Config{Client: h.Client, Triggers: []httpapi.Trigger{
		{Path: "/hooks/x", Workflow: "greet"}, {Method: "post", Path: "/hooks/x", Workflow: "greet"},
	}})
	require.ErrorContains(t, err, "configured twice")
}

func TestParseTrigger(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want httpapi.Trigger
	}{
		{"POST /hooks/orders=orders", httpapi.Trigger{Method: "POST", Path: "/hooks/orders", Workflow: "orders"}},
		{"/hooks/orders=orders", httpapi.Trigger{Path: "/hooks/orders", Workflow: "orders"}},
		{" PUT  /hooks/orders/:id=orders,order.id=path.id, lines = body.lines ,source=header.X-Source",
			httpapi.Trigger{Method: "PUT", Path: "/hooks/orders/:id", Workflow: "orders", Params: map[string]string{
				"order.id": "path.id", "lines": "body.lines", "source": "header.X-Source",
			}}},
	} {
		got, err := httpapi.ParseTrigger(tc.spec)
		require.NoError(t, err, tc.spec)
		require.Equal(t, tc.want, got, tc.spec)
	}
	for spec, has := range map[string]string{
		"POST /hooks/orders":            "want [METHOD ]PATH=WORKFLOW",
		"/hooks/x=orders,order.id":      "want KEY=SOURCE",
		"/hooks/x=orders,a=body,a=body": "mapped twice",
		"/hooks/x=orders,a=form.x":      `source "form.x"`,
		"FETCH /hooks/x=orders":         "method must be one of",
	} {
		_, err := httpapi.ParseTrigger(spec)
		require.ErrorContains(t, err, has, spec)
	}
}

func TestParseTriggersJSON(t *testing.T) {
	t.Parallel()
	want := []httpapi.Trigger{
		{Path: "/hooks/a", Workflow: "a"},
		{Method: "PUT", Path: "/hooks/b/:id", Workflow: "b", Params: map[string]string{"id": "path.id"}},
	}
	doc, err := json.Marshal(want)
	require.NoError(t, err)
	got, err := httpapi.ParseTriggersJSON(doc)
	require.NoError(t, err)
	require.Equal(t, want, got)
	got, err = httpapi.ParseTriggersJSON([]byte(`{"triggers":` + string(doc) + `}`))
	require.NoError(t, err)
	require.Equal(t, want, got)

	_, err = httpapi.ParseTriggersJSON([]byte(`[{"path":"/hooks/a","workflow":"a","mapping":{}}]`))
	require.ErrorContains(t, err, `"mapping"`)
	_, err = httpapi.ParseTriggersJSON([]byte(`[{"path":"/hooks/a","workflow":"a","params":{"x":"env.HOME"}}]`))
	require.ErrorContains(t, err, "trigger 0")
	_, err = httpapi.ParseTriggersJSON([]byte(`[] []`))
	require.ErrorContains(t, err, "unexpected data")
}

// TestTriggerRefusesCredentialHeaders checks that a trigger cannot copy the
// caller's credentials into params, where a read token sees them, unless it
// says allowCredentialHeaders: at New, in the command-line form and in JSON.
func TestTriggerRefusesCredentialHeaders(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	for _, header := range []string{
		"Authorization", "authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
		"X-Api-Key", "X-Auth-Token", "X-Amz-Security-Token", "X-Session-Id", "X-Client-Secret",
	} {
		tr := httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"who": "header." + header}}
		_, err := httpapi.New(&httpapi.Config{Client: h.Client, Triggers: []httpapi.Trigger{tr}})
		require.ErrorContains(t, err, `source "header.`+header+`" copies a credential header`, header)
		require.ErrorContains(t, err, `"allowCredentialHeaders": true`, header)
		_, err = httpapi.ParseTrigger("/hooks/x=greet,who=header." + header)
		require.ErrorContains(t, err, "credential header", header)
		doc, err := json.Marshal([]httpapi.Trigger{tr})
		require.NoError(t, err)
		_, err = httpapi.ParseTriggersJSON(doc)
		require.ErrorContains(t, err, "credential header", header)

		tr.AllowCredentialHeaders = true
		_, err = httpapi.New(&httpapi.Config{Client: h.Client, Triggers: []httpapi.Trigger{tr}})
		require.NoError(t, err, header)
	}
	// Ordinary headers stay allowed.
	for _, header := range []string{"X-Source", "X-Request-Id", "X-Idempotency-Key", "X-Hub-Signature-256", "User-Agent", "Content-Type"} {
		_, err := httpapi.ParseTrigger("/hooks/x=greet,v=header." + header)
		require.NoError(t, err, header)
	}

	// Opted in, in either form, the header is copied.
	got, err := httpapi.ParseTrigger("/hooks/x=greet,who=header.Authorization,allowCredentialHeaders")
	require.NoError(t, err)
	require.Equal(t, httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"who": "header.Authorization"}, AllowCredentialHeaders: true}, got)
	list, err := httpapi.ParseTriggersJSON([]byte(`[{"path":"/hooks/x","workflow":"greet","params":{"who":"header.Cookie"},"allowCredentialHeaders":true}]`))
	require.NoError(t, err)
	require.True(t, list[0].AllowCredentialHeaders)

	b := setup(t, "", withTriggers(got))
	inst := b.triggered(t, b.call(t, "POST", "/hooks/x", "", "Authorization: Bearer passed-on"))
	require.JSONEq(t, `{"who":"Bearer passed-on"}`, string(inst.Params))
}

// TestTriggerRefusesCredentialQuery checks that a trigger cannot copy a
// credential passed in the query string (?token=, ?access_token=,
// ?api_key=, …) into params either, unless it says allowCredentialHeaders.
func TestTriggerRefusesCredentialQuery(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	for _, name := range []string{
		"token", "access_token", "Access-Token", "id_token", "api_key", "apikey", "apiKey", "x-api-key",
		"password", "passwd", "client_secret", "auth", "session_id", "credentials",
	} {
		tr := httpapi.Trigger{Path: "/hooks/x", Workflow: "greet", Params: map[string]string{"who": "query." + name}}
		_, err := httpapi.New(&httpapi.Config{Client: h.Client, Triggers: []httpapi.Trigger{tr}})
		require.ErrorContains(t, err, `source "query.`+name+`" copies a credential query parameter`, name)
		require.ErrorContains(t, err, `"allowCredentialHeaders": true`, name)
		_, err = httpapi.ParseTrigger("/hooks/x=greet,who=query." + name)
		require.ErrorContains(t, err, "credential query parameter", name)
		doc, err := json.Marshal([]httpapi.Trigger{tr})
		require.NoError(t, err)
		_, err = httpapi.ParseTriggersJSON(doc)
		require.ErrorContains(t, err, "credential query parameter", name)

		tr.AllowCredentialHeaders = true
		_, err = httpapi.New(&httpapi.Config{Client: h.Client, Triggers: []httpapi.Trigger{tr}})
		require.NoError(t, err, name)
	}
	// Ordinary parameters stay allowed.
	for _, name := range []string{"page", "id", "source", "event", "key", "signature", "request_id"} {
		_, err := httpapi.ParseTrigger("/hooks/x=greet,v=query." + name)
		require.NoError(t, err, name)
	}

	// Opted in, the parameter is copied.
	got, err := httpapi.ParseTrigger("/hooks/x=greet,who=query.access_token,page=query.page,allowCredentialHeaders")
	require.NoError(t, err)
	b := setup(t, "", withTriggers(got))
	inst := b.triggered(t, b.call(t, "POST", "/hooks/x?access_token=passed-on&page=2", ""))
	require.JSONEq(t, `{"who":"passed-on","page":"2"}`, string(inst.Params))
}
