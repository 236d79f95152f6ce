package httpapi_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestErrorCodes sends requests that fail in every way the API knows and
// checks status, code and what the message says.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "exists"})
	require.NoError(t, err)
	_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "done"})
	require.NoError(t, err)
	_, err = b.api.Terminate(b.ctx, "greet", "done")
	require.NoError(t, err)

	const inst = "/api/workflows/greet/instances"
	for _, tc := range []struct {
		name           string
		method, path   string
		body           string
		status         int
		code           apiclient.Code
		messageHas     []string
		messageHasNone []string
	}{
		{"unknown workflow", "POST", "/api/workflows/nope/instances", `{}`, 404, apiclient.CodeWorkflowNotFound, []string{`"nope"`}, nil},
		{"unknown workflow get", "GET", "/api/workflows/nope/instances/x", ``, 404, apiclient.CodeWorkflowNotFound, nil, nil},
		{"invalid workflow name", "GET", "/api/workflows/-bad/instances", ``, 400, apiclient.CodeInvalidRequest, []string{"invalid workflow name"}, nil},
		{"unknown instance", "GET", inst + "/missing", ``, 404, apiclient.CodeInstanceNotFound, []string{"greet/missing"}, nil},
		{"unknown instance pause", "POST", inst + "/missing/pause", ``, 404, apiclient.CodeInstanceNotFound, nil, nil},
		{"existing id", "POST", inst, `{"id":"exists"}`, 409, apiclient.CodeInstanceIDAlreadyExists, []string{"exists"}, nil},
		{"terminal terminate", "POST", inst + "/done/terminate", ``, 409, apiclient.CodeInstanceTerminal, nil, nil},
		{"terminal pause", "POST", inst + "/done/pause", ``, 409, apiclient.CodeInstanceTerminal, nil, nil},
		{"terminal event", "POST", inst + "/done/events", `{"type":"x"}`, 409, apiclient.CodeInstanceTerminal, nil, nil},
		{"invalid id in body", "POST", inst, `{"id":"no spaces"}`, 400, apiclient.CodeInvalidInstanceID, []string{`"no spaces"`}, nil},
		{"invalid id starting with dash", "POST", inst, `{"id":"-x"}`, 400, apiclient.CodeInvalidInstanceID, nil, nil},
		{"id too long", "POST", inst, `{"id":"` + strings.Repeat("a", 101) + `"}`, 400, apiclient.CodeInvalidInstanceID, []string{"100"}, nil},
		{"invalid id in path", "GET", inst + "/a%20b", ``, 400, apiclient.CodeInvalidInstanceID, []string{`"a b"`}, nil},
		{"escaped slash in path", "GET", inst + "/a%2Fb", ``, 400, apiclient.CodeInvalidInstanceID, nil, nil},
		{"invalid event type", "POST", inst + "/exists/events", `{"type":"a.b"}`, 400, apiclient.CodeInvalidEventType, []string{`"a.b"`}, nil},
		{"malformed JSON", "POST", inst, `{"id":`, 400, apiclient.CodeInvalidRequest, []string{"malformed JSON"}, nil},
		{"malformed JSON syntax", "POST", inst, `{"id" "x"}`, 400, apiclient.CodeInvalidRequest, []string{"malformed JSON at byte"}, nil},
		{"not JSON", "POST", inst, `id=x`, 400, apiclient.CodeInvalidRequest, []string{"not valid JSON"}, nil},
		{"array body", "POST", inst, `[{"id":"x"}]`, 400, apiclient.CodeInvalidRequest, []string{"JSON object"}, nil},
		{"trailing garbage", "POST", inst, `{"id":"t-1"} {"id":"t-2"}`, 400, apiclient.CodeInvalidRequest, []string{"after the JSON object"}, nil},
		{"trailing junk", "POST", inst, `{"id":"t-1"}x`, 400, apiclient.CodeInvalidRequest, []string{"after the JSON object"}, nil},
		{"wrong type id", "POST", inst, `{"id":42}`, 400, apiclient.CodeInvalidRequest, []string{`field "id" must be a string`, "number"}, nil},
		{"wrong type instances", "POST", inst + "/batch", `{"instances":{"id":"x"}}`, 400, apiclient.CodeInvalidRequest, []string{`field "instances" must be an array`}, nil},
		{"unknown field in an event", "POST", inst + "/exists/events", `{"type":"x","payload":1,"extra":true}`, 400, apiclient.CodeInvalidRequest, []string{`unknown field "extra"`}, nil},
		{"unknown field", "POST", inst, `{"id":"u-1","param":{}}`, 400, apiclient.CodeInvalidRequest, []string{`unknown field "param"`}, nil},
		{"wrong type in a batch item", "POST", inst + "/batch", `{"instances":[{"id":"x","priority":"high"}]}`, 400, apiclient.CodeInvalidRequest, []string{`field "instances.priority" must be an integer`}, nil},
		{"unknown field in a batch item", "POST", inst + "/batch", `{"instances":[{"id":"x","prio":1}]}`, 400, apiclient.CodeInvalidRequest, []string{`unknown field "prio"`}, nil},
		{"unknown query parameter", "GET", inst + "?limit=5", ``, 400, apiclient.CodeInvalidRequest, []string{`unknown query parameter "limit"`, "allowed: status, pageSize, cursor, queue"}, nil},
		{"unknown query parameter of a get", "GET", inst + "/exists?verbose=1", ``, 400, apiclient.CodeInvalidRequest, []string{`unknown query parameter "verbose"`}, nil},
		{"invalid params JSON is caught by the decoder", "POST", inst, `{"params":{"a":}}`, 400, apiclient.CodeInvalidRequest, []string{"malformed JSON"}, nil},
		{"unknown route", "GET", "/api/nothing", ``, 404, apiclient.CodeNotFound, []string{"GET /api/nothing"}, nil},
		{"unknown route outside prefix", "GET", "/", ``, 404, apiclient.CodeNotFound, nil, nil},
		{"unknown action", "POST", inst + "/exists/explode", ``, 404, apiclient.CodeNotFound, nil, nil},
		{"tick is off", "POST", "/api/_runner/tick", `{}`, 404, apiclient.CodeNotFound, nil, nil},
		{"wrong method", "DELETE", inst + "/exists", ``, 405, apiclient.CodeMethodNotAllowed, []string{"DELETE"}, nil},
		{"wrong method on a list", "PUT", "/api/workflows", ``, 405, apiclient.CodeMethodNotAllowed, nil, nil},
		{"GET of a POST route", "GET", inst + "/exists/pause", ``, 405, apiclient.CodeMethodNotAllowed, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.call(t, tc.method, tc.path, tc.body)
			msg := r.requireError(t, tc.status, tc.code, tc.messageHas...)
			for _, s := range tc.messageHasNone {
				require.NotContains(t, msg, s)
			}
			if tc.status == http.StatusMethodNotAllowed {
				require.NotEmpty(t, r.header.Get("Allow"))
			}
		})
	}

	// None of the refused creations wrote anything.
	for _, id := range []string{"t-1", "t-2", "u-1"} {
		_, err := b.api.Get(b.ctx, "greet", id)
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound, id)
	}
}

