package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// fuzzRoutes are the routes whose bodies FuzzRequestBody sends; the fuzzer
// picks one by index.
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/api/workflows/echo/instances"},
	{http.MethodPost, "/api/workflows/echo/instances/batch"},
	{http.MethodPost, "/api/workflows/echo/instances/fuzz-target/events"},
	{http.MethodPost, "/api/_runner/tick"},
	{http.MethodPost, "/api/schedules"},
	{http.MethodPatch, "/api/schedules/fuzz-schedule"},
	{http.MethodPost, "/api/flows"},
	{http.MethodPost, "/hooks/echo"},
	{http.MethodPost, "/hooks/mapped/x1"},
}

// FuzzRequestBody sends arbitrary bodies (and content types) to every route
// that decodes one, through the server's handler as a host mounts it: the
// answer must never be 500, and an error must be the API's one JSON shape
// with a code.
func FuzzRequestBody(f *testing.F) {
	for _, seed := range []struct {
		route       uint8
		contentType string
		body        string
	}{
		{0, "application/json", `{"id":"a1","params":{"name":"Ada"}}`},
		{0, "application/json", `{"params":[1,2,3]}`},
		{0, "text/plain", `{"id":"../x"}`},
		{0, "application/json", `{"id":"a1"} trailing`},
		{0, "application/json", `{"id":"a1","params":{"x":`},
		{0, "application/json", "{\"params\":\"\xff\xfe\"}"},
		{0, "", `{"unknown":1}`},
		{0, "application/json", `{"params":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`},
		{1, "application/json", `{"instances":[{"id":"b1"},{"id":"b1"},{"id":"b2","params":null}]}`},
		{1, "application/json", `{"instances":{}}`},
		{2, "application/json", `{"type":"approval","payload":{"ok":true}}`},
		{2, "application/json", `{"type":"../../etc","payload":1e999}`},
		{3, "application/json", `{"maxInstances":-1,"maxSteps":1e20}`},
		{4, "application/json", `{"id":"s1","workflowName":"echo","cron":"*/5 * * * *","timeZone":"Mars/Olympus"}`},
		{4, "application/json", `{"id":"s2","workflowName":"echo","cron":"0 0 30 2 *"}`},
		{5, "application/json", `{"cron":"@every 1s","maxCatchup":100000}`},
		{6, "application/json", `{"id":"f","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"set","config":{"values":{"x":{"value":1}}}}}}`},
		{6, "application/json", `{"id":"f","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"http","config":{"url":"http://169.254.169.254/"}}}}`},
		{7, "application/json", `[1,2,3]`},
		{7, "application/json", ``},
		{8, "application/json", `{"lines":[{"sku":"a"}],"id":"x"}`},
	} {
		f.Add(seed.route, seed.contentType, []byte(seed.body))
	}
	h := testharness.New(f)
	workflow.MustRegister(h.Registry, "echo", func(_ context.Context, ev workflow.Event[json.RawMessage], _ workflow.Step) (json.RawMessage, error) {
		return ev.Payload, nil
	})
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	sched, err := schedule.New(&schedule.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: discard})
	require.NoError(f, err)
	flows, err := flow.New(&flow.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: discard})
	require.NoError(f, err)
	cl, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: flows.Metadata})
	require.NoError(f, err)
	srv, err := httpapi.New(&httpapi.Config{
		Client: cl, Logger: discard, Schedules: sched, Flows: flows, Clock: h.Clock,
		Tick: tickWithRunner(h), MaxBodyBytes: 64 << 10,
		Triggers: []httpapi.Trigger{
			{Method: http.MethodPost, Path: "/hooks/echo", Workflow: "echo"},
			{Method: http.MethodPost, Path: "/hooks/mapped/:id", Workflow: "echo", Params: map[string]string{"order.id": "path.id", "order.lines": "body.lines", "all": "body"}},
		},
	})
	require.NoError(f, err)
	_, err = cl.Create(h.Context(), "echo", dftype.CreateRequest{ID: "fuzz-target"})
	require.NoError(f, err)
	handler := srv.Handler()

	f.Fuzz(func(t *testing.T, route uint8, contentType string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req := httptest.NewRequestWithContext(h.Context(), rt.method, rt.path, strings.NewReader(string(body)))
		req.Host = "127.0.0.1" // without tokens the API serves loopback hosts only
		if contentType != "" && !strings.ContainsAny(contentType, "\r\n") {
			req.Header.Set("Content-Type", contentType)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		require.NotEqual(t, http.StatusForbidden, rec.Code, "the request never reached the route: %s", rec.Body)
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, "%s %s %q: %s", rt.method, rt.path, body, rec.Body)
		if rec.Code >= 400 {
			var e struct {
				Error *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s %s %q: %s", rt.method, rt.path, body, rec.Body)
			require.NotNil(t, e.Error, "%s", rec.Body)
			require.NotEmpty(t, e.Error.Code, "%s", rec.Body)
		}
	})
}
