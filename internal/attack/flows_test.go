//go:build attack

package attack_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// canary is a loopback server that no refused request may reach.
type canary struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

func newCanary(t *testing.T) *canary {
	t.Helper()
	c := &canary{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"reached":"the canary"}`))
	}))
	t.Cleanup(c.Close)
	_, c.port, _ = net.SplitHostPort(c.Listener.Addr().String())
	return c
}

// newUpstream starts the allow-listed upstream on 127.0.0.2 (the servers
// run with --http-allow 127.0.0.2): /ok answers, /redirect?to= redirects.
func newUpstream(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.2:0")
	require.NoError(t, err, "listening on 127.0.0.2 (the allow-listed upstream)")
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true}`))
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/deep":
			depth, _ := strconv.Atoi(r.URL.Query().Get("depth"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(nested(depth)))
		default:
			http.NotFound(w, r)
		}
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return "http://" + l.Addr().String()
}

// httpFlow is a flow of one http step to url, never retried.
func httpFlow(id, rawURL string) string {
	return fmt.Sprintf(`{"id":%q,"version":"1.0.0","initialStepId":"call","steps":{"call":{"id":"call","type":"http",
		"config":{"url":%s,"timeout":"5 seconds"},"retries":{"limit":0}}}}`, id, jsonString(rawURL))
}

