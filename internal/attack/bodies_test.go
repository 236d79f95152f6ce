//go:build attack

package attack_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// codePayloadTooDeep is the code of a body nested deeper than the payload
// depth limit (workflow.MaxPayloadDepth).
const codePayloadTooDeep = "PAYLOAD_TOO_DEEP"

// nested returns depth nested arrays around 1.
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth)
}

// bodyTarget is a route that takes a JSON body with a payload in it, and
// how to wrap a payload into its body.
type bodyTarget struct {
	name   string
	path   func(t *testing.T, s *server) string
	body   func(id, payload string) string
	listed string // the workflow whose instances a refused body must not add to
}

func bodyTargets() []bodyTarget {
	return []bodyTarget{
		{"create", func(*testing.T, *server) string { return "/api/workflows/hello/instances" },
			func(id, p string) string { return fmt.Sprintf(`{"id":%q,"params":%s}`, id, p) }, "hello"},
		{"batch", func(*testing.T, *server) string { return "/api/workflows/hello/instances/batch" },
			func(id, p string) string { return fmt.Sprintf(`{"instances":[{"id":%q,"params":%s}]}`, id, p) }, "hello"},
		{"event", func(t *testing.T, s *server) string {
			return "/api/workflows/approval/instances/" + newApproval(t, s) + "/events"
		}, func(_, p string) string { return fmt.Sprintf(`{"type":"approval","payload":%s}`, p) }, ""},
		{"schedule", func(*testing.T, *server) string { return "/api/schedules" },
			func(id, p string) string {
				return fmt.Sprintf(`{"id":%q,"workflowName":"hello","cron":"0 0 1 1 *","enabled":false,"params":%s}`, id, p)
			}, ""},
		{"flow", func(*testing.T, *server) string { return "/api/flows" },
			func(id, p string) string {
				return fmt.Sprintf(`{"id":%q,"version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"set","config":{"values":{"v":{"value":%s}}}}}}`, id, p)
			}, ""},
		{"trigger", func(*testing.T, *server) string { return "/hooks/hello" },
			func(_, p string) string { return p }, "hello"},
	}
}

