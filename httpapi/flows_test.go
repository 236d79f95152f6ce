package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// withFlows serves the flow routes over a flow registry on the harness, and
// creates instances through a client that pins flow versions.
func withFlows(t *testing.T, flows **flow.Registry) func(*httpapi.Config, *testharness.Harness) {
	return func(c *httpapi.Config, h *testharness.Harness) {
		r, err := flow.New(&flow.Config{
			Store: h.Store, Registry: h.Registry, Clock: h.Clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		require.NoError(t, err)
		cl, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: r.Metadata})
		require.NoError(t, err)
		c.Client, c.Flows = cl, r
		if flows != nil {
			*flows = r
		}
	}
}

// doubler is a flow that doubles params.n and names its version.
func doubler(version string) string {
	return fmt.Sprintf(`{
  "id": "doubler", "version": %q, "name": "Doubler",
  "initialStepId": "double",
  "steps": {
    "double": {"id": "double", "type": "transform", "config": {"expression": "{n: n * 2, version: '%s'}"}, "outputKey": "result"}
  },
  "output": "result"
}`, version, version)
}

// flowErrorBody is an error answer with the problems of INVALID_FLOW.
type flowErrorBody struct {
	Error struct {
		Code     string         `json:"code"`
		Message  string         `json:"message"`
		Problems []flow.Problem `json:"problems"`
		Warnings []flow.Problem `json:"warnings"`
	} `json:"error"`
}

func TestFlowRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withFlows(t, nil))

	r := b.call(t, "POST", "/api/flows", doubler("1.9.0"))
	var applied apiclient.FlowApplied
	r.requireOK(t, http.StatusCreated, &applied)
	require.Equal(t, apiclient.FlowApplied{ID: "doubler", Version: "1.9.0", Created: true, Latest: "1.9.0", Warnings: []flow.Problem{}}, applied)
	require.Equal(t, "/api/flows/doubler/versions/1.9.0", r.header.Get("Location"))

	r = b.call(t, "POST", "/api/flows", doubler("1.9.0"))
	r.requireOK(t, http.StatusOK, &applied)
	require.False(t, applied.Created, "applying a stored version again changes nothing")

	r = b.call(t, "POST", "/api/flows", strings.Replace(doubler("1.9.0"), "n * 2", "n * 3", 1))
	r.requireError(t, http.StatusConflict, apiclient.CodeFlowVersionConflict, "new version")

	b.call(t, "POST", "/api/flows", doubler("1.10.0")).requireOK(t, http.StatusCreated, &applied)
	require.Equal(t, "1.10.0", applied.Latest)

	// Listed beside the Go workflows, with the version new instances run.
	var list apiclient.WorkflowList
	b.call(t, "GET", "/api/workflows", "").requireOK(t, http.StatusOK, &list)
	require.Equal(t, []apiclient.WorkflowSummary{
		{Name: "approve", Kind: apiclient.KindGo},
		{Name: "doubler", Kind: apiclient.KindFlow, Version: "1.10.0"},
		{Name: "greet", Kind: apiclient.KindGo},
		{Name: "steps", Kind: apiclient.KindGo},
	}, list.Workflows)

	// Started and read by the same instance routes as a Go workflow.
	var created apiclient.Instance
	b.call(t, "POST", "/api/workflows/doubler/instances", `{"id":"d1","params":{"n":21}}`).requireOK(t, http.StatusCreated, &created)
	var md map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(created.Metadata, &md))
	require.JSONEq(t, `{"id":"doubler","version":"1.10.0"}`, string(md["flow"]), "pinned to the latest version")
	require.Contains(t, string(md["trigger"]), `"type":"api"`, "the provenance stays")
	b.h.RunUntilIdle()
	var got apiclient.Instance
	b.call(t, "GET", "/api/workflows/doubler/instances/d1", "").requireOK(t, http.StatusOK, &got)
	require.Equal(t, dftype.StatusComplete, got.Details.Status)
	require.JSONEq(t, `{"n":42,"version":"1.10.0"}`, string(got.Details.Output))

	// Reading flows.
	var flows apiclient.FlowList
	b.call(t, "GET", "/api/flows", "").requireOK(t, http.StatusOK, &flows)
	require.Len(t, flows.Flows, 1)
	require.Equal(t, "doubler", flows.Flows[0].ID)
	require.Equal(t, "1.10.0", flows.Flows[0].Version)
	require.Equal(t, "Doubler", flows.Flows[0].Name)
	require.Nil(t, flows.Flows[0].Definition)

	var latest apiclient.FlowInfo
	b.call(t, "GET", "/api/flows/doubler", "").requireOK(t, http.StatusOK, &latest)
	require.Equal(t, "1.10.0", latest.Version)
	require.True(t, latest.Latest)
	require.JSONEq(t, doubler("1.10.0"), string(latest.Definition))

	var one apiclient.FlowInfo
	b.call(t, "GET", "/api/flows/doubler/versions/1.9.0", "").requireOK(t, http.StatusOK, &one)
	require.Equal(t, "1.9.0", one.Version)
	require.False(t, one.Latest)
	require.JSONEq(t, doubler("1.9.0"), string(one.Definition))

	var versions apiclient.FlowVersionList
	b.call(t, "GET", "/api/flows/doubler/versions", "").requireOK(t, http.StatusOK, &versions)
	require.Equal(t, "1.10.0", versions.Latest)
	require.Len(t, versions.Versions, 2)
	require.Equal(t, "1.9.0", versions.Versions[0].Version)
	require.Equal(t, "1.10.0", versions.Versions[1].Version)

	b.call(t, "GET", "/api/flows/nope", "").requireError(t, http.StatusNotFound, apiclient.CodeFlowNotFound)
	b.call(t, "GET", "/api/flows/nope/versions", "").requireError(t, http.StatusNotFound, apiclient.CodeFlowNotFound)
	b.call(t, "GET", "/api/flows/doubler/versions/2.0.0", "").requireError(t, http.StatusNotFound, apiclient.CodeFlowNotFound)
	b.call(t, "GET", "/api/flows/doubler/versions/v1", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
	b.call(t, "GET", "/api/flows?pageSize=0", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "pageSize")
	b.call(t, "GET", "/api/flows?color=red", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "color")
	b.call(t, "POST", "/api/flows", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "empty")
	b.call(t, "POST", "/api/flows", `{"id":"big","pad":"`+strings.Repeat("x", httpapi.DefaultMaxBodyBytes)+`"}`).
		requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge)
	b.call(t, "DELETE", "/api/flows/doubler", "").requireError(t, http.StatusMethodNotAllowed, apiclient.CodeMethodNotAllowed)
}

