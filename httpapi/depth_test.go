package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// deepArray is JSON of n arrays nested in one another.
func deepArray(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// bodyRoute is a route that takes a request body; body wraps a payload (or
// malformed JSON) in the route's body.
type bodyRoute struct {
	name, method, path string
	body               func(payload string) string
	// deepest is the deepest payload the route takes, where the body
	// carries a payload to store: workflow.MaxPayloadDepth less the levels
	// the stored document wraps around it. The routes that take no payload
	// (0) only refuse bodies deeper than any request needs.
	deepest int
	// malformed is the code of a body that is not JSON.
	malformed apiclient.Code
}

// bodyRoutes are the routes of setupDepth that take a body.
func bodyRoutes() []bodyRoute {
	wrap := func(format string) func(string) string {
		return func(p string) string { return fmt.Sprintf(format, p) }
	}
	const m = workflow.MaxPayloadDepth
	return []bodyRoute{
		{"create", "POST", "/api/workflows/greet/instances", wrap(`{"params":%s}`), m, apiclient.CodeInvalidRequest},
		{"batch", "POST", "/api/workflows/greet/instances/batch", wrap(`{"instances":[{"id":"b-1"},{"params":%s}]}`), m, apiclient.CodeInvalidRequest},
		{"event", "POST", "/api/workflows/approve/instances/a-1/events", wrap(`{"type":"approval","payload":%s}`), m, apiclient.CodeInvalidRequest},
		{"schedule create", "POST", "/api/schedules", wrap(`{"id":"s-1","workflowName":"greet","cron":"@daily","params":%s}`), m, apiclient.CodeInvalidRequest},
		{"schedule update", "PATCH", "/api/schedules/s-0", wrap(`{"params":%s}`), m, apiclient.CodeInvalidRequest},
		{"flow apply", "POST", "/api/flows", wrap(`{"id":"deep","version":"1.0.0","initialStepId":"a","steps":{"a":{"id":"a","type":"transform","config":{"expression":"1","x":%s}}}}`), m - 4, apiclient.CodeInvalidFlow},
		{"trigger", "POST", "/hooks/greet", wrap(`%s`), m, apiclient.CodeInvalidRequest},
		{"trigger mapped", "POST", "/hooks/mapped", wrap(`{"x":%s}`), m - 1, apiclient.CodeInvalidRequest},
		{"pause", "POST", "/api/workflows/greet/instances/g-0/pause", wrap(`{"x":%s}`), 0, apiclient.CodeInvalidRequest},
		{"schedule disable", "POST", "/api/schedules/s-0/disable", wrap(`{"x":%s}`), 0, apiclient.CodeInvalidRequest},
		{"tick", "POST", "/api/_runner/tick", wrap(`{"x":%s}`), 0, apiclient.CodeInvalidRequest},
	}
}

// setupDepth serves every route that takes a body on backend, with an
// instance of greet (g-0) and approve (a-1) and a schedule (s-0).
func setupDepth(t *testing.T, backend testharness.Backend) *testBundle {
	t.Helper()
	b := setupOn(t, backend, "", withFlows(t, nil), withSchedules(t, nil), withTick, withTriggers(
		httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"},
		httpapi.Trigger{Path: "/hooks/mapped", Workflow: "greet", Params: map[string]string{"deep": "body.x"}},
	))
	b.call(t, "POST", "/api/workflows/greet/instances", `{"id":"g-0"}`).requireOK(t, http.StatusCreated, nil)
	b.call(t, "POST", "/api/workflows/approve/instances", `{"id":"a-1"}`).requireOK(t, http.StatusCreated, nil)
	b.call(t, "POST", "/api/schedules", `{"id":"s-0","workflowName":"greet","cron":"@daily"}`).requireOK(t, http.StatusCreated, nil)
	return b
}

// TestBodyDepth sends payloads nested past workflow.MaxPayloadDepth, past
// SQLite's JSON limit (1000) and past Go's decoder's (10000) to every route
// that takes a body, on both backends: each is refused with 400
// PAYLOAD_TOO_DEEP and writes nothing, and malformed JSON with 400.
func TestBodyDepth(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupDepth(t, backend)
		for _, rt := range bodyRoutes() {
			depths := []int{300, 1001, 5000, 9999, 10001, 100000}
			if rt.deepest > 0 {
				depths = append([]int{rt.deepest + 1}, depths...)
			}
			for _, n := range depths {
				r := b.call(t, rt.method, rt.path, rt.body(deepArray(n)))
				msg := r.requireError(t, http.StatusBadRequest, apiclient.CodePayloadTooDeep, "deeper than")
				require.NotContains(t, msg, "internal", "%s at depth %d", rt.name, n)
			}
			// At the limit, a payload is taken (or refused for another
			// reason, such as a schedule id that exists by now).
			if rt.deepest > 0 {
				r := b.call(t, rt.method, rt.path, rt.body(deepArray(rt.deepest)))
				require.Less(t, r.status, 500, "%s: %s", rt.name, r.body)
				require.NotContains(t, string(r.body), string(apiclient.CodePayloadTooDeep), rt.name)
			}
			for _, body := range []string{rt.body(`[1,`), `{"params":`, `{"params":[1]]}`} {
				r := b.call(t, rt.method, rt.path, body)
				require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", rt.name, r.body)
				var answer flowErrorBody
				require.NoError(t, json.Unmarshal(r.body, &answer))
				require.Equal(t, string(rt.malformed), answer.Error.Code, "%s: %s", rt.name, r.body)
			}
		}

		// Nothing too deep was written.
		list, err := b.api.List(b.ctx, client.ListParams{WorkflowName: "greet", PageSize: 100})
		require.NoError(t, err)
		for _, inst := range list.Instances {
			require.LessOrEqual(t, workflow.PayloadDepth(inst.Params), workflow.MaxPayloadDepth, inst.ID)
		}
		sched, err := b.api.GetSchedule(b.ctx, "s-0")
		require.NoError(t, err)
		require.LessOrEqual(t, workflow.PayloadDepth(sched.Params), workflow.MaxPayloadDepth)
	})
}