// TestBadBodies sends bodies too deep, too big and malformed to every route
// that takes one, on each backend: each is refused with its status and code,
// nothing is written, and the server goes on answering.
func TestBadBodies(t *testing.T) {
	t.Parallel()
	for _, s := range backends(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, bt := range bodyTargets() {
				t.Run(bt.name, func(t *testing.T) {
					bad := []struct {
						name    string
						payload string
						status  int
						codes   []string
					}{
						{"depth1001", nested(1001), 400, []string{codePayloadTooDeep}},
						{"depth5000", nested(5000), 400, []string{codePayloadTooDeep}},
						// With the body around it, 9999 levels pass encoding/json's limit of
						// 10000 on some routes, which refuse it as INVALID_REQUEST (a flow
						// definition as INVALID_FLOW).
						{"depth9999", nested(9999), 400, []string{codePayloadTooDeep, "INVALID_REQUEST", "INVALID_FLOW"}},
						// Deeper than encoding/json's own limit of 10000.
						{"depth20000", nested(20000), 400, []string{codePayloadTooDeep, "INVALID_REQUEST", "INVALID_FLOW"}},
						{"objects1500", strings.Repeat(`{"a":`, 1500) + "1" + strings.Repeat("}", 1500), 400, []string{codePayloadTooDeep}},
						{"over1MiB", `"` + strings.Repeat("x", 1<<20+10<<10) + `"`, 413, []string{"PAYLOAD_TOO_LARGE"}},
						{"bodyOverLimit", `"` + strings.Repeat("x", 2<<20) + `"`, 413, []string{"PAYLOAD_TOO_LARGE"}},
					}
					for _, b := range bad {
						t.Run(b.name, func(t *testing.T) {
							id := uniqueID("body")
							before := -1
							if bt.listed != "" {
								before = s.countInstances(t, bt.listed)
							}
							path := bt.path(t, s)
							r := s.call(t, http.MethodPost, path, bt.body(id, b.payload))
							requireRefused(t, r, b.status, b.codes...)
							s.requireHealthy(t)
							if bt.listed != "" {
								require.Equal(t, before, s.countInstances(t, bt.listed), "a refused body created an instance")
								s.requireNoInstance(t, "hello", id)
							}
							switch bt.name {
							case "schedule":
								requireRefused(t, s.call(t, http.MethodGet, "/api/schedules/"+id, ""), 404, "SCHEDULE_NOT_FOUND")
							case "flow":
								requireRefused(t, s.call(t, http.MethodGet, "/api/flows/"+id, ""), 404, "FLOW_NOT_FOUND")
							}
						})
					}
				})
			}

			malformed := []struct{ name, contentType, body string }{
				{"invalidUTF8InString", "application/json", "{\"id\":\"%s\",\"params\":{\"name\":\"\xff\xfe\"}}"},
				{"invalidUTF8InKey", "application/json", "{\"id\":\"%s\",\"params\":{\"\xc3\x28\":1}}"},
				{"loneSurrogate", "application/json", `{"id":"%s","params":{"name":"\udc00"}}`},
				{"nulInString", "application/json", `{"id":"%s","params":{"name":"a\u0000b"}}`},
				{"truncated", "application/json", `{"id":"%s","params":{"name":"Ad`},
				{"trailingGarbage", "application/json", `{"id":"%s","params":{}} {"id":"x"}`},
				{"trailingBytes", "application/json", `{"id":"%s"}` + "\x00garbage"},
				{"unknownField", "application/json", `{"id":"%s","parms":{}}`},
				{"wrongType", "application/json", `{"id":"%s","params":{},"extra":1}`},
				{"idNotString", "application/json", `{"id":["%s"]}`},
				{"array", "application/json", `[{"id":"%s"}]`},
				{"form", "application/x-www-form-urlencoded", `id=%s&params=1`},
				{"xml", "application/xml", `<create id="%s"/>`},
				{"bom", "application/json", "\xef\xbb\xbf{\"id\":\"%s\"}"},
				{"nan", "application/json", `{"id":"%s","params":NaN}`},
				{"hugeNumber", "application/json", `{"id":"%s","params":1e999999}`},
				{"duplicateID", "application/json", `{"id":"%s","id":"../x"}`},
			}
			t.Run("malformed", func(t *testing.T) {
				for _, m := range malformed {
					t.Run(m.name, func(t *testing.T) {
						before := s.countInstances(t, "hello")
						id := uniqueID("bad")
						r := s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances", token: secretAdmin,
							body: strings.NewReader(fmt.Sprintf(m.body, id)), header: map[string]string{"Content-Type": m.contentType}})
						// Every one is refused alike on both backends; the id is
						// what is wrong only where the body says "id" twice.
						code := "INVALID_REQUEST"
						if m.name == "duplicateID" {
							code = "INVALID_INSTANCE_ID"
						}
						requireRefused(t, r, 400, code)
						s.requireNoInstance(t, "hello", id)
						require.Equal(t, before, s.countInstances(t, "hello"))
					})
				}
				s.requireHealthy(t)
			})

			t.Run("crossOrigin", func(t *testing.T) {
				id := uniqueID("cors")
				r := s.do(t, request{method: http.MethodPost, path: "/api/workflows/hello/instances", token: secretAdmin,
					body:   strings.NewReader(fmt.Sprintf(`{"id":%q}`, id)),
					header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}})
				requireRefused(t, r, 403, "FORBIDDEN")
				s.requireNoInstance(t, "hello", id)
			})
		})
	}
}

// TestSlowBodyWithoutToken trickles a body without a token: the server must
// answer 401 at once, without waiting for the body.
func TestSlowBodyWithoutToken(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	for _, path := range []string{"/api/workflows/hello/instances", "/api/flows", "/hooks/hello"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"params\":", path, strings.TrimPrefix(s.url, "http://"))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, "%s: no answer within 3 s to a slow body without a token", path)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
	}
	s.requireHealthy(t)
}

// TestSlowBodyWithToken trickles a body with a valid token, a byte every
// 200 ms: the server's body deadline (--body-timeout 1s) must cut
// it off with 408 REQUEST_TIMEOUT within the deadline and some slack, and
// create nothing.
func TestSlowBodyWithToken(t *testing.T) {
	t.Parallel()
	const deadline = time.Second
	s := sqliteServer(t, "--body-timeout", deadline.String())
	before := s.countInstances(t, "hello")
	host := strings.TrimPrefix(s.url, "http://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /api/workflows/hello/instances HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"params\":", host, secretAdmin)
	require.NoError(t, err)
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Trickle a byte every 200 ms until the server gives up on us or
		// the test ends.
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	elapsed := time.Since(start)
	require.NoError(t, err, "no answer to a slow body within 10 s (body deadline %s)", deadline)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	requireRefused(t, &response{status: resp.StatusCode, header: resp.Header, body: data}, http.StatusRequestTimeout, "REQUEST_TIMEOUT")
	t.Logf("408 after %s", elapsed.Round(time.Millisecond))
	require.GreaterOrEqual(t, elapsed, deadline-100*time.Millisecond, "cut off before the body deadline")
	require.Less(t, elapsed, deadline+2*time.Second, "the server held a slow body for %s with a %s body deadline", elapsed, deadline)
	s.requireHealthy(t)
	require.Equal(t, before, s.countInstances(t, "hello"), "a body cut off created an instance")
}