func TestFlowValidationProblems(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withFlows(t, nil))

	r := b.call(t, "POST", "/api/flows", `{"id": "broken", "version": "1.0.0", "initialStepId": "a", "steps": {
	  "a": {"id": "a", "type": "http", "config": {"url": "http://169.254.169.254/latest"}, "transitions": {"onSuccess": "nowhere"}},
	  "lost": {"id": "lost", "type": "set", "config": {"values": {}}}}}`)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	var body flowErrorBody
	require.NoError(t, json.Unmarshal(r.body, &body))
	require.Equal(t, "INVALID_FLOW", body.Error.Code)
	require.NotEmpty(t, body.Error.Message)
	paths := map[string]string{}
	for _, p := range body.Error.Problems {
		paths[p.Path] = p.Message
	}
	require.Contains(t, paths, "steps.a.config.url", "the metadata address is refused: %v", body.Error.Problems)
	require.Contains(t, paths, "steps.a.transitions.onSuccess", "%v", body.Error.Problems)
	require.Len(t, body.Error.Warnings, 1)
	require.Equal(t, "steps.lost", body.Error.Warnings[0].Path)

	// A Go workflow's name is taken.
	r = b.call(t, "POST", "/api/flows", strings.ReplaceAll(doubler("1.0.0"), `"doubler"`, `"greet"`))
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &body))
	require.Equal(t, "id", body.Error.Problems[0].Path)

	// Malformed JSON is a problem of the definition too.
	r = b.call(t, "POST", "/api/flows", `{"id": `)
	require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
	require.NoError(t, json.Unmarshal(r.body, &body))
	require.Equal(t, "INVALID_FLOW", body.Error.Code)
	require.NotEmpty(t, body.Error.Problems)

	// The typed client gets the problems too.
	_, err := b.api.ApplyFlow(b.ctx, []byte(`{"id": "broken", "version": "one"}`))
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, apiclient.CodeInvalidFlow, apiErr.Code)
	require.Equal(t, http.StatusBadRequest, apiErr.Status)
	require.NotEmpty(t, apiErr.Problems)
	require.ErrorIs(t, err, flow.ErrInvalidDefinition)
}

