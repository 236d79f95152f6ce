//go:build attack

package attack_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// secretDefault is a token limited to the namespace "default", with every
// action it may have: the other tenant of the namespace tests.
const secretDefault = "attack-default-tenant-secret"

// tenantArgs are the flags of the servers of the namespace tests: a token
// limited to "default" besides the one limited to "tenant", a trigger into
// "tenant" besides the one into "default", and a queue "tenant" may name.
var tenantArgs = []string{
	"--token", "deftenant:" + secretDefault + ":*@default",
	"--trigger", "POST /hooks/tenant=hello@tenant",
	"--namespace-queues", "tenant=tenant-bulk",
}

// tenantBackends is backends with tenantArgs.
func tenantBackends(t *testing.T) []*server {
	t.Helper()
	out := []*server{sqliteServer(t, tenantArgs...)}
	if err := postgresReachable(); err != nil {
		if os.Getenv(pgtest.EnvRequirePostgres) == "1" {
			t.Fatalf("Postgres is not reachable at %s: %v", pgtest.DatabaseURL(), err)
		}
		t.Logf("the Postgres cases are skipped: Postgres is not reachable (%v)", err)
		return out
	}
	return append(out, postgresServer(t, tenantArgs...))
}

// wireInstance is what the namespace tests read of an instance.
type wireInstance struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Priority  int    `json:"priority"`
	Details   struct {
		Status string `json:"status"`
		Error  *struct {
			Name    string `json:"name"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"details"`
	Children []struct {
		WorkflowName string `json:"workflowName"`
		ID           string `json:"id"`
	} `json:"children"`
}

// getAs reads an instance with a token and a namespace selector ("" for
// none); nil when it is not found.
func (s *server) getAs(t *testing.T, secret, ns, workflowName, id string) *wireInstance {
	t.Helper()
	path := "/api/workflows/" + workflowName + "/instances/" + id
	if ns != "" {
		path += "?namespace=" + ns
	}
	r := s.do(t, request{method: http.MethodGet, path: path, token: secret})
	if r.status == http.StatusNotFound {
		requireRefused(t, r, http.StatusNotFound, "INSTANCE_NOT_FOUND")
		return nil
	}
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var inst wireInstance
	require.NoError(t, json.Unmarshal(r.body, &inst))
	return &inst
}

// waitSettledAs polls an instance with a token until it is neither queued
// nor running.
func (s *server) waitSettledAs(t *testing.T, secret, ns, workflowName, id string) *wireInstance {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		inst := s.getAs(t, secret, ns, workflowName, id)
		require.NotNil(t, inst, "instance %s/%s in %q", workflowName, id, ns)
		if inst.Details.Status != "queued" && inst.Details.Status != "running" {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s/%s is still %s; server log:\n%s", workflowName, id, inst.Details.Status, tail(s.logs(), 4000))
		}
		<-tick.C
	}
}

// poll asks done every 100 ms until it holds, and fails the test with
// what after timeout. (The server is a black box: its API is all there is
// to wait on.)
func (s *server) poll(t *testing.T, timeout time.Duration, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; server log:\n%s", what, timeout, tail(s.logs(), 4000))
		}
		<-tick.C
	}
}

// askFlow is a flow whose one step invokes the demo workflow approval,
// which waits for its event.
func askFlow(id string) string {
	return fmt.Sprintf(`{"id":%q,"version":"1.0.0","initialStepId":"ask","steps":{"ask":{"id":"ask","type":"subflow","config":{"workflow":"approval"},"input":{"value":{"amount":7}},"outputKey":"answer"}},"output":"answer"}`, id)
}

// oldChildID is the id the engine once gave the child of an Invoke step,
// from its parent alone: what a caller who knows the parent's id works out.
func oldChildID(parentWorkflow, parentID string, run int, key string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d\x00%s", parentWorkflow, parentID, run, key))
	return fmt.Sprintf("%s-%d-%s", parentID, run, hex.EncodeToString(sum[:10]))
}

