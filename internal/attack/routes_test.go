//go:build attack

package attack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/dburl"
)

// credential is what a request presents.
type credential struct {
	name   string
	header string // the Authorization header; "" sends none
	scope  string // the scope it carries; "*" for admin; "" for none
}

func credentials() []credential {
	creds := []credential{
		{name: "none"},
		{name: "unknown", header: "Bearer not-a-configured-secret"},
		{name: "basic", header: "Basic YWRtaW46YXR0YWNrLWFkbWluLXNlY3JldA=="},
		{name: "empty-bearer", header: "Bearer "},
		{name: "admin-lowercase-scheme", header: "bearer " + secretAdmin, scope: "*"},
		{name: "admin", header: "Bearer " + secretAdmin, scope: "*"},
		{name: "read", header: "Bearer " + secretRead, scope: "read"},
		{name: "create", header: "Bearer " + secretCreate, scope: "create"},
		{name: "manage", header: "Bearer " + secretManage, scope: "manage"},
		{name: "events", header: "Bearer " + secretEvents, scope: "events"},
		{name: "flows", header: "Bearer " + secretFlows, scope: "flows"},
		{name: "tick", header: "Bearer " + secretTick, scope: "tick"},
		{name: "schedules", header: "Bearer " + secretSchedules, scope: "schedules"},
	}
	return creds
}

// allows reports whether a credential's scope allows action: "*" is every
// action but tick.
func (c credential) allows(action string) bool {
	if c.scope == "*" {
		return action != "tick"
	}
	return c.scope != "" && c.scope == action
}

// routeCase is one route of the API: how to build a request that succeeds
// with the right credential, and what that success is.
type routeCase struct {
	method, pattern string // as httpapi declares it, under /api
	action          string
	status          int
	// build makes the target of one request (an instance, a schedule) with
	// the admin token and returns the path and body.
	build func(t *testing.T, s *server) (path, body string)
}

// newApproval creates an instance of the demo workflow approval, which
// waits for an event, and returns its id.
func newApproval(t *testing.T, s *server) string {
	t.Helper()
	id := uniqueID("route")
	r := s.call(t, http.MethodPost, "/api/workflows/approval/instances", fmt.Sprintf(`{"id":%q,"params":{"amount":1}}`, id))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	return id
}

func newSchedule(t *testing.T, s *server) string {
	t.Helper()
	id := uniqueID("sched")
	r := s.call(t, http.MethodPost, "/api/schedules", fmt.Sprintf(`{"id":%q,"workflowName":"hello","cron":"0 0 1 1 *","enabled":false}`, id))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	return id
}

const routeFlowID = "route-flow"

func flowJSON(id, version string) string {
	return fmt.Sprintf(`{"id":%q,"version":%q,"initialStepId":"s","steps":{"s":{"id":"s","type":"set","config":{"values":{"ok":{"value":true}}}}}}`, id, version)
}

func fixed(path, body string) func(*testing.T, *server) (string, string) {
	return func(*testing.T, *server) (string, string) { return path, body }
}

func onApproval(suffix, body string) func(*testing.T, *server) (string, string) {
	return func(t *testing.T, s *server) (string, string) {
		return "/api/workflows/approval/instances/" + newApproval(t, s) + suffix, body
	}
}

func onSchedule(suffix, body string) func(*testing.T, *server) (string, string) {
	return func(t *testing.T, s *server) (string, string) {
		return "/api/schedules/" + newSchedule(t, s) + suffix, body
	}
}

// onWorker registers a worker of its own in the server's database (the
// server's runner is not to be drained) and targets it.
func onWorker(suffix string) func(t *testing.T, s *server) (string, string) {
	return func(t *testing.T, s *server) (string, string) {
		ctx := context.Background()
		store, err := dburl.Open(ctx, s.dbURL)
		require.NoError(t, err)
		defer store.Close()
		id := uniqueID("worker")
		_, err = store.WorkerRegister(ctx, &db.WorkerRegisterParams{ID: id, Hostname: "attack", PID: 1, MaxConcurrency: 1, Now: time.Now()})
		require.NoError(t, err)
		return "/api/workers/" + id + suffix, ""
	}
}