func TestFlowClient(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withFlows(t, nil))

	// The definition reaches the store byte for byte.
	def := []byte(doubler("1.0.0") + "\n")
	applied, err := b.api.ApplyFlow(b.ctx, def)
	require.NoError(t, err)
	require.True(t, applied.Created)
	stored, err := b.h.Store.FlowGet(b.ctx, db.FlowRef{ID: "doubler", Version: "1.0.0"})
	require.NoError(t, err)
	require.Equal(t, string(def), string(stored.Definition))
	again, err := b.api.ApplyFlow(b.ctx, def)
	require.NoError(t, err)
	require.False(t, again.Created)

	_, err = b.api.ApplyFlow(b.ctx, []byte(strings.Replace(string(def), "n * 2", "n + 2", 1)))
	require.ErrorIs(t, err, flow.ErrVersionConflict)
	_, err = b.api.ApplyFlow(b.ctx, nil)
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)

	list, err := b.api.ListFlows(b.ctx, flow.ListParams{PageSize: 10})
	require.NoError(t, err)
	require.Len(t, list.Flows, 1)
	info, err := b.api.GetFlow(b.ctx, "doubler", "")
	require.NoError(t, err)
	require.Equal(t, "1.0.0", info.Version)
	info, err = b.api.GetFlow(b.ctx, "doubler", "1.0.0")
	require.NoError(t, err)
	require.True(t, info.Latest)
	versions, err := b.api.FlowVersions(b.ctx, "doubler")
	require.NoError(t, err)
	require.Len(t, versions.Versions, 1)

	_, err = b.api.GetFlow(b.ctx, "nope", "")
	require.ErrorIs(t, err, flow.ErrNotFound)
	_, err = b.api.FlowVersions(b.ctx, "nope")
	require.ErrorIs(t, err, flow.ErrNotFound)
	_, err = b.api.GetFlow(b.ctx, "", "")
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)

	wfs, err := b.api.Workflows(b.ctx)
	require.NoError(t, err)
	require.Contains(t, wfs.Workflows, apiclient.WorkflowSummary{Name: "doubler", Kind: apiclient.KindFlow, Version: "1.0.0"})

	// A registry bound to the typed client drives the flow remotely.
	remote := workflow.NewRegistry()
	remote.Bind(b.api)
	doublerBinding := workflow.Remote[map[string]int, map[string]any](remote, "doubler")
	inst, err := doublerBinding.Create(b.ctx, workflow.CreateOptions[map[string]int]{ID: "r1", Params: map[string]int{"n": 5}})
	require.NoError(t, err)
	b.h.RunUntilIdle()
	st, err := inst.Status(b.ctx)
	require.NoError(t, err)
	require.Equal(t, dftype.StatusComplete, st.Status)
	require.EqualValues(t, 10, st.Output["n"])
}

func TestFlowScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withFlows(t, nil), func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tokens = []httpapi.Token{
			httpapi.NewToken("ops", "ops-secret", httpapi.ActionRead, httpapi.ActionCreate, httpapi.ActionManage, httpapi.ActionEvents),
			httpapi.NewToken("deployer", "deploy-secret", httpapi.ActionFlows),
		}
		tok, err := httpapi.ParseToken("admin:admin-secret:*")
		require.NoError(t, err)
		c.Tokens = append(c.Tokens, tok)
	})
	b.call(t, "POST", "/api/flows", doubler("1.0.0"), "Authorization: Bearer ops-secret").
		requireError(t, http.StatusForbidden, apiclient.CodeForbidden, "flows")
	b.call(t, "POST", "/api/flows", doubler("1.0.0"), "Authorization: Bearer deploy-secret").requireOK(t, http.StatusCreated, nil)
	b.call(t, "POST", "/api/flows", doubler("1.1.0"), "Authorization: Bearer admin-secret").requireOK(t, http.StatusCreated, nil)
	b.call(t, "GET", "/api/flows/doubler", "", "Authorization: Bearer ops-secret").requireOK(t, http.StatusOK, nil)
	b.call(t, "GET", "/api/flows/doubler", "", "Authorization: Bearer deploy-secret").requireError(t, http.StatusForbidden, apiclient.CodeForbidden)
	b.call(t, "GET", "/api/flows", "").requireError(t, http.StatusUnauthorized, apiclient.CodeUnauthorized)
}

func TestFlowRoutesNeedARegistry(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.call(t, "GET", "/api/flows", "").requireError(t, http.StatusNotFound, apiclient.CodeNotFound)
	b.call(t, "POST", "/api/flows", doubler("1.0.0")).requireError(t, http.StatusNotFound, apiclient.CodeNotFound)
	var apiErr *apiclient.APIError
	_, err := b.api.ApplyFlow(b.ctx, []byte(doubler("1.0.0")))
	require.True(t, errors.As(err, &apiErr) && apiErr.Code == apiclient.CodeNotFound)
}

// TestFlowApplyListsUnknownFieldsWithTheRest: a definition with unknown
// fields and other problems is answered 400 INVALID_FLOW with all of them,
// every unknown field included, and nothing is stored; on both backends.
func TestFlowApplyListsUnknownFieldsWithTheRest(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", withFlows(t, nil))
		r := b.call(t, "POST", "/api/flows", `{"id": "broken", "version": "1.0.0", "initialStepId": "nowhere", "colour": "red",
		  "steps": {"a": {"id": "a", "type": "set", "config": {"values": {"x": {"value": 1}}}, "retrys": 3}}}`)
		require.Equal(t, http.StatusBadRequest, r.status, "body: %s", r.body)
		var body flowErrorBody
		require.NoError(t, json.Unmarshal(r.body, &body))
		require.Equal(t, "INVALID_FLOW", body.Error.Code)
		paths := map[string]string{}
		for _, p := range body.Error.Problems {
			paths[p.Path] = p.Message
		}
		require.Equal(t, map[string]string{
			"colour":         `unknown field "colour"`,
			"steps.a.retrys": `unknown field "retrys"`,
			"initialStepId":  `no step "nowhere" (steps: a)`,
		}, paths)
		for _, p := range []string{"colour", "retrys", "initialStepId"} {
			require.Contains(t, body.Error.Message, p, "the message lists every problem too")
		}
		b.call(t, "GET", "/api/flows/broken", "").requireError(t, http.StatusNotFound, apiclient.CodeFlowNotFound)
	})
}