// TestIDsAndCursors sends invalid ids, event types, names, cursors and page
// sizes: each is a 4xx with a code, never a 500, and nothing is created.
func TestIDsAndCursors(t *testing.T) {
	t.Parallel()
	for _, s := range backends(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			target := newApproval(t, s)
			require.Equal(t, "waiting", s.waitSettled(t, "approval", target, 10*time.Second).Status)
			before := s.countInstances(t, "hello")
			badIDs := []string{
				strings.Repeat("a", 101), strings.Repeat("a", 5000), "../x", "..", ".", "a/b", "a b", "é", "日本",
				"a\x00b", "\x00", "-leading", "a\nb", "a%00b", "%2e%2e", "a;drop table workflow_instance", "a'b", `a"b`, "a\\b", "\u202e",
			}
			for _, id := range badIDs {
				r := s.call(t, http.MethodPost, "/api/workflows/hello/instances", fmt.Sprintf(`{"id":%s}`, jsonString(id)))
				requireRefused(t, r, 400, "INVALID_INSTANCE_ID")
				r = s.call(t, http.MethodPost, "/api/workflows/hello/instances/batch", fmt.Sprintf(`{"instances":[{"id":"fine-%s"},{"id":%s}]}`, uniqueID("b"), jsonString(id)))
				requireRefused(t, r, 400, "INVALID_INSTANCE_ID")
				// In the path: escaped, so the router sees one segment.
				for _, suffix := range []string{"", "/history", "/pause", "/events"} {
					method := http.MethodGet
					body := ""
					if suffix == "/pause" || suffix == "/events" {
						method = http.MethodPost
					}
					if suffix == "/events" {
						body = `{"type":"approval"}`
					}
					r := s.call(t, method, "/api/workflows/hello/instances/"+url.PathEscape(id)+suffix, body)
					require.Contains(t, []int{400, 404}, r.status, "%q%s: %s", id, suffix, r.body)
					require.Contains(t, []string{"INVALID_INSTANCE_ID", "INVALID_REQUEST", "INSTANCE_NOT_FOUND", "NOT_FOUND"}, r.errorCode(), "%q%s: %s", id, suffix, r.body)
				}
			}
			// Raw escapes the client would not produce.
			for _, raw := range []string{"a%00b", "%2e%2e%2fx", "%ff", "%zz", "..%2f..%2fapi", "%c0%ae%c0%ae", "a%", "%%"} {
				r := s.raw(t, http.MethodGet, "/api/workflows/hello/instances/"+raw, "")
				require.Contains(t, []int{400, 404}, r.status, "%q: %s", raw, r.body)
				if r.header.Get("Content-Type") == "application/json" {
					require.NotEmpty(t, r.errorCode(), "%q: %s", raw, r.body)
				} else {
					// net/http refuses a request target it cannot parse before
					// any handler runs, in plain text.
					require.Equal(t, 400, r.status, "%q: %s", raw, r.body)
				}
			}
			require.Equal(t, before, s.countInstances(t, "hello"), "refused ids created instances")

			for _, typ := range []string{"", strings.Repeat("t", 101), "../x", "a b", "é", "a\x00b", "-x", "a/b", "a%00"} {
				r := s.call(t, http.MethodPost, "/api/workflows/approval/instances/"+target+"/events", fmt.Sprintf(`{"type":%s,"payload":{}}`, jsonString(typ)))
				requireRefused(t, r, 400, "INVALID_EVENT_TYPE", "INVALID_REQUEST")
			}
			require.Equal(t, "waiting", s.getInstance(t, "approval", target).Status, "refused events left the instance alone")

			for _, name := range []string{"%00", "..", "a%2Fb", strings.Repeat("w", 65), "é", "-x"} {
				r := s.raw(t, http.MethodGet, "/api/workflows/"+name+"/instances", "")
				require.Contains(t, []int{400, 404}, r.status, "%q: %s", name, r.body)
				require.NotEmpty(t, r.errorCode(), "%q: %s", name, r.body)
				r = s.raw(t, http.MethodPost, "/api/workflows/"+name+"/instances", `{}`)
				require.Contains(t, []int{400, 404}, r.status, "%q: %s", name, r.body)
				require.NotEmpty(t, r.errorCode(), "%q: %s", name, r.body)
			}

			// A real cursor, to truncate and tamper with.
			for range 3 {
				newApproval(t, s)
			}
			r := s.call(t, http.MethodGet, "/api/workflows/approval/instances?pageSize=1", "")
			require.Equal(t, 200, r.status, "%s", r.body)
			var page struct {
				NextCursor string `json:"cursor"`
			}
			require.NoError(t, jsonUnmarshal(r.body, &page))
			require.NotEmpty(t, page.NextCursor)
			real := page.NextCursor
			cursors := []string{
				"!!!", "%00", "e30", "bnVsbA", "W10", real[:len(real)/2], real[:len(real)-1] + "!", real + "=", real + "%00",
				b64(`{"u":"2026-01-01T00:00:00Z","w":"x' OR '1'='1","i":"\u0000"}`), // forged but well formed: a page, not an error
				b64(`{"u":"0001-01-01T00:00:00Z"}`), b64(`{"u":"not a time"}`), b64(`{"u":"99999-01-01T00:00:00Z"}`),
				b64(strings.Repeat("[", 5000)), strings.Repeat("A", 10000),
			}
			for i, c := range cursors {
				t.Run(fmt.Sprintf("cursor%d", i), func(t *testing.T) {
					for _, path := range []string{"/api/workflows/approval/instances?cursor=", "/api/workflows/approval/instances/" + target + "/history?cursor=", "/api/flows?cursor=", "/api/schedules?cursor="} {
						r := s.call(t, http.MethodGet, path+url.QueryEscape(c), "")
						if r.status == 200 {
							continue // a forged cursor that decodes is just a position
						}
						require.Equal(t, 400, r.status, "%s%s: %s", path, c, r.body)
						requireRefused(t, r, 400, "INVALID_REQUEST")
					}
				})
			}
			for _, q := range []string{"pageSize=-1", "pageSize=0", "pageSize=100000", "pageSize=abc", "pageSize=1&pageSize=2", "status=bogus", "nope=1", "cursor=a&cursor=b", "run=-1", "run=abc"} {
				for _, path := range []string{"/api/workflows/approval/instances?", "/api/workflows/approval/instances/" + target + "/history?"} {
					r := s.call(t, http.MethodGet, path+q, "")
					require.Equal(t, 400, r.status, "%s%s: %s", path, q, r.body)
					requireRefused(t, r, 400, "INVALID_REQUEST")
				}
			}
			s.requireHealthy(t)
		})
	}
}