// TestChildStaysInItsParentsNamespace: the child a subflow step of a
// tenant's instance starts lives in the tenant's namespace. The other
// tenant neither reads it nor sends it the event that decides the parent,
// and cannot make the step fail by creating an instance with the id the
// parent's id alone gives (what child ids once were).
func TestChildStaysInItsParentsNamespace(t *testing.T) {
	t.Parallel()
	for _, s := range tenantBackends(t) {
		t.Run(s.name, func(t *testing.T) {
			flowID := uniqueID("ask")
			s.applyFlow(t, askFlow(flowID))
			parent := uniqueID("p")
			// The other tenant takes the id the parent alone gives.
			squat := s.do(t, request{method: http.MethodPost, path: "/api/workflows/approval/instances", token: secretDefault,
				body: strings.NewReader(fmt.Sprintf(`{"id":%q,"params":{"amount":1}}`, oldChildID(flowID, parent, 1, "ask")))})
			require.Equal(t, http.StatusCreated, squat.status, "body: %s", squat.body)

			r := s.do(t, request{method: http.MethodPost, path: "/api/workflows/" + flowID + "/instances", token: secretTenant,
				body: strings.NewReader(fmt.Sprintf(`{"id":%q}`, parent))})
			require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
			p := s.waitSettledAs(t, secretTenant, "", flowID, parent)
			require.Equal(t, "waiting", p.Details.Status, "the parent waits for its child: %+v", p.Details.Error)
			require.Len(t, p.Children, 1)
			childID := p.Children[0].ID
			require.NotEqual(t, oldChildID(flowID, parent, 1, "ask"), childID)

			child := s.waitSettledAs(t, secretTenant, "", "approval", childID)
			require.Equal(t, "tenant", child.Namespace)
			require.Equal(t, "waiting", child.Details.Status)
			for _, ns := range []string{"", "default"} {
				require.Nil(t, s.getAs(t, secretDefault, ns, "approval", childID), "the other tenant reads the child")
				require.Nil(t, s.getAs(t, secretAdmin, ns, "approval", childID), "default's selector finds the child")
			}
			ev := s.do(t, request{method: http.MethodPost, path: "/api/workflows/approval/instances/" + childID + "/events", token: secretDefault,
				body: strings.NewReader(`{"type":"approval","payload":{"approved":false}}`)})
			requireRefused(t, ev, http.StatusNotFound, "INSTANCE_NOT_FOUND")
			require.Equal(t, "waiting", s.getAs(t, secretTenant, "", "approval", childID).Details.Status, "the other tenant's event changed nothing")

			ev = s.do(t, request{method: http.MethodPost, path: "/api/workflows/approval/instances/" + childID + "/events", token: secretTenant,
				body: strings.NewReader(`{"type":"approval","payload":{"approved":true}}`)})
			require.Equal(t, http.StatusAccepted, ev.status, "body: %s", ev.body)
			s.poll(t, 30*time.Second, "the parent completes", func() bool {
				return s.getAs(t, secretTenant, "", flowID, parent).Details.Status == "complete"
			})
			s.requireHealthy(t)
		})
	}
}

// TestTriggerStaysInItsNamespace: a token limited to "tenant" with the
// create scope fires only tenant's trigger; default's creates nothing for
// it, and the other tenant cannot fire tenant's.
func TestTriggerStaysInItsNamespace(t *testing.T) {
	t.Parallel()
	for _, s := range tenantBackends(t) {
		t.Run(s.name, func(t *testing.T) {
			before := s.countInstances(t, "hello")
			for _, tc := range []struct{ secret, path string }{
				{secretTenant, "/hooks/hello"},
				{secretTenant, "/hooks/hello?namespace=tenant"},
				{secretDefault, "/hooks/tenant"},
			} {
				r := s.do(t, request{method: http.MethodPost, path: tc.path, token: tc.secret, body: strings.NewReader(`{"name":"Mallory"}`)})
				requireRefused(t, r, http.StatusForbidden, "FORBIDDEN")
			}
			require.Equal(t, before, s.countInstances(t, "hello"), "a refused trigger created an instance in default")

			r := s.do(t, request{method: http.MethodPost, path: "/hooks/tenant", token: secretTenant, body: strings.NewReader(`{"name":"T"}`)})
			require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
			var out struct {
				InstanceID string `json:"instanceId"`
			}
			require.NoError(t, json.Unmarshal(r.body, &out))
			inst := s.getAs(t, secretTenant, "", "hello", out.InstanceID)
			require.NotNil(t, inst)
			require.Equal(t, "tenant", inst.Namespace)
			require.Nil(t, s.getAs(t, secretAdmin, "", "hello", out.InstanceID))
			s.requireHealthy(t)
		})
	}
}