func routeCases() []routeCase {
	return []routeCase{
		{"GET", "/openapi.json", "read", 200, fixed("/api/openapi.json", "")},
		{"GET", "", "read", 200, fixed("/api", "")},
		{"GET", "/", "read", 200, fixed("/api/", "")},
		{"GET", "/workflows", "read", 200, fixed("/api/workflows", "")},
		{"GET", "/instances", "read", 200, fixed("/api/instances", "")},
		{"GET", "/workflows/:name/instances", "read", 200, fixed("/api/workflows/approval/instances", "")},
		{"POST", "/workflows/:name/instances", "create", 201, func(*testing.T, *server) (string, string) {
			return "/api/workflows/hello/instances", fmt.Sprintf(`{"id":%q,"params":{"name":"Ada"}}`, uniqueID("route"))
		}},
		{"POST", "/workflows/:name/instances/batch", "create", 201, func(*testing.T, *server) (string, string) {
			return "/api/workflows/hello/instances/batch", fmt.Sprintf(`{"instances":[{"id":%q}]}`, uniqueID("route"))
		}},
		{"GET", "/workflows/:name/instances/:id", "read", 200, onApproval("", "")},
		{"GET", "/workflows/:name/instances/batch", "read", 200, func(t *testing.T, s *server) (string, string) {
			if s.getInstance(t, "approval", "batch") == nil {
				r := s.call(t, http.MethodPost, "/api/workflows/approval/instances", `{"id":"batch","params":{"amount":1}}`)
				require.Contains(t, []int{201, 409}, r.status, "body: %s", r.body)
			}
			return "/api/workflows/approval/instances/batch", ""
		}},
		{"POST", "/workflows/:name/instances/:id/pause", "manage", 200, onApproval("/pause", "")},
		{"POST", "/workflows/:name/instances/:id/resume", "manage", 200, onApproval("/resume", "")},
		{"POST", "/workflows/:name/instances/:id/terminate", "manage", 200, onApproval("/terminate", "")},
		{"POST", "/workflows/:name/instances/:id/restart", "manage", 200, onApproval("/restart", "")},
		{"POST", "/workflows/:name/instances/:id/compensate", "manage", 200, onApproval("/compensate", "")},
		{"POST", "/workflows/:name/instances/:id/events", "events", 202, onApproval("/events", `{"type":"approval","payload":{"approved":true}}`)},
		{"GET", "/workflows/:name/instances/:id/history", "read", 200, onApproval("/history", "")},
		{"GET", "/workflows/:name/instances/:id/lifecycle", "read", 200, onApproval("/lifecycle", "")},
		{"GET", "/events", "read", 200, fixed("/api/events", "")},
		// The stream answers an allowed credential with a stream that does
		// not end; a bad filter is answered 400 before it starts, after the
		// credential was checked, which is what this table is about.
		{"GET", "/events/stream", "read", 400, fixed("/api/events/stream?type=instance.exploded", "")},
		{"POST", "/_runner/tick", "tick", 200, fixed("/api/_runner/tick", `{"maxInstances":1}`)},
		{"GET", "/schedules", "read", 200, fixed("/api/schedules", "")},
		{"POST", "/schedules", "schedules", 201, func(*testing.T, *server) (string, string) {
			return "/api/schedules", fmt.Sprintf(`{"id":%q,"workflowName":"hello","cron":"0 0 1 1 *","enabled":false}`, uniqueID("sched"))
		}},
		{"GET", "/schedules/:id", "read", 200, onSchedule("", "")},
		{"PATCH", "/schedules/:id", "schedules", 200, onSchedule("", `{"cron":"0 0 2 1 *"}`)},
		{"DELETE", "/schedules/:id", "schedules", 204, onSchedule("", "")},
		{"POST", "/schedules/:id/enable", "schedules", 200, onSchedule("/enable", "")},
		{"POST", "/schedules/:id/disable", "schedules", 200, onSchedule("/disable", "")},
		{"GET", "/queues", "read", 200, fixed("/api/queues", "")},
		{"PUT", "/queues/:name", "manage", 200, fixed("/api/queues/attack", `{"maxRunning":5}`)},
		{"GET", "/queues/:name", "read", 200, func(t *testing.T, s *server) (string, string) {
			r := s.call(t, http.MethodPut, "/api/queues/attack-read", `{"maxRunning":5}`)
			require.Equal(t, 200, r.status, "body: %s", r.body)
			return "/api/queues/attack-read", ""
		}},
		{"POST", "/flows", "flows", 201, func(*testing.T, *server) (string, string) {
			return "/api/flows", flowJSON(uniqueID("flow"), "1.0.0")
		}},
		{"GET", "/flows", "read", 200, fixed("/api/flows", "")},
		{"GET", "/flows/:id", "read", 200, fixed("/api/flows/"+routeFlowID, "")},
		{"GET", "/flows/:id/versions", "read", 200, fixed("/api/flows/"+routeFlowID+"/versions", "")},
		{"GET", "/flows/:id/versions/:version", "read", 200, fixed("/api/flows/"+routeFlowID+"/versions/1.0.0", "")},
		{"GET", "/workers", "read", 200, fixed("/api/workers", "")},
		{"GET", "/workers/:id", "read", 200, onWorker("")},
		{"POST", "/workers/:id/drain", "manage", 200, onWorker("/drain")},
		// The trigger the servers are started with (--trigger 'POST /hooks/hello=hello').
		{"POST", "trigger /hooks/hello", "create", 202, fixed("/hooks/hello", `{"name":"Ada"}`)},
	}
}