// applyRefused applies a flow that must be refused with INVALID_FLOW and a
// problem at path, and checks that it was not stored.
func (s *server) applyRefused(t *testing.T, id, definition, problemPath string) string {
	t.Helper()
	r := s.do(t, request{method: http.MethodPost, path: "/api/flows", token: secretFlows, body: strings.NewReader(definition)})
	requireRefused(t, r, http.StatusBadRequest, "INVALID_FLOW")
	var body struct {
		Error struct {
			Problems []struct{ Path, Message string } `json:"problems"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &body))
	found := ""
	for _, p := range body.Error.Problems {
		if p.Path == problemPath {
			found = p.Message
		}
	}
	require.NotEmpty(t, found, "no problem at %s: %s", problemPath, r.body)
	requireRefused(t, s.call(t, http.MethodGet, "/api/flows/"+id, ""), http.StatusNotFound, "FLOW_NOT_FOUND")
	return found
}

// applyFlow applies a flow that must be accepted.
func (s *server) applyFlow(t *testing.T, definition string) {
	t.Helper()
	r := s.do(t, request{method: http.MethodPost, path: "/api/flows", token: secretFlows, body: strings.NewReader(definition)})
	require.Contains(t, []int{200, 201}, r.status, "body: %s", r.body)
}

// runFlow creates an instance of a flow with params and waits for it to settle.
func (s *server) runFlow(t *testing.T, flowID, params string, timeout time.Duration) *instance {
	t.Helper()
	id := uniqueID("run")
	r := s.call(t, http.MethodPost, "/api/workflows/"+flowID+"/instances", fmt.Sprintf(`{"id":%q,"params":%s}`, id, params))
	require.Equal(t, http.StatusCreated, r.status, "body: %s", r.body)
	return s.waitSettled(t, flowID, id, timeout)
}

// TestSSRF aims http steps at internal addresses. IP literals are refused
// when the flow is applied; what only the dial can tell (templates, names,
// encodings, redirects) fails the instance with ADDRESS_NOT_ALLOWED, or with
// a resolution error for encodings no resolver reads as an address. No
// request reaches the canary, and nothing leaves loopback: every target that
// is not loopback is a literal refused at apply time.
func TestSSRF(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	c := newCanary(t)
	up := newUpstream(t)
	p := c.port

	t.Run("LiteralsRefusedAtApply", func(t *testing.T) {
		for i, u := range []string{
			"http://127.0.0.1:" + p + "/", "http://127.0.0.3:" + p + "/admin", "http://0.0.0.0:" + p + "/", "http://[::]:" + p + "/",
			"http://[::1]:" + p + "/", "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
			"http://10.0.0.1/", "http://10.255.255.53/", "http://172.16.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
			"http://100.100.100.200/latest/meta-data", "http://[::ffff:127.0.0.1]:" + p + "/", "http://[::ffff:169.254.169.254]/",
			"http://[::ffff:a9fe:a9fe]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::1]/", "http://[::127.0.0.1]:" + p + "/",
			"http://[fe80::1%25eth0]/", "http://[fe80::1%25lo]:" + p + "/", "http://[::1%25lo]:" + p + "/", "http://[fc00::1]/",
			"http://evil@127.0.0.1:" + p + "/", "http://user:pass@169.254.169.254/", "http://allowed.example@10.0.0.1/",
			"https://127.0.0.1:" + p + "/", "http://224.0.0.1/", "http://255.255.255.255/", "http://240.0.0.1/",
			"file:///etc/passwd", "gopher://127.0.0.1:" + p + "/", "ftp://10.0.0.1/", "//127.0.0.1/",
		} {
			id := fmt.Sprintf("ssrf-literal-%d", i)
			msg := s.applyRefused(t, id, httpFlow(id, u), "steps.call.config.url")
			t.Logf("%s: %s", u, msg)
		}
		s.requireHealthy(t)
	})

	t.Run("RefusedAtDial", func(t *testing.T) {
		s.applyFlow(t, httpFlow("ssrf-probe", "${raw:target}"))
		// The allow-listed upstream answers: the probe works.
		ok := s.runFlow(t, "ssrf-probe", fmt.Sprintf(`{"target":%q}`, up+"/ok"), 15*time.Second)
		require.Equal(t, "complete", ok.Status, "the allow-listed upstream must be reachable: %+v", ok.Error)

		refused := []string{
			"http://127.0.0.1:" + p + "/", "http://0.0.0.0:" + p + "/", "http://[::1]:" + p + "/", "http://[::]:" + p + "/",
			"http://[::ffff:127.0.0.1]:" + p + "/", "http://[::ffff:7f00:1]:" + p + "/", "http://[::1%25lo]:" + p + "/",
			"http://evil@127.0.0.1:" + p + "/", "http://evil:pw@127.0.0.1:" + p + "/", "http://127.0.0.1:" + p + "#@127.0.0.2/",
			// Names from /etc/hosts only: any other name would be sent to DNS.
			"http://localhost:" + p + "/", "http://LocalHost:" + p + "/",
			up + "/redirect?to=" + url.QueryEscape("http://127.0.0.1:"+p+"/"),
			up + "/redirect?to=" + url.QueryEscape("http://localhost:"+p+"/"),
			up + "/redirect?to=" + url.QueryEscape("http://[::1]:"+p+"/"),
			up + "/redirect?to=" + url.QueryEscape("http://[::ffff:127.0.0.1]:"+p+"/"),
			up + "/redirect?to=" + url.QueryEscape("http://0.0.0.0:"+p+"/"),
			up + "/redirect?to=" + url.QueryEscape(up+"/redirect?to="+url.QueryEscape("http://127.0.0.1:"+p+"/")),
		}
		for _, target := range refused {
			inst := s.runFlow(t, "ssrf-probe", fmt.Sprintf(`{"target":%q}`, target), 15*time.Second)
			require.Equal(t, "errored", inst.Status, "%s", target)
			require.NotNil(t, inst.Error, target)
			require.Equal(t, "ADDRESS_NOT_ALLOWED", inst.Error.Name, "%s: %s", target, inst.Error.Message)
		}

		// Encodings the pure Go resolver does not read as addresses (an
		// all-numeric name is never sent to DNS): unresolvable, never reached.
		// A resolver that read them (inet_aton) would yield 127.0.0.1, which
		// the dial refuses; hex forms would be sent to DNS, so they are tested
		// at package level only (TestSSRFPackageLevel).
		for _, target := range []string{
			"http://2130706433:" + p + "/", "http://0177.0.0.1:" + p + "/", "http://127.1:" + p + "/", "http://0:" + p + "/",
			"http://127.000.000.001:" + p + "/", "http://017700000001:" + p + "/", "http://127.0.0.1.:" + p + "/",
		} {
			inst := s.runFlow(t, "ssrf-probe", fmt.Sprintf(`{"target":%q}`, target), 15*time.Second)
			require.Equal(t, "errored", inst.Status, "%s", target)
			require.NotNil(t, inst.Error, target)
			require.Contains(t, []string{"ADDRESS_NOT_ALLOWED", "HTTP_REQUEST_FAILED"}, inst.Error.Name, "%s: %s", target, inst.Error.Message)
			t.Logf("%s: %s %s", target, inst.Error.Name, inst.Error.Message)
		}
		// Schemes other than http and https, from a template and by redirect.
		for _, target := range []string{"file:///etc/passwd", "gopher://127.0.0.1:" + p + "/", up + "/redirect?to=" + url.QueryEscape("file:///etc/passwd")} {
			inst := s.runFlow(t, "ssrf-probe", fmt.Sprintf(`{"target":%q}`, target), 15*time.Second)
			require.Equal(t, "errored", inst.Status, "%s", target)
			t.Logf("%s: %s %s", target, inst.Error.Name, inst.Error.Message)
		}
		s.requireHealthy(t)
	})
	require.Zero(t, c.hits.Load(), "a refused request reached the canary")
}

// TestDeepStepResult has an http step fetch an answer nested deeper than
// SQLite's JSON limit: the instance must end (errored, with the
// depth limit named) instead of being retried forever, on both backends,
// and the server must go on serving.
func TestDeepStepResult(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	for _, s := range backends(t) {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.applyFlow(t, httpFlow("deep-result", "${raw:target}"))
			for _, depth := range []int{1001, 5000} {
				inst := s.runFlow(t, "deep-result", fmt.Sprintf(`{"target":%q}`, fmt.Sprintf("%s/deep?depth=%d", up, depth)), 15*time.Second)
				require.Equal(t, "errored", inst.Status, "depth %d", depth)
				t.Logf("depth %d: %s %s", depth, inst.Error.Name, inst.Error.Message)
			}
			s.requireHealthy(t)
		})
	}
}

// peakRSS returns the peak resident set size of a process in bytes (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/<pid>/status")
	return 0
}

// watchHealth polls /healthz until stop is closed and returns the slowest
// answer (an error counts as the whole window).
func (s *server) watchHealth(stop <-chan struct{}) func() time.Duration {
	var mu sync.Mutex
	var worst time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			start := time.Now()
			resp, err := c.Get(s.url + "/healthz")
			d := time.Since(start)
			if err == nil {
				resp.Body.Close()
			} else {
				d = 5 * time.Second
			}
			mu.Lock()
			worst = max(worst, d)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() time.Duration {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return worst
	}
}

// transformFlow is a flow of one transform step.
func transformFlow(id, expression string) string {
	return fmt.Sprintf(`{"id":%q,"version":"1.0.0","initialStepId":"t","steps":{"t":{"id":"t","type":"transform",
		"config":{"expression":%s},"outputKey":"out","retries":{"limit":0}}}}`, id, jsonString(expression))
}

// TestExpressionBombs runs transform expressions that try to exhaust the
// sandbox: each fails with EXPRESSION_ERROR (or is refused when applied)
// within seconds, while /healthz keeps answering within 2 s.
func TestExpressionBombs(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	bombs := []struct {
		name, expression string
		mayComplete      bool // Go's regexp is linear: it must only end in time
	}{
		{"range", `len(1..1000000000)`, false},
		{"mapRange", `map(1..1000000000, #)`, false},
		{"reduceRange", `reduce(1..100000000, #acc + #, 0)`, false},
		{"nestedMaps", `map(1..100000, map(1..100000, #))`, false},
		{"repeat", `repeat("x", 100000000)`, false},
		{"repeatNested", `repeat(repeat("ab", 10000), 10000)`, false},
		{"concatDoubling", `reduce(1..64, #acc + #acc, "x")`, false},
		{"joinDoubling", `reduce(1..40, join([#acc, #acc], ""), "xy")`, false},
		{"replaceGrowth", `replace(repeat("a", 100000), "a", repeat("b", 100000))`, false},
		{"splitChars", `split(repeat("a", 1000000), "")`, false},
		{"sortBig", `sort(split(repeat("ab", 500000), ""))`, false},
		{"toJSONDeep", `toJSON(reduce(1..3000, [#acc], []))`, false},
		{"toJSONNestedStrings", `toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(toJSON(repeat("\"", 1000)))))))))))))`, false},
		{"toJSONOfParsed", `toJSON(fromJSON(repeat("[", 5000) + repeat("]", 5000)))`, false},
		{"fromJSONDeep", `fromJSON(repeat("[", 100000))`, false},
		{"regexOnHugeInput", `repeat("a", 1000000) matches "(a|aa)+b"`, true},
		{"regexNestedStars", `repeat("a", 1000000) matches "((a*)*)*b"`, true},
		{"regexBigPattern", `"a" matches repeat("(a|b)", 1000)`, true},
	}
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			id := "bomb-" + strings.ToLower(b.name)
			r := s.do(t, request{method: http.MethodPost, path: "/api/flows", token: secretFlows, body: strings.NewReader(transformFlow(id, b.expression))})
			if r.status == http.StatusBadRequest {
				requireRefused(t, r, http.StatusBadRequest, "INVALID_FLOW")
				t.Logf("refused at apply: %.300s", r.body)
				s.requireHealthy(t)
				return
			}
			require.Contains(t, []int{200, 201}, r.status, "body: %s", r.body)
			stop := make(chan struct{})
			worst := s.watchHealth(stop)
			start := time.Now()
			inst := s.runFlow(t, id, `{}`, 20*time.Second)
			elapsed := time.Since(start)
			close(stop)
			require.Less(t, elapsed, 5*time.Second, "the bomb ran %s against a 1 s limit", elapsed)
			require.Less(t, worst(), 2*time.Second, "/healthz was slow during the bomb")
			if b.mayComplete && inst.Status == "complete" {
				t.Logf("complete in %s: %.200s", elapsed.Round(time.Millisecond), inst.Output)
				return
			}
			require.Equal(t, "errored", inst.Status, "the bomb %s completed: output %.200s", b.name, inst.Output)
			require.Equal(t, "EXPRESSION_ERROR", inst.Error.Name, "%s", inst.Error.Message)
			t.Logf("%s in %s: %.200s", inst.Error.Name, elapsed.Round(time.Millisecond), inst.Error.Message)
		})
	}
	s.requireHealthy(t)
}

