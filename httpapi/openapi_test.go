package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// exchange is one request and its answer as the validator saw them.
type exchange struct {
	method, path string // the request's
	// route is the document's operation ("GET /api/workflows"), "" when
	// the request matches none.
	route  string
	status int
	body   []byte
	// reqErr and respErr are what the document says against the request
	// and the answer.
	reqErr, respErr error
}

// validator is an http.RoundTripper that checks every request and answer
// against an OpenAPI document: the typed client and the raw calls of the
// conformance test go through it.
type validator struct {
	doc    *openapi3.T
	router routers.Router
	base   http.RoundTripper

	mu   sync.Mutex
	log  []*exchange
	last *exchange
}

// strictSchemas makes every object schema of the document's components
// refuse properties it does not name, so an answer with an undocumented
// field fails the test (the published document leaves them open, for
// clients of older versions).
func strictSchemas(doc *openapi3.T) {
	for _, ref := range doc.Components.Schemas {
		s := ref.Value
		if s.Type.Is("object") && len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			no := false
			s.AdditionalProperties.Has = &no
		}
	}
}

// nullableAny makes the schemas of any JSON value (JSONValue, the empty
// schema, and the references to it) take null in kin-openapi too, by
// listing every JSON type in the validator's copy of the document: for a
// schema that holds references and no keyword of JSON Schema 2020,
// kin-openapi falls back to its older validator, which then takes null
// only for a schema whose type includes "null".
func nullableAny(doc *openapi3.T) {
	anyType := func(s *openapi3.Schema) {
		s.Type = &openapi3.Types{"object", "array", "string", "number", "boolean", "null"}
	}
	seen := map[*openapi3.Schema]bool{}
	var walk func(ref *openapi3.SchemaRef)
	walk = func(ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if strings.HasSuffix(ref.Ref, "/JSONValue") {
			anyType(s)
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
			for _, r := range list {
				walk(r)
			}
		}
	}
	for name, ref := range doc.Components.Schemas {
		if name == "JSONValue" {
			anyType(ref.Value)
		}
		walk(ref)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, p := range op.Parameters {
				walk(p.Value.Schema)
			}
			if op.RequestBody != nil {
				for _, mt := range op.RequestBody.Value.Content {
					walk(mt.Schema)
				}
			}
			for _, r := range op.Responses.Map() {
				for _, mt := range r.Value.Content {
					walk(mt.Schema)
				}
			}
		}
	}
}

func newValidator(t *testing.T, docJSON []byte, base http.RoundTripper) *validator {
	t.Helper()
	doc := loadOpenAPI(t, docJSON)
	require.NoError(t, doc.Validate(t.Context()))
	strictSchemas(doc)
	nullableAny(doc)
	router, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return &validator{doc: doc, router: router, base: base}
}

var validationOptions = &openapi3filter.Options{
	MultiError:              true,
	IncludeResponseStatus:   true,
	SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()},
	// The document asks for a bearer token: a request must carry one
	// (the scopes are checked against the server's routes apart).
	AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
			return errors.New("no bearer token")
		}
		return nil
	},
}

// RoundTrip sends the request and validates it and its answer.
func (v *validator) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	ex := &exchange{method: req.Method, path: req.URL.Path}
	var in *openapi3filter.RequestValidationInput
	route, params, err := v.router.FindRoute(req)
	if err == nil {
		ex.route = req.Method + " " + route.Path
		check := req.Clone(req.Context())
		check.Body = io.NopCloser(bytes.NewReader(reqBody))
		in = &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: validationOptions}
		ex.reqErr = openapi3filter.ValidateRequest(req.Context(), in)
	} else {
		ex.reqErr = fmt.Errorf("no operation of the document: %w", err)
	}
	resp, err := v.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	ex.status, ex.body = resp.StatusCode, body
	if in != nil {
		ex.respErr = openapi3filter.ValidateResponse(req.Context(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Body: io.NopCloser(bytes.NewReader(body)), Options: validationOptions,
		})
	} else {
		// No operation: the answer is still an error of the document.
		ex.respErr = v.validateError(resp, body)
	}
	v.mu.Lock()
	v.log = append(v.log, ex)
	v.last = ex
	v.mu.Unlock()
	return resp, nil
}

// validateError checks an answer against the ErrorResponse schema.
func (v *validator) validateError(resp *http.Response, body []byte) error {
	if resp.Header.Get("Content-Type") != "application/json" {
		return fmt.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return err
	}
	return v.doc.Components.Schemas["ErrorResponse"].Value.VisitJSON(doc, openapi3.EnableJSONSchema2020())
}

// take returns the exchanges since the last take.
func (v *validator) take() []*exchange {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.log
	v.log = nil
	return out
}

// conformance drives a server through the validator.
type conformance struct {
	t   *testing.T
	b   *testBundle
	v   *validator
	hc  *http.Client
	api *apiclient.Client
	// seen are the operations answered, by "METHOD /path" of the
	// document, with their statuses.
	seen map[string][]int
}