// unportable are payloads that are valid JSON, or nearly, that one backend
// could not store or Go could not decode: each is refused with 400
// INVALID_REQUEST on both backends alike (workflow.ValidatePayload). Each is
// an object that also says "approved":false, so that an approval event
// stored by mistake would show in the instance's output.
var unportable = []struct{ name, payload string }{
	{"invalidUTF8InString", "{\"approved\":false,\"v\":\"\xff\xfe\"}"},
	{"invalidUTF8InKey", "{\"approved\":false,\"\xc3\x28\":1}"},
	{"truncatedUTF8", "{\"approved\":false,\"v\":\"\xe6\x97\"}"},
	{"overlongUTF8", "{\"approved\":false,\"v\":\"\xc0\xae\"}"},
	{"nulInString", `{"approved":false,"v":"a\u0000b"}`},
	{"nulInKey", `{"approved":false,"a\u0000":1}`},
	{"nulNested", `{"approved":false,"a":[{"b":["\u0000"]}]}`},
	{"loneHighSurrogate", `{"approved":false,"v":"\ud800"}`},
	{"loneLowSurrogate", `{"approved":false,"v":"x\udc00y"}`},
	{"reversedSurrogates", `{"approved":false,"v":"\udc00\ud800"}`},
	{"surrogateInKey", `{"approved":false,"\udbff":1}`},
	{"numberPastFloat64", `{"approved":false,"v":1e999999}`},
	{"negativePastFloat64", `{"approved":false,"v":-1e400}`},
	{"justPastFloat64", `{"approved":false,"v":1.8e308}`},
}