// TestExpressionBombMemory pretty-prints a deeply nested value: toJSON's
// output grows with the square of the depth, and the sandbox must stop it
// before it is built, not measure it afterwards. It runs on a
// server of its own to read that process's peak memory.
func TestExpressionBombMemory(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	const id = "bomb-tojson-memory"
	s.applyFlow(t, transformFlow(id, `toJSON(reduce(1..6000, [#acc], []))`))
	s.requireHealthy(t)
	before := peakRSS(t, s.cmd.Process.Pid)
	stop := make(chan struct{})
	worst := s.watchHealth(stop)
	start := time.Now()
	inst := s.runFlow(t, id, `{}`, 30*time.Second)
	elapsed := time.Since(start)
	close(stop)
	grew := peakRSS(t, s.cmd.Process.Pid) - before
	t.Logf("%s after %s, peak memory grew by %d MiB, slowest /healthz %s", inst.Status, elapsed, grew>>20, worst())
	require.Equal(t, "errored", inst.Status)
	require.Equal(t, "EXPRESSION_ERROR", inst.Error.Name)
	require.Less(t, worst(), 2*time.Second, "/healthz was slow during the bomb")
	require.Less(t, grew, int64(128<<20), "one expression with a 1 MiB value limit made the server's peak memory grow by %d MiB", grew>>20)
}