// check validates the exchanges since the last check: each request and
// answer matches the document, except requests the test sends to break it
// (badRequest: the document must refuse them too).
func (c *conformance) check(what string, badRequest bool) []*exchange {
	c.t.Helper()
	exs := c.v.take()
	require.NotEmpty(c.t, exs, what)
	for _, ex := range exs {
		desc := fmt.Sprintf("%s: %s %s → %d %s", what, ex.method, ex.path, ex.status, ex.body)
		if badRequest {
			require.Error(c.t, ex.reqErr, "the document takes a request the server refuses: %s", desc)
		} else {
			require.NoError(c.t, ex.reqErr, "request: %s", desc)
		}
		require.NoError(c.t, ex.respErr, "answer: %s", desc)
		if ex.route != "" {
			c.seen[ex.route] = append(c.seen[ex.route], ex.status)
		}
	}
	return exs
}

// ok runs a call of the typed client, which must succeed and conform.
func (c *conformance) ok(what string, call func() error) {
	c.t.Helper()
	require.NoError(c.t, call(), what)
	c.check(what, false)
}

// fails runs a call of the typed client, which must fail with code.
func (c *conformance) fails(what string, code apiclient.Code, call func() error) {
	c.t.Helper()
	err := call()
	var ae *apiclient.APIError
	require.ErrorAs(c.t, err, &ae, what)
	require.Equal(c.t, code, ae.Code, "%s: %v", what, err)
	c.check(what, false)
}

// refused runs a call of the typed client that breaks a rule of the
// document, which must refuse the request too: the server answers code.
func (c *conformance) refused(what string, code apiclient.Code, call func() error) {
	c.t.Helper()
	err := call()
	var ae *apiclient.APIError
	require.ErrorAs(c.t, err, &ae, what)
	require.Equal(c.t, code, ae.Code, "%s: %v", what, err)
	c.check(what, true)
}

// raw sends a request through the validator with the given bearer token
// ("" for none) and checks the answer's status (and code, for an error).
func (c *conformance) raw(what, token, method, path, body string, status int, code apiclient.Code, badRequest bool) *exchange {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.b.ctx, method, c.b.srv.URL+path, r)
	require.NoError(c.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	data, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(c.t, status, resp.StatusCode, "%s: %s", what, data)
	if code != "" {
		var e apiclient.ErrorResponse
		require.NoError(c.t, json.Unmarshal(data, &e), what)
		require.Equal(c.t, code, e.Error.Code, "%s: %s", what, data)
	}
	exs := c.check(what, badRequest)
	return exs[len(exs)-1]
}

// adminToken may do everything; the tokens "only-<scope>" and
// "not-<scope>" carry one scope and every other.
const adminToken = "secret-admin"

func conformanceTokens() []string {
	all := []httpapi.Action{httpapi.ActionRead, httpapi.ActionCreate, httpapi.ActionManage, httpapi.ActionEvents, httpapi.ActionFlows, httpapi.ActionSchedules, httpapi.ActionTick}
	specs := []string{"admin:" + adminToken + ":*,tick"}
	for _, a := range all {
		var others []string
		for _, o := range all {
			if o != a {
				others = append(others, string(o))
			}
		}
		specs = append(specs, fmt.Sprintf("only-%s:secret-only-%s:%s", a, a, a), fmt.Sprintf("not-%s:secret-not-%s:%s", a, a, strings.Join(others, ",")))
	}
	return specs
}