// TestPayloadTooLarge checks both limits: the body's (checked before anything
// is decoded) and the params' (1 MiB, checked by the client service).
func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	const inst = "/api/workflows/greet/instances"

	hugeString := `"` + strings.Repeat("x", httpapi.DefaultMaxBodyBytes) + `"`
	huge := `{"id":"huge","params":` + hugeString + `}`
	b.call(t, http.MethodPost, inst, huge).requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "limit")

	// Without a Content-Length (chunked), the limit holds while reading.
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.srv.URL+inst, io.MultiReader(strings.NewReader(huge)))
	require.NoError(t, err)
	require.Equal(t, int64(0), req.ContentLength)
	b.send(t, req).requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge)

	// Events and batches share the bound; malformed JSON after the bound is still a 413.
	b.call(t, http.MethodPost, inst+"/x/events", `{"type":"t","payload":`+hugeString+`}`).
		requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge)
	b.call(t, http.MethodPost, inst+"/batch", `{"instances":[`+strings.Repeat(`{"id":"a"},`, httpapi.DefaultMaxBodyBytes/10)).
		requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge)

	// Params just over 1 MiB fit in the body but not in the params limit.
	over := `"` + strings.Repeat("y", workflow.MaxPayloadBytes-1) + `"`
	b.call(t, http.MethodPost, inst, `{"id":"over","params":`+over+`}`).
		requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "params")
	_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "over2", Params: json.RawMessage(over)})
	require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)

	// Exactly 1 MiB of params is fine (an object greet's params decode
	// from).
	limit := `{"name":"` + strings.Repeat("z", workflow.MaxPayloadBytes-11) + `"}`
	b.call(t, http.MethodPost, inst, `{"id":"limit","params":`+limit+`}`).requireOK(t, http.StatusCreated, nil)

	for _, id := range []string{"huge", "over", "over2"} {
		_, err := b.api.Get(b.ctx, "greet", id)
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "%s must not have been written", id)
	}
}

func TestMaxBodyBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) { c.MaxBodyBytes = 64 })
	b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"small"}`).requireOK(t, http.StatusCreated, nil)
	b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"big","params":"`+strings.Repeat("p", 64)+`"}`).
		requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "64")
}

// TestClientErrorsMatchSentinels checks that every error code comes back from
// the typed client as an *APIError matching its sentinel.
func TestClientErrorsMatchSentinels(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "one"})
	require.NoError(t, err)

	for _, tc := range []struct {
		err    error
		target error
		status int
		code   apiclient.Code
	}{
		{get(b, "nope", "x"), workflow.ErrWorkflowNotFound, 404, apiclient.CodeWorkflowNotFound},
		{get(b, "greet", "x"), workflow.ErrInstanceNotFound, 404, apiclient.CodeInstanceNotFound},
		{create(b, "one"), workflow.ErrInstanceAlreadyExists, 409, apiclient.CodeInstanceIDAlreadyExists},
		{get(b, "greet", "bad id"), workflow.ErrInvalidInstanceID, 400, apiclient.CodeInvalidInstanceID},
		{b.api.SendEvent(b.ctx, "greet", "one", "bad type", nil), workflow.ErrInvalidEventType, 400, apiclient.CodeInvalidEventType},
		{get(b, "bad name!", "x"), workflow.ErrInvalidRequest, 400, apiclient.CodeInvalidRequest},
	} {
		require.ErrorIs(t, tc.err, tc.target)
		var apiErr *apiclient.APIError
		require.ErrorAs(t, tc.err, &apiErr)
		require.Equal(t, tc.status, apiErr.Status)
		require.Equal(t, tc.code, apiErr.Code)
		require.False(t, errors.Is(tc.err, workflow.ErrInstanceTerminal) && tc.target != workflow.ErrInstanceTerminal)
	}

	// Empty path segments are refused before anything is sent.
	_, err = b.api.Get(b.ctx, "greet", "")
	require.ErrorIs(t, err, workflow.ErrInvalidInstanceID)
	_, err = b.api.Get(b.ctx, "", "x")
	require.ErrorIs(t, err, workflow.ErrInvalidWorkflowName)

	// An answer that is not the API's (a proxy's page, say) keeps its status.
	e := &apiclient.APIError{Status: 502, Code: "HTTP_502", Message: "bad gateway"}
	require.False(t, errors.Is(e, workflow.ErrInstanceNotFound))
	require.Equal(t, "HTTP_502 (HTTP 502): bad gateway", e.Error())
	require.ErrorIs(t, &apiclient.APIError{Code: apiclient.CodeUnauthorized}, httpapi.ErrUnauthorized)
	require.ErrorIs(t, &apiclient.APIError{Code: apiclient.CodeForbidden}, httpapi.ErrForbidden)
	require.ErrorIs(t, &apiclient.APIError{Code: apiclient.CodePayloadTooLarge}, workflow.ErrPayloadTooLarge)
	require.ErrorIs(t, &apiclient.APIError{Code: apiclient.CodeInstanceTerminal}, workflow.ErrInstanceTerminal)
}

func TestClientNonAPIAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	// A client pointed at a path that is no Duraflow API gets the server's 404 in the API's shape...
	_, err := b.api.WithPrefix("/elsewhere").Workflows(b.ctx)
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, apiclient.CodeNotFound, apiErr.Code)

	// ...and a server that is not Duraflow's gives HTTP_<status>.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream is down", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	_, err = apiclient.New(proxy.URL, "", proxy.Client()).Get(b.ctx, "greet", "x")
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadGateway, apiErr.Status)
	require.Equal(t, apiclient.Code("HTTP_502"), apiErr.Code)
	require.Equal(t, "upstream is down", apiErr.Message)
	require.False(t, errors.Is(err, workflow.ErrInstanceNotFound))

	// A transport failure is no APIError.
	proxy.Close()
	_, err = apiclient.New(proxy.URL, "", nil).Workflows(b.ctx)
	require.Error(t, err)
	require.False(t, errors.As(err, &apiErr), "a transport error is not an APIError: %v", err)
}

func get(b *testBundle, name, id string) error {
	_, err := b.api.Get(b.ctx, name, id)
	return err
}

func create(b *testBundle, id string) error {
	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: id})
	return err
}