// TestExecEscapes applies exec steps that try to run something the host
// did not allow-list (the binary allow-lists nothing): every one is refused
// when the flow is applied and nothing is stored.
func TestExecEscapes(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	cases := []struct{ name, config, path string }{
		{"shell", `{"command":"sh"}`, "steps.x.config.command"},
		{"absoluteShell", `{"command":"/bin/sh"}`, "steps.x.config.command"},
		{"dotDotPath", `{"command":"/bin/../bin/sh"}`, "steps.x.config.command"},
		{"relativePath", `{"command":"../../../../bin/sh"}`, "steps.x.config.command"},
		{"shellDashC", `{"command":"sh -c id"}`, "steps.x.config.command"},
		{"shellWithArgs", `{"command":"sh","args":["-c","id"]}`, "steps.x.config.command"},
		{"semicolon", `{"command":"echo; id"}`, "steps.x.config.command"},
		{"substitution", `{"command":"$(id)"}`, "steps.x.config.command"},
		{"backticks", "{\"command\":\"`id`\"}", "steps.x.config.command"},
		{"nul", `{"command":"sh\u0000"}`, "steps.x.config.command"},
		{"empty", `{"command":""}`, "steps.x.config.command"},
		{"envField", `{"command":"sh","env":{"LD_PRELOAD":"/tmp/evil.so"}}`, "steps.x.config.env"},
		{"dirField", `{"command":"sh","dir":"/"}`, "steps.x.config.dir"},
		{"pathField", `{"command":"sh","path":"/bin/sh"}`, "steps.x.config.path"},
		{"templateCommand", `{"command":"${cmd}"}`, "steps.x.config.command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "exec-" + strings.ToLower(c.name)
			def := fmt.Sprintf(`{"id":%q,"version":"1.0.0","initialStepId":"x","steps":{"x":{"id":"x","type":"exec","config":%s}}}`, id, c.config)
			t.Logf("%s", s.applyRefused(t, id, def, c.path))
		})
	}
	s.requireHealthy(t)
}