// TestOpenAPIConformance drives every route of a server with every
// optional part configured, on both backends, through a validator of its
// own document: each request (of the typed client and raw) and each answer
// must match the document, every route the server registers must be in the
// document with the scope it asks for and be answered with success at
// least once, and the document must hold no operation the server lacks.
func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		var notReady, tickDown atomic.Bool
		b := setupOn(t, backend, adminToken, withFlows(t, nil), withSchedules(t, nil), withTick, withTokens(conformanceTokens()...),
			withTriggers(
				httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"},
				httpapi.Trigger{Method: "PUT", Path: "/hooks/greet/:name", Workflow: "greet", Params: map[string]string{"name": "path.name"}},
			),
			func(c *httpapi.Config, _ *testharness.Harness) {
				c.Ready = func(context.Context) error {
					if notReady.Load() {
						return errors.New("the database is away")
					}
					return nil
				}
				tick := c.Tick
				c.Tick = func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
					if tickDown.Load() {
						return 0, fmt.Errorf("claiming tasks: %w: dial tcp 127.0.0.1:5432: connect: connection refused", db.ErrUnavailable)
					}
					return tick(ctx, maxInstances, maxSteps)
				}
			})
		served := b.call(t, http.MethodGet, "/api/openapi.json", "", "Authorization: Bearer "+adminToken)
		served.requireOK(t, http.StatusOK, nil)
		require.JSONEq(t, string(b.server.OpenAPI()), string(served.body))

		v := newValidator(t, served.body, b.srv.Client().Transport)
		hc := &http.Client{Transport: v}
		c := &conformance{t: t, b: b, v: v, hc: hc, api: apiclient.New(b.srv.URL, adminToken, hc), seen: map[string][]int{}}
		ctx, api := b.ctx, c.api

		// The document is the file's, with the triggers.
		fileDoc := loadOpenAPI(t, httpapi.OpenAPIDocument())
		for path, item := range v.doc.Paths.Map() {
			for method, op := range item.Operations() {
				if slices.Contains(op.Tags, "triggers") {
					continue
				}
				require.NotNil(t, fileDoc.Paths.Find(path), path)
				require.NotNil(t, fileDoc.Paths.Find(path).GetOperation(method), "%s %s", method, path)
			}
		}

		// Every registered route is an operation with the route's scope.
		// Operation ids are names in generated clients: letters, digits
		// and '_', each once.
		ops := map[string]*openapi3.Operation{}
		ids := map[string]bool{}
		for path, item := range v.doc.Paths.Map() {
			for method, op := range item.Operations() {
				ops[method+" "+path] = op
				require.Regexp(t, `^[A-Za-z0-9_]+$`, op.OperationID, "%s %s", method, path)
				require.False(t, ids[op.OperationID], op.OperationID)
				ids[op.OperationID] = true
			}
		}
		require.True(t, ids["trigger_PUT_hooks_greet_name"], "the id of a trigger")
		routes := documented(b.server.Routes(), "/api")
		for _, r := range routes {
			key := r.Method + " " + openAPIPathOf(r.Path)
			op := ops[key]
			require.NotNil(t, op, "the server has %s %s; the document does not", r.Method, r.Path)
			if r.Action == "" {
				require.NotNil(t, op.Security, key)
				require.Empty(t, *op.Security, "%s needs no credentials", key)
				continue
			}
			require.NotNil(t, op.Security, key)
			require.Equal(t, openapi3.SecurityRequirements{{"bearer": {string(r.Action)}}}, *op.Security, key)
		}
		require.Len(t, ops, len(routes), "the document has operations the server does not register")

		// Health and the document.
		c.ok("healthz", func() error { return api.Health(ctx) })
		c.ok("readyz", func() error { return api.Ready(ctx) })
		notReady.Store(true)
		c.fails("readyz, not ready", apiclient.CodeNotReady, func() error { return api.Ready(ctx) })
		notReady.Store(false)
		c.raw("openapi.json", adminToken, "GET", "/api/openapi.json", "", 200, "", false)
		c.ok("index", func() error { _, err := api.Index(ctx); return err })
		// The index with a trailing slash is left out of the document.
		slash := b.call(t, http.MethodGet, "/api/", "", "Authorization: Bearer "+adminToken)
		slash.requireOK(t, http.StatusOK, nil)
		require.Equal(t, b.call(t, http.MethodGet, "/api", "", "Authorization: Bearer "+adminToken).body, slash.body)

		// Workflows and instances.
		c.ok("workflows", func() error { _, err := api.Workflows(ctx); return err })
		c.ok("create", func() error {
			_, err := api.Create(ctx, "greet", dftype.CreateRequest{ID: "g-1", Params: json.RawMessage(`{"name":"ada"}`), Priority: 3})
			return err
		})
		c.ok("create, dedupe key", func() error {
			_, err := api.Create(ctx, "greet", dftype.CreateRequest{DedupeKey: "k-1"})
			return err
		})
		ex := c.raw("create, deduplicated", adminToken, "POST", "/api/workflows/greet/instances", `{"dedupeKey":"k-1"}`, 200, "", false)
		require.Contains(t, string(ex.body), `"deduplicated":true`)
		c.raw("create, no body", adminToken, "POST", "/api/workflows/greet/instances", "", 201, "", false)
		c.fails("create, exists", apiclient.CodeInstanceIDAlreadyExists, func() error {
			_, err := api.Create(ctx, "greet", dftype.CreateRequest{ID: "g-1"})
			return err
		})
		c.refused("create, bad id", apiclient.CodeInvalidInstanceID, func() error {
			_, err := api.Create(ctx, "greet", dftype.CreateRequest{ID: "no way"})
			return err
		})
		c.fails("create, unknown workflow", apiclient.CodeWorkflowNotFound, func() error {
			_, err := api.Create(ctx, "nope", dftype.CreateRequest{})
			return err
		})
		c.refused("create, bad priority", apiclient.CodeInvalidPriority, func() error {
			_, err := api.Create(ctx, "greet", dftype.CreateRequest{Priority: workflow.MaxPriority + 1})
			return err
		})
		c.raw("create, unknown field", adminToken, "POST", "/api/workflows/greet/instances", `{"bogus":1}`, 400, apiclient.CodeInvalidRequest, true)
		c.raw("create, wrong type", adminToken, "POST", "/api/workflows/greet/instances", `{"priority":"high"}`, 400, apiclient.CodeInvalidRequest, true)
		c.raw("create, not an object", adminToken, "POST", "/api/workflows/greet/instances", `[1]`, 400, apiclient.CodeInvalidRequest, true)
		c.raw("create, too deep", adminToken, "POST", "/api/workflows/greet/instances", `{"params":`+deepArray(workflow.MaxPayloadDepth+1)+`}`, 400, apiclient.CodePayloadTooDeep, false)
		c.raw("create, too large", adminToken, "POST", "/api/workflows/greet/instances", `{"params":"`+strings.Repeat("x", int(httpapi.DefaultMaxBodyBytes))+`"}`, 413, apiclient.CodePayloadTooLarge, false)
		c.ok("batch", func() error {
			_, err := api.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "g-2"}, {ID: "g-1"}, {Params: json.RawMessage(`{"name":"bob"}`)}})
			return err
		})
		c.raw("batch, empty", adminToken, "POST", "/api/workflows/greet/instances/batch", `{"instances":[]}`, 400, apiclient.CodeInvalidRequest, true)
		c.raw("batch, no body", adminToken, "POST", "/api/workflows/greet/instances/batch", "", 400, apiclient.CodeInvalidRequest, true)
		c.ok("list", func() error {
			_, err := api.List(ctx, client.ListParams{WorkflowName: "greet", Statuses: []dftype.InstanceStatus{dftype.StatusQueued}, PageSize: 2})
			return err
		})
		page, err := api.List(ctx, client.ListParams{WorkflowName: "greet", PageSize: 1})
		require.NoError(t, err)
		require.NotEmpty(t, page.NextCursor)
		c.ok("list, next page", func() error {
			_, err := api.List(ctx, client.ListParams{WorkflowName: "greet", PageSize: 1, Cursor: page.NextCursor})
			return err
		})
		c.ok("list every workflow", func() error {
			_, err := api.List(ctx, client.ListParams{Statuses: []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusComplete}, PageSize: 2})
			return err
		})
		allPage, err := api.List(ctx, client.ListParams{PageSize: 1})
		require.NoError(t, err)
		require.NotEmpty(t, allPage.NextCursor)
		c.ok("list every workflow, next page", func() error {
			_, err := api.List(ctx, client.ListParams{PageSize: 1, Cursor: allPage.NextCursor})
			return err
		})
		c.raw("list every workflow, unknown parameter", adminToken, "GET", "/api/instances?workflow=greet", "", 400, apiclient.CodeInvalidRequest, false)
		c.raw("list, two statuses", adminToken, "GET", "/api/workflows/greet/instances?status=queued&status=running", "", 200, "", false)
		c.raw("list, unknown parameter", adminToken, "GET", "/api/workflows/greet/instances?bogus=1", "", 400, apiclient.CodeInvalidRequest, false)
		c.raw("list, page size out of range", adminToken, "GET", "/api/workflows/greet/instances?pageSize=0", "", 400, apiclient.CodeInvalidRequest, true)
		c.fails("list, unknown workflow", apiclient.CodeWorkflowNotFound, func() error {
			_, err := api.List(ctx, client.ListParams{WorkflowName: "nope"})
			return err
		})
		c.ok("get", func() error { _, err := api.Get(ctx, "greet", "g-1"); return err })
		c.fails("get, unknown instance", apiclient.CodeInstanceNotFound, func() error { _, err := api.Get(ctx, "greet", "nobody"); return err })
		c.fails("get, unknown workflow", apiclient.CodeWorkflowNotFound, func() error { _, err := api.Get(ctx, "nope", "g-1"); return err })
		c.refused("get, bad id", apiclient.CodeInvalidInstanceID, func() error { _, err := api.Get(ctx, "greet", "no way"); return err })
		c.ok("create batch", func() error { _, err := api.Create(ctx, "greet", dftype.CreateRequest{ID: "batch"}); return err })
		c.ok("get batch", func() error { _, err := api.Get(ctx, "greet", "batch"); return err })
		b.h.RunUntilIdle()
		c.ok("get, complete", func() error { _, err := api.Get(ctx, "greet", "g-1"); return err })
		c.ok("history", func() error { _, err := api.History(ctx, "greet", "g-1", client.HistoryParams{}); return err })
		c.ok("history, a page", func() error {
			_, err := api.History(ctx, "greet", "g-1", client.HistoryParams{Run: 1, PageSize: 1})
			return err
		})
		c.fails("history, unknown instance", apiclient.CodeInstanceNotFound, func() error {
			_, err := api.History(ctx, "greet", "nobody", client.HistoryParams{})
			return err
		})

		// The lifecycle event log.
		c.ok("lifecycle events", func() error {
			_, err := api.ListLifecycleEvents(ctx, client.LifecycleListParams{WorkflowName: "greet", Types: []string{"instance.created", "instance.completed"}, PageSize: 1})
			return err
		})
		events, err := api.ListLifecycleEvents(ctx, client.LifecycleListParams{PageSize: 1})
		require.NoError(t, err)
		require.NotEmpty(t, events.NextCursor)
		c.ok("lifecycle events, next page", func() error {
			_, err := api.ListLifecycleEvents(ctx, client.LifecycleListParams{PageSize: 1, Cursor: events.NextCursor})
			return err
		})
		c.ok("instance lifecycle", func() error {
			_, err := api.InstanceLifecycle(ctx, "greet", "g-1", client.LifecycleListParams{Since: time.Unix(0, 0), Until: time.Now().Add(time.Hour)})
			return err
		})
		c.fails("instance lifecycle, unknown instance", apiclient.CodeInstanceNotFound, func() error {
			_, err := api.InstanceLifecycle(ctx, "greet", "nobody", client.LifecycleListParams{})
			return err
		})
		c.fails("instance lifecycle, unknown workflow", apiclient.CodeWorkflowNotFound, func() error {
			_, err := api.InstanceLifecycle(ctx, "nope", "g-1", client.LifecycleListParams{})
			return err
		})
		c.raw("instance lifecycle, bad id", adminToken, "GET", "/api/workflows/greet/instances/no%20way/lifecycle", "", 400, apiclient.CodeInvalidInstanceID, true)
		for _, bad := range []struct{ what, query string }{
			{"unknown type", "type=instance.exploded"},
			{"bad since", "since=yesterday"},
			{"bad until", "until=2030-13-01T00:00:00Z"},
			{"inverted range", "since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z"},
			{"bad cursor", "cursor=%21%21"},
			{"cursor not a number", "cursor=" + base64.RawURLEncoding.EncodeToString([]byte("x1"))},
			{"instance without workflow", "instance=g-1"},
			{"worker id too long", "worker=" + strings.Repeat("w", 300)},
			{"unknown parameter", "status=complete"},
			{"page size out of range", "pageSize=0"},
		} {
			c.raw("lifecycle events, "+bad.what, adminToken, "GET", "/api/events?"+bad.query, "", 400, apiclient.CodeInvalidRequest,
				bad.what == "unknown type" || bad.what == "bad since" || bad.what == "bad until" || bad.what == "page size out of range")
		}
		c.raw("lifecycle events, bad instance id", adminToken, "GET", "/api/events?workflow=greet&instance=no%20way", "", 400, apiclient.CodeInvalidInstanceID, true)
		for _, bad := range []struct{ what, query string }{
			{"unknown type", "type=instance.exploded"},
			{"bad after", "after=x"},
			{"negative after", "after=-1"},
			{"unknown parameter", "cursor=abc"},
		} {
			c.raw("lifecycle stream, "+bad.what, adminToken, "GET", "/api/events/stream?"+bad.query, "", 400, apiclient.CodeInvalidRequest,
				bad.what == "unknown type" || bad.what == "bad after" || bad.what == "negative after")
		}
		// The stream never ends, so the validating transport (which reads
		// the whole answer) cannot take it: it is read directly, and
		// counted as answered.
		first := readLifecycleStream(t, b.srv.URL+"/api/events/stream?workflow=greet&after=0", adminToken)
		require.Equal(t, "greet", first.WorkflowName)
		c.seen["GET /api/events/stream"] = append(c.seen["GET /api/events/stream"], http.StatusOK)

		// Life cycle and events on "approve", which waits for an event.
		for _, id := range []string{"a-1", "a-2", "a-3"} {
			_, err := api.Create(ctx, "approve", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		c.v.take()
		b.h.RunUntilIdle()
		c.ok("get, waiting: its pending step", func() error {
			info, err := api.Get(ctx, "approve", "a-1")
			if err == nil && (len(info.Pending) != 1 || info.Pending[0].Kind != dftype.PendingEvent) {
				err = fmt.Errorf("pending: %+v", info.Pending)
			}
			return err
		})
		c.ok("event", func() error { return api.SendEvent(ctx, "approve", "a-1", "approval", json.RawMessage(`{"by":"ada"}`)) })
		c.refused("event, bad type", apiclient.CodeInvalidEventType, func() error { return api.SendEvent(ctx, "approve", "a-1", "no way", nil) })
		c.raw("event, no type", adminToken, "POST", "/api/workflows/approve/instances/a-1/events", `{"payload":1}`, 400, "", true)
		c.fails("event, unknown instance", apiclient.CodeInstanceNotFound, func() error { return api.SendEvent(ctx, "approve", "nobody", "approval", nil) })
		c.ok("pause", func() error { _, err := api.Pause(ctx, "approve", "a-2"); return err })
		c.ok("resume", func() error { _, err := api.Resume(ctx, "approve", "a-2"); return err })
		c.ok("compensate", func() error { _, err := api.Compensate(ctx, "approve", "a-2"); return err })
		c.ok("terminate", func() error { _, err := api.Terminate(ctx, "approve", "a-3"); return err })
		c.fails("terminate, terminal", apiclient.CodeInstanceTerminal, func() error { _, err := api.Terminate(ctx, "approve", "a-3"); return err })
		c.fails("event, terminal", apiclient.CodeInstanceTerminal, func() error { return api.SendEvent(ctx, "approve", "a-3", "approval", nil) })
		c.fails("pause, terminal", apiclient.CodeInstanceTerminal, func() error { _, err := api.Pause(ctx, "approve", "a-3"); return err })
		c.fails("compensate, terminal", apiclient.CodeInstanceTerminal, func() error { _, err := api.Compensate(ctx, "approve", "a-3"); return err })
		c.ok("resume, terminal: answered unchanged", func() error {
			info, err := api.Resume(ctx, "approve", "a-3")
			if err == nil && info.Status != dftype.StatusTerminated {
				err = fmt.Errorf("status %s", info.Status)
			}
			return err
		})
		c.ok("restart", func() error { _, err := api.Restart(ctx, "approve", "a-3"); return err })
		c.raw("pause, a body", adminToken, "POST", "/api/workflows/approve/instances/a-3/pause", `{"now":true}`, 400, apiclient.CodeInvalidRequest, true)
		c.fails("pause, unknown instance", apiclient.CodeInstanceNotFound, func() error { _, err := api.Pause(ctx, "approve", "nobody"); return err })

		// The tick.
		c.ok("tick", func() error { _, err := api.Tick(ctx, apiclient.TickRequest{MaxInstances: 10}); return err })
		c.raw("tick, no body", adminToken, "POST", "/api/_runner/tick", "", 200, "", false)
		c.raw("tick, out of range", adminToken, "POST", "/api/_runner/tick", `{"maxInstances":-1}`, 400, apiclient.CodeInvalidRequest, true)
		tickDown.Store(true)
		c.fails("tick, database unavailable", apiclient.CodeDatabaseUnavailable, func() error {
			_, err := api.Tick(ctx, apiclient.TickRequest{})
			return err
		})
		tickDown.Store(false)

		// Schedules.
		c.ok("create schedule", func() error {
			_, err := api.CreateSchedule(ctx, schedule.CreateRequest{ID: "s-1", WorkflowName: "greet", Cron: "@daily", Params: json.RawMessage(`{"name":"cron"}`)})
			return err
		})
		c.fails("create schedule, exists", apiclient.CodeScheduleAlreadyExists, func() error {
			_, err := api.CreateSchedule(ctx, schedule.CreateRequest{ID: "s-1", WorkflowName: "greet", Cron: "@daily"})
			return err
		})
		c.fails("create schedule, unknown workflow", apiclient.CodeWorkflowNotFound, func() error {
			_, err := api.CreateSchedule(ctx, schedule.CreateRequest{ID: "s-2", WorkflowName: "nope", Cron: "@daily"})
			return err
		})
		c.raw("create schedule, no cron", adminToken, "POST", "/api/schedules", `{"id":"s-3","workflowName":"greet"}`, 400, "", true)
		c.ok("list schedules", func() error { _, err := api.ListSchedules(ctx, schedule.ListParams{WorkflowName: "greet"}); return err })
		c.ok("get schedule", func() error { _, err := api.GetSchedule(ctx, "s-1"); return err })
		cron := "0 4 * * *"
		c.ok("update schedule", func() error {
			_, err := api.UpdateSchedule(ctx, "s-1", schedule.UpdateRequest{Cron: &cron})
			return err
		})
		c.ok("disable schedule", func() error { _, err := api.DisableSchedule(ctx, "s-1"); return err })
		c.ok("enable schedule", func() error { _, err := api.EnableSchedule(ctx, "s-1"); return err })
		c.ok("delete schedule", func() error { return api.DeleteSchedule(ctx, "s-1") })
		c.fails("get schedule, deleted", apiclient.CodeScheduleNotFound, func() error { _, err := api.GetSchedule(ctx, "s-1"); return err })
		c.fails("delete schedule, deleted", apiclient.CodeScheduleNotFound, func() error { return api.DeleteSchedule(ctx, "s-1") })

		// Queues.
		maxRunning := 2
		c.ok("set queue", func() error {
			_, err := api.SetQueueLimits(ctx, "emails", apiclient.QueueLimits{MaxRunning: &maxRunning, Rate: &apiclient.QueueRate{Limit: 5, Period: dftype.Duration(60e9)}})
			return err
		})
		c.raw("set queue, milliseconds", adminToken, "PUT", "/api/queues/emails", `{"rate":{"limit":5,"period":60000}}`, 200, "", false)
		c.raw("set queue, zero", adminToken, "PUT", "/api/queues/emails", `{"maxRunning":0}`, 400, apiclient.CodeInvalidLimit, true)
		c.ok("list queues", func() error { _, err := api.ListQueues(ctx); return err })
		c.ok("get queue", func() error { _, err := api.GetQueue(ctx, "emails"); return err })
		c.fails("get queue, none", apiclient.CodeQueueNotFound, func() error { _, err := api.GetQueue(ctx, "nothing"); return err })

		// Flows.
		c.ok("apply flow", func() error { _, err := api.ApplyFlow(ctx, []byte(doubler("1.0.0"))); return err })
		c.raw("apply flow, again", adminToken, "POST", "/api/flows", doubler("1.0.0"), 200, "", false)
		c.raw("apply flow, conflict", adminToken, "POST", "/api/flows", strings.Replace(doubler("1.0.0"), "Doubler", "Other", 1), 409, apiclient.CodeFlowVersionConflict, false)
		c.raw("apply flow, invalid", adminToken, "POST", "/api/flows", `{"id":"bad"}`, 400, apiclient.CodeInvalidFlow, true)
		c.raw("apply flow, invalid in meaning", adminToken, "POST", "/api/flows", strings.Replace(doubler("1.0.1"), `"initialStepId": "double"`, `"initialStepId": "nowhere"`, 1), 400, apiclient.CodeInvalidFlow, false)
		c.ok("list flows", func() error { _, err := api.ListFlows(ctx, apiclient.FlowListParams{}); return err })
		c.ok("get flow", func() error { _, err := api.GetFlow(ctx, "doubler", ""); return err })
		c.ok("flow versions", func() error { _, err := api.FlowVersions(ctx, "doubler"); return err })
		c.ok("get flow version", func() error { _, err := api.GetFlow(ctx, "doubler", "1.0.0"); return err })
		c.fails("get flow, unknown", apiclient.CodeFlowNotFound, func() error { _, err := api.GetFlow(ctx, "nope", ""); return err })
		c.ok("workflows with a flow", func() error { _, err := api.Workflows(ctx); return err })

		// Workers.
		registerWorker(t, b, "w1", "default")
		registerWorker(t, b, "w2", "emails")
		_, err = b.h.Store.WorkerDeregister(ctx, &db.WorkerDeregisterParams{ID: "w2", Now: b.h.Now()})
		require.NoError(t, err)
		c.ok("list workers", func() error { _, err := api.ListWorkers(ctx, apiclient.WorkerListParams{PageSize: 1}); return err })
		c.raw("list workers, limit", adminToken, "GET", "/api/workers?limit=1&status=online", "", 200, "", false)
		c.ok("get worker", func() error { _, err := api.GetWorker(ctx, "w1"); return err })
		c.ok("drain worker", func() error { _, err := api.DrainWorker(ctx, "w1"); return err })
		c.fails("drain worker, offline", apiclient.CodeWorkerOffline, func() error { _, err := api.DrainWorker(ctx, "w2"); return err })
		c.fails("get worker, unknown", apiclient.CodeWorkerNotFound, func() error { _, err := api.GetWorker(ctx, "nobody"); return err })

		// Triggers.
		c.raw("trigger", adminToken, "POST", "/hooks/greet", `{"name":"hook"}`, 202, "", false)
		c.raw("trigger, path parameter", adminToken, "PUT", "/hooks/greet/ada", "", 202, "", false)

		// Unknown routes and methods.
		c.raw("unknown route", adminToken, "GET", "/api/nothing", "", 404, apiclient.CodeNotFound, true)
		c.raw("unknown method", adminToken, "DELETE", "/api/workflows", "", 405, apiclient.CodeMethodNotAllowed, true)

		// Credentials, on every route: none is 401, a token without the
		// route's scope 403, before anything is read.
		for _, r := range routes {
			if r.Action == "" {
				continue
			}
			path := concretePath(r.Path)
			what := r.Method + " " + path
			// The body is the operation's example, which the document
			// takes: only the credentials are wrong.
			body := ""
			if rb := ops[r.Method+" "+openAPIPathOf(r.Path)].RequestBody; rb != nil && rb.Value.Required {
				ex := rb.Value.Content.Get("application/json").Example
				require.NotNil(t, ex, "%s needs a body: give it an example", what)
				data, err := json.Marshal(ex)
				require.NoError(t, err)
				body = string(data)
			}
			c.raw(what+" without a token", "", r.Method, path, body, 401, apiclient.CodeUnauthorized, true)
			c.raw(what+" without the scope", "secret-not-"+string(r.Action), r.Method, path, body, 403, apiclient.CodeForbidden, false)
		}

		// Every route answered with success at least once.
		var missing []string
		for _, r := range routes {
			key := r.Method + " " + openAPIPathOf(r.Path)
			if !slices.ContainsFunc(c.seen[key], func(s int) bool { return s < 300 }) {
				missing = append(missing, key)
			}
		}
		sort.Strings(missing)
		require.Empty(t, missing, "routes the test did not answer with success")
	})
}