var routeDeclRE = regexp.MustCompile(`route\(http\.Method(\w+), "([^"]+)"`)

// TestRouteTableCoversEveryRoute fails when httpapi declares a route the
// table of TestRoutesByCredential does not list: a new route must say which
// credentials it accepts.
func TestRouteTableCoversEveryRoute(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "httpapi", "*.go"))
	require.NoError(t, err)
	var declared []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range routeDeclRE.FindAllStringSubmatch(string(src), -1) {
			declared = append(declared, strings.ToUpper(m[1])+" "+m[2])
		}
	}
	require.NotEmpty(t, declared, "no route declarations found in httpapi: has route() changed?")
	var covered []string
	for _, rc := range routeCases() {
		covered = append(covered, rc.method+" "+rc.pattern)
	}
	for _, d := range declared {
		require.True(t, slices.Contains(covered, d), "httpapi declares %s, which the attack route table does not cover", d)
	}
}

// TestRoutesByCredential sends every route with every credential: without a
// valid token 401 UNAUTHORIZED, with a token that lacks the route's scope
// 403 FORBIDDEN, with one that has it the route's success.
func TestRoutesByCredential(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	r := s.call(t, http.MethodPost, "/api/flows", flowJSON(routeFlowID, "1.0.0"))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

	for _, rc := range routeCases() {
		t.Run(strings.ReplaceAll(rc.method+rc.pattern, "/", "_"), func(t *testing.T) {
			for _, c := range credentials() {
				path, body := rc.build(t, s)
				countBefore := -1
				if rc.action == "create" && !c.allows(rc.action) {
					countBefore = s.countInstances(t, "hello")
				}
				req := request{method: rc.method, path: path, header: map[string]string{}}
				if body != "" {
					req.body = strings.NewReader(body)
				}
				if c.header != "" {
					req.header["Authorization"] = c.header
				}
				resp := s.do(t, req)
				switch {
				case c.scope == "":
					requireRefused(t, resp, http.StatusUnauthorized, "UNAUTHORIZED")
					require.Contains(t, resp.header.Get("WWW-Authenticate"), "Bearer")
				case !c.allows(rc.action):
					requireRefused(t, resp, http.StatusForbidden, "FORBIDDEN")
				default:
					require.Equal(t, rc.status, resp.status, "%s with %s: %s", path, c.name, resp.body)
				}
				if countBefore >= 0 {
					require.Equal(t, countBefore, s.countInstances(t, "hello"), "a refused %s created an instance", rc.pattern)
				}
			}
		})
	}
	// Health and readiness need no token.
	for _, p := range []string{"/healthz", "/readyz"} {
		require.Equal(t, http.StatusOK, s.do(t, request{method: http.MethodGet, path: p}).status, p)
	}
	s.requireHealthy(t)
}