// TestNamespacedTokenReadsNothingOfEveryNamespace: a token limited to a
// namespace is refused every route that spans every namespace, the reads
// too: a schedule's params and last instance, the workers, the queues'
// running counts, the lifecycle events. Nothing of them is in the answer.
func TestNamespacedTokenReadsNothingOfEveryNamespace(t *testing.T) {
	t.Parallel()
	for _, s := range tenantBackends(t) {
		t.Run(s.name, func(t *testing.T) {
			sched := uniqueID("payroll")
			r := s.call(t, http.MethodPost, "/api/schedules", fmt.Sprintf(`{"id":%q,"workflowName":"hello","cron":"0 0 1 1 *","params":{"name":"salary-of-default"},"enabled":false}`, sched))
			require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
			r = s.call(t, http.MethodPut, "/api/queues/shared", `{"maxRunning":5}`)
			require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
			workerPath, _ := onWorker("")(t, s)
			for _, path := range []string{
				"/api/schedules", "/api/schedules/" + sched, "/api/workers", workerPath,
				"/api/queues", "/api/queues/shared", "/api/events", "/api/events/stream",
			} {
				for _, secret := range []string{secretTenant, secretDefault} {
					for _, selector := range []string{"", "?namespace=tenant", "?namespace=default"} {
						resp := s.do(t, request{method: http.MethodGet, path: path + selector, token: secret})
						requireRefused(t, resp, http.StatusForbidden, "FORBIDDEN")
						require.NotContains(t, string(resp.body), "salary-of-default")
						require.NotContains(t, string(resp.body), sched)
					}
				}
				if path != "/api/events/stream" {
					require.Equal(t, http.StatusOK, s.call(t, http.MethodGet, path, "").status, "the admin reads %s", path)
				}
			}
			s.requireHealthy(t)
		})
	}
}

// TestNamespacedCreatesKeepToTheirQueues: a token limited to a namespace
// puts its instances on their workflow's queue or on one its namespace is
// given (--namespace-queues), at a priority of at most 0: a shared queue's
// limit and the claim order are every namespace's. Anything else is 403
// and creates nothing.
func TestNamespacedCreatesKeepToTheirQueues(t *testing.T) {
	t.Parallel()
	for _, s := range tenantBackends(t) {
		t.Run(s.name, func(t *testing.T) {
			id := uniqueID("q")
			for _, body := range []string{
				fmt.Sprintf(`{"id":%q,"queue":"shared"}`, id),
				fmt.Sprintf(`{"id":%q,"priority":1000}`, id),
				fmt.Sprintf(`{"id":%q,"queue":"tenant-bulk","priority":1}`, id),
			} {
				r := s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances", token: secretTenant, body: strings.NewReader(body)})
				requireRefused(t, r, http.StatusForbidden, "FORBIDDEN")
				r = s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances/batch", token: secretTenant,
					body: strings.NewReader(`{"instances":[` + body + `]}`)})
				requireRefused(t, r, http.StatusForbidden, "FORBIDDEN")
				require.Nil(t, s.getAs(t, secretTenant, "", "hello", id), "a refused create wrote the instance")
			}
			r := s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances", token: secretTenant,
				body: strings.NewReader(fmt.Sprintf(`{"id":%q,"queue":"tenant-bulk","priority":-5}`, id))})
			require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
			inst := s.getAs(t, secretTenant, "", "hello", id)
			require.Equal(t, "tenant-bulk", inst.Queue)
			require.Equal(t, -5, inst.Priority)
			s.requireHealthy(t)
		})
	}
}

// TestScheduledFiringCannotBeTakenFirst: a tenant who creates, in its own
// namespace, instances with the ids a schedule's next firings once had
// (the schedule id and the due time) neither stops a firing nor makes it
// vanish: the schedule starts its instance in default at its due time.
func TestScheduledFiringCannotBeTakenFirst(t *testing.T) {
	t.Parallel()
	for _, s := range tenantBackends(t) {
		t.Run(s.name, func(t *testing.T) {
			sched := uniqueID("m")
			next := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
			var squatted []string
			for i := range 3 {
				id := sched + "-" + next.Add(time.Duration(i)*time.Minute).Format("20060102T150405Z")
				r := s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances", token: secretTenant,
					body: strings.NewReader(fmt.Sprintf(`{"id":%q,"params":{"name":"squatter"}}`, id))})
				require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
				squatted = append(squatted, id)
			}
			r := s.call(t, http.MethodPost, "/api/schedules", fmt.Sprintf(`{"id":%q,"workflowName":"hello","cron":"* * * * *","params":{"name":"cron"}}`, sched))
			require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)

			// A due time comes within a minute; the scheduler polls every
			// --poll-interval.
			var last string
			s.poll(t, 150*time.Second, "the schedule fires", func() bool {
				var info struct {
					LastInstanceID string `json:"lastInstanceId"`
				}
				r := s.call(t, http.MethodGet, "/api/schedules/"+sched, "")
				require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
				require.NoError(t, json.Unmarshal(r.body, &info))
				last = info.LastInstanceID
				return last != ""
			})
			require.NotContains(t, squatted, last)
			inst := s.getAs(t, secretAdmin, "", "hello", last)
			require.NotNil(t, inst, "the firing's instance %s exists in default", last)
			require.Equal(t, "default", inst.Namespace)
			for _, id := range squatted {
				require.NotNil(t, s.getAs(t, secretTenant, "", "hello", id), "the squatter's %s is left alone", id)
			}
			s.requireHealthy(t)
		})
	}
}