// TestOpenAPIServed checks the document a server with another prefix and
// no tokens serves: loopback reads it without a token, its paths carry the
// prefix, it lists only the routes the server has and keeps only the
// schemas, parameters and tags they use, and it asks for no credentials.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) { c.Prefix = "/v1" })
	r := b.call(t, http.MethodGet, "/v1/openapi.json", "")
	r.requireOK(t, http.StatusOK, nil)
	doc := loadOpenAPI(t, r.body)
	require.NoError(t, doc.Validate(t.Context()))
	require.NotNil(t, doc.Paths.Value("/v1/workflows/{name}/instances"))
	require.NotNil(t, doc.Paths.Value("/v1"), "the index")
	require.NotNil(t, doc.Paths.Value("/healthz"))
	require.Nil(t, doc.Paths.Value("/api/workflows"))
	require.Nil(t, doc.Paths.Value("/v1/schedules"), "no scheduler, no schedule routes")
	require.Nil(t, doc.Paths.Value("/v1/_runner/tick"), "no tick function, no tick route")
	n := 0
	for path, item := range doc.Paths.Map() {
		require.False(t, strings.HasSuffix(path, "/") && path != "/", path)
		for method, op := range item.Operations() {
			n++
			require.NotNil(t, op.Security, "%s %s", method, path)
			require.Empty(t, *op.Security, "%s %s: no tokens, no security requirement", method, path)
			require.Nil(t, op.Responses.Status(http.StatusUnauthorized), "%s %s: no tokens, no 401", method, path)
		}
	}
	require.Equal(t, len(documented(b.server.Routes(), "/v1")), n)
	require.Empty(t, doc.Components.SecuritySchemes)
	require.Contains(t, doc.Info.Description, "has no tokens")
	for _, name := range []string{"TickRequest", "TickResult", "Schedule", "CreateScheduleRequest", "FlowDefinition", "FlowInfo", "TriggerResponse"} {
		require.NotContains(t, doc.Components.Schemas, name, "used only by routes the server does not have")
	}
	require.NotContains(t, doc.Components.Responses, "TriggerError")
	require.NotContains(t, doc.Components.Headers, "WWW-Authenticate")
	require.Contains(t, doc.Components.Schemas, "Instance")
	var tags []string
	for _, tag := range doc.Tags {
		tags = append(tags, tag.Name)
	}
	require.Equal(t, []string{"health", "workflows", "instances", "queues", "workers", "lifecycle"}, tags)

	// A request without credentials is what the document describes.
	v := newValidator(t, r.body, b.srv.Client().Transport)
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+"/v1/workflows/greet/instances", strings.NewReader(`{"id":"x"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: v}).Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.NoError(t, v.last.reqErr)
	require.NoError(t, v.last.respErr)

	b.call(t, http.MethodGet, "/v1/openapi.json", "", "Host: example.com").requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
	b.call(t, http.MethodGet, "/v1/openapi.json?x=1", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, `"x"`)
}

// TestOpenAPIServedAtTheRoot checks the document of a server whose API is
// at the root: the index is "/".
func TestOpenAPIServedAtTheRoot(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) { c.Prefix = "/" })
	doc := loadOpenAPI(t, b.server.OpenAPI())
	require.NoError(t, doc.Validate(t.Context()))
	require.NotNil(t, doc.Paths.Value("/"), "the index")
	require.NotNil(t, doc.Paths.Value("/workflows/{name}/instances"))
	n := 0
	for _, item := range doc.Paths.Map() {
		n += len(item.Operations())
	}
	require.Equal(t, len(documented(b.server.Routes(), "/")), n)
}

// TestOpenAPIServedLimits checks that the bounds of the served document
// are the server's Config.Limits, and that a validator of it refuses what
// the server refuses past them.
func TestOpenAPIServedLimits(t *testing.T) {
	t.Parallel()
	limits := httpapi.Limits{MaxBatchSize: 2, MaxIDLength: 10, MaxEventTypeLength: 12, MaxWorkflowNameLength: 20, MaxPageSize: 50}
	b := setup(t, adminToken, withTokens(conformanceTokens()...), func(c *httpapi.Config, _ *testharness.Harness) { c.Limits = limits })
	doc := loadOpenAPI(t, b.server.OpenAPI())
	require.NoError(t, doc.Validate(t.Context()))
	schemas, params := doc.Components.Schemas, doc.Components.Parameters
	require.Equal(t, uint64(10), *schemas["InstanceId"].Value.MaxLength)
	require.Equal(t, uint64(12), *schemas["EventType"].Value.MaxLength)
	require.Equal(t, uint64(2), *schemas["CreateBatchRequest"].Value.Properties["instances"].Value.MaxItems)
	require.Equal(t, uint64(20), *params["workflowName"].Value.Schema.Value.MaxLength)
	require.Equal(t, uint64(20), *params["lifecycleWorkflow"].Value.Schema.Value.MaxLength)
	require.Equal(t, 50.0, *params["pageSize"].Value.Schema.Value.Max)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value.In == "query" && (p.Value.Name == "pageSize" || p.Value.Name == "limit") {
					require.Equal(t, 50.0, *p.Value.Schema.Value.Max, "%s %s %s", method, path, p.Value.Name)
				}
			}
		}
	}
	// The file keeps the engine's limits.
	file := loadOpenAPI(t, httpapi.OpenAPIDocument())
	require.Equal(t, uint64(workflow.MaxIDLength), *file.Components.Schemas["InstanceId"].Value.MaxLength)

	v := newValidator(t, b.server.OpenAPI(), b.srv.Client().Transport)
	hc := &http.Client{Transport: v}
	c := &conformance{t: t, b: b, v: v, hc: hc, api: apiclient.New(b.srv.URL, adminToken, hc), seen: map[string][]int{}}
	c.raw("id at the limit", adminToken, "POST", "/api/workflows/greet/instances", `{"id":"abcdefghij"}`, 201, "", false)
	c.raw("id past the limit", adminToken, "POST", "/api/workflows/greet/instances", `{"id":"abcdefghijk"}`, 400, apiclient.CodeInvalidInstanceID, true)
	c.raw("batch past the limit", adminToken, "POST", "/api/workflows/greet/instances/batch", `{"instances":[{},{},{}]}`, 400, apiclient.CodeInvalidRequest, true)
	c.raw("page past the limit", adminToken, "GET", "/api/instances?pageSize=51", "", 400, apiclient.CodeInvalidRequest, true)
}

// TestOpenAPIIdentPattern checks identPattern, the pattern of the
// identifiers in the document, against the checks of the engine.
func TestOpenAPIIdentPattern(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(identPattern)
	for _, id := range []string{"a", "A-1", "_x", "0", "a_b-c", "-a", "a b", "a.b", "é", "a/b", "", "a\n"} {
		want := workflow.ValidateInstanceID(id) == nil
		require.Equal(t, want, re.MatchString(id), "%q", id)
		require.Equal(t, want, workflow.ValidateEventType(id) == nil, "%q", id)
		require.Equal(t, want, workflow.ValidateQueueName(id) == nil, "%q", id)
		require.Equal(t, want, workflow.ValidateNamespace(id) == nil, "%q", id)
		require.Equal(t, want, workflow.ValidateWorkflowName(id) == nil, "%q", id)
	}
}

// documented are the routes of a server with prefix that its document
// has: all but the index with a trailing slash (<prefix>/), which the
// document leaves out (linters refuse a path that ends in a slash).
func documented(routes []httpapi.Route, prefix string) []httpapi.Route {
	return slices.DeleteFunc(routes, func(r httpapi.Route) bool { return prefix != "/" && r.Path == prefix+"/" })
}

// openAPIPathOf turns echo's path syntax (/a/:id) into OpenAPI's (/a/{id}).
func openAPIPathOf(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// concretePath fills the path parameters of an echo route with "x".
func concretePath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") {
			segs[i] = "x"
		}
	}
	return strings.Join(segs, "/")
}

// readLifecycleStream opens the lifecycle stream at url and returns its
// first event, checking the stream's framing.
func readLifecycleStream(t *testing.T, url, token string) *dftype.LifecycleEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	var id string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			var e dftype.LifecycleEvent
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e))
			require.Equal(t, strconv.FormatInt(e.ID, 10), id, "the message id is the event's")
			return &e
		}
	}
	t.Fatalf("the stream ended without an event: %v", sc.Err())
	return nil
}