// TestUnportablePayloads sends the unportable payloads as params (create,
// batch, trigger, schedule), event payloads and flow values to both
// backends: every one is 400 INVALID_REQUEST, nothing is written, and the
// same values written portably (an escaped backslash, a surrogate pair, a
// big number float64 holds) are accepted.
func TestUnportablePayloads(t *testing.T) {
	t.Parallel()
	for _, s := range backends(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, bt := range bodyTargets() {
				t.Run(bt.name, func(t *testing.T) {
					var approval string
					path := func() string { return bt.path(t, s) }
					if bt.name == "event" {
						p := bt.path(t, s) // one waiting instance for every event
						approval = strings.TrimSuffix(strings.TrimPrefix(p, "/api/workflows/approval/instances/"), "/events")
						require.Equal(t, "waiting", s.waitSettled(t, "approval", approval, 10*time.Second).Status)
						path = func() string { return p }
					}
					before := -1
					if bt.listed != "" {
						before = s.countInstances(t, bt.listed)
					}
					for _, u := range unportable {
						id := uniqueID("unportable")
						r := s.call(t, http.MethodPost, path(), bt.body(id, u.payload))
						requireRefused(t, r, http.StatusBadRequest, "INVALID_REQUEST")
						switch bt.name {
						case "create", "batch", "trigger":
							s.requireNoInstance(t, "hello", id)
						case "schedule":
							requireRefused(t, s.call(t, http.MethodGet, "/api/schedules/"+id, ""), http.StatusNotFound, "SCHEDULE_NOT_FOUND")
						case "flow":
							requireRefused(t, s.call(t, http.MethodGet, "/api/flows/"+id, ""), http.StatusNotFound, "FLOW_NOT_FOUND")
						}
					}
					if bt.listed != "" {
						require.Equal(t, before, s.countInstances(t, bt.listed), "a refused payload created an instance")
					}
					// Portable spellings of the same things are stored.
					for _, ok := range []string{`{"approved":true,"v":"a\\u0000b \ud83d\ude00 é","n":1.7e308,"k":"\\udc00"}`} {
						id := uniqueID("portable")
						r := s.call(t, http.MethodPost, path(), bt.body(id, ok))
						require.Equal(t, 2, r.status/100, "%s: body: %s", bt.name, r.body)
					}
					if bt.name == "event" {
						// Had a refused event been stored, the instance would have
						// taken it ("approved":false) before the portable one.
						inst := s.waitSettled(t, "approval", approval, 10*time.Second)
						require.Equal(t, "complete", inst.Status, "%+v", inst.Error)
						require.JSONEq(t, `{"approved":true,"amount":1}`, string(inst.Output))
					}
				})
			}
			s.requireHealthy(t)
		})
	}
}

// TestUnportableStepResults has an http step fetch each unportable payload
// as its JSON answer, on both backends: the instance settles within
// seconds (no checkpoint retried forever), alike on both backends. A \u0000
// or a number past float64 fails the step; invalid UTF-8 and lone
// surrogates are read by Go's decoder as U+FFFD, so the step completes.
func TestUnportableStepResults(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err, "listening on 127.0.0.2 (the allow-listed upstream)")
	byName := map[string]string{}
	for _, u := range unportable {
		byName[u.name] = u.payload
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(byName[r.URL.Query().Get("p")]))
	})}}
	srv.Start()
	t.Cleanup(srv.Close)

	const flowID = "unportable-result"
	outcomes := map[string]map[string]string{} // payload → backend → status
	var mu sync.Mutex
	t.Run("backends", func(t *testing.T) {
		for _, s := range backends(t) {
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				s.applyFlow(t, httpFlow(flowID, "http://"+l.Addr().String()+"/result?p=${p}"))
				for _, u := range unportable {
					inst := s.runFlow(t, flowID, fmt.Sprintf(`{"p":%q}`, u.name), 10*time.Second)
					mu.Lock()
					if outcomes[u.name] == nil {
						outcomes[u.name] = map[string]string{}
					}
					outcomes[u.name][s.name] = inst.Status
					mu.Unlock()
					if strings.Contains(u.payload, `\u0000`) || strings.Contains(u.name, "PastFloat64") {
						require.Equal(t, "errored", inst.Status, "%s: output %.200s", u.name, inst.Output)
						t.Logf("%s: %s", u.name, inst.Error.Message)
					}
				}
				s.requireHealthy(t)
			})
		}
	})
	for name, byBackend := range outcomes {
		if pg, ok := byBackend["postgres"]; ok {
			require.Equal(t, byBackend["sqlite"], pg, "%s: the backends disagree", name)
		}
	}
}