// scheduleState is what a schedule write may change.
type scheduleState struct {
	Cron    string          `json:"cron"`
	Enabled bool            `json:"enabled"`
	Params  json.RawMessage `json:"params"`
}

// getSchedule returns a schedule, nil when it does not exist.
func (s *server) getSchedule(t *testing.T, id string) *scheduleState {
	t.Helper()
	r := s.call(t, http.MethodGet, "/api/schedules/"+id, "")
	if r.status == http.StatusNotFound {
		requireRefused(t, r, http.StatusNotFound, "SCHEDULE_NOT_FOUND")
		return nil
	}
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var st scheduleState
	require.NoError(t, json.Unmarshal(r.body, &st))
	return &st
}

// TestScheduleWritesNeedSchedulesScope: a schedule starts any workflow with
// any params, so a manage token, which may only steer instances that exist,
// must not write one. Every schedule write with the manage token
// is 403 and changes nothing; the schedules token does each of them.
func TestScheduleWritesNeedSchedulesScope(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	writes := func(id string) []struct{ method, path, body string } {
		return []struct{ method, path, body string }{
			{http.MethodPost, "/api/schedules", fmt.Sprintf(`{"id":%q,"workflowName":"hello","cron":"* * * * *","enabled":true,"params":{"name":"by manage"}}`, id)},
			{http.MethodPatch, "/api/schedules/" + id, `{"cron":"* * * * *","params":{"name":"by manage"}}`},
			{http.MethodPost, "/api/schedules/" + id + "/enable", ""},
			{http.MethodPost, "/api/schedules/" + id + "/disable", ""},
			{http.MethodDelete, "/api/schedules/" + id, ""},
		}
	}
	send := func(secret, method, path, body string) *response {
		req := request{method: method, path: path, token: secret}
		if body != "" {
			req.body = strings.NewReader(body)
		}
		return s.do(t, req)
	}

	// manage: a schedule that does not exist is not created, one that
	// exists is neither changed, enabled nor deleted.
	fresh := uniqueID("sched")
	existing := newSchedule(t, s)
	want := s.getSchedule(t, existing)
	for _, id := range []string{fresh, existing} {
		for _, w := range writes(id) {
			requireRefused(t, send(secretManage, w.method, w.path, w.body), http.StatusForbidden, "FORBIDDEN")
		}
	}
	require.Nil(t, s.getSchedule(t, fresh), "a manage token created a schedule")
	require.Equal(t, want, s.getSchedule(t, existing), "a manage token changed a schedule")

	// schedules: each write succeeds and takes effect.
	id := uniqueID("sched")
	w := writes(id)
	r := send(secretSchedules, w[0].method, w[0].path, strings.Replace(w[0].body, `"enabled":true`, `"enabled":false`, 1))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	require.NotNil(t, s.getSchedule(t, id))
	r = send(secretSchedules, http.MethodPatch, "/api/schedules/"+id, `{"cron":"0 0 2 1 *"}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "0 0 2 1 *", s.getSchedule(t, id).Cron)
	require.Equal(t, http.StatusOK, send(secretSchedules, w[2].method, w[2].path, "").status)
	require.True(t, s.getSchedule(t, id).Enabled)
	require.Equal(t, http.StatusOK, send(secretSchedules, w[3].method, w[3].path, "").status)
	require.False(t, s.getSchedule(t, id).Enabled)
	require.Equal(t, http.StatusNoContent, send(secretSchedules, w[4].method, w[4].path, "").status)
	require.Nil(t, s.getSchedule(t, id))
	s.requireHealthy(t)
}

// TestNamespacedTokenReachesNoOtherNamespace: a token limited to the
// namespace "tenant" meets every instance of "default" (where the admin
// made them) as not found, on every route that names an instance, and is
// refused outright when it selects "default"; nothing it sends changes the
// instance. Its lists hold nothing of "default", and what it creates lands
// in "tenant".
func TestNamespacedTokenReachesNoOtherNamespace(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	for _, rc := range routeCases() {
		if !strings.Contains(rc.pattern, "/instances/:id") {
			continue
		}
		path, body := rc.build(t, s)
		id := strings.Split(strings.TrimPrefix(path, "/api/workflows/approval/instances/"), "/")[0]
		// Settled first (waiting for its event), so that only a request
		// could move it.
		before := s.waitSettled(t, "approval", id, 30*time.Second)
		for _, selector := range []string{"", "?namespace=default"} {
			req := request{method: rc.method, path: path + selector, token: secretTenant}
			if body != "" {
				req.body = strings.NewReader(body)
			}
			resp := s.do(t, req)
			if selector == "" {
				requireRefused(t, resp, http.StatusNotFound, "INSTANCE_NOT_FOUND")
			} else {
				requireRefused(t, resp, http.StatusForbidden, "FORBIDDEN")
			}
		}
		after := s.getInstance(t, "approval", id)
		require.Equal(t, before.Status, after.Status, "%s %s changed the instance", rc.method, rc.pattern)
	}

	list := s.do(t, request{method: http.MethodGet, path: "/api/workflows/approval/instances", token: secretTenant})
	require.Equal(t, http.StatusOK, list.status, "body: %s", list.body)
	require.JSONEq(t, `{"instances":[],"hasNextPage":false}`, string(list.body))
	for _, p := range []string{"/api/workflows/approval/instances?namespace=default", "/api/workflows/approval/instances?namespace=other"} {
		requireRefused(t, s.do(t, request{method: http.MethodGet, path: p, token: secretTenant}), http.StatusForbidden, "FORBIDDEN")
	}
	created := s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances", token: secretTenant,
		body: strings.NewReader(`{"id":"tenant-made","params":{"name":"T"}}`)})
	require.Equal(t, http.StatusCreated, created.status, "body: %s", created.body)
	require.Contains(t, string(created.body), `"namespace":"tenant"`)
	require.Nil(t, s.getInstance(t, "hello", "tenant-made"), "the admin's default namespace does not see it")
	// Unscoped actions are not the tenant's.
	for _, r := range []request{
		{method: http.MethodPost, path: "/api/flows", body: strings.NewReader(flowJSON(uniqueID("flow"), "1.0.0"))},
		{method: http.MethodPost, path: "/api/_runner/tick", body: strings.NewReader(`{}`)},
		{method: http.MethodPost, path: "/api/schedules", body: strings.NewReader(`{"id":"t","workflowName":"hello","cron":"* * * * *"}`)},
		{method: http.MethodPut, path: "/api/queues/default", body: strings.NewReader(`{"maxRunning":1}`)},
		{method: http.MethodPost, path: "/api/workers/anyone/drain"},
	} {
		r.token = secretTenant
		requireRefused(t, s.do(t, r), http.StatusForbidden, "FORBIDDEN")
	}
	s.requireHealthy(t)
}
