package cli_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

// get sends GET url with an optional bearer token and returns the status
// and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestServeMetricsNeedTheScope: serve answers /metrics on the API address
// and on --metrics-addr only to a token with the metrics scope when tokens
// are configured.
func TestServeMetricsNeedTheScope(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--metrics-addr", "127.0.0.1:0",
		"--token", "prom:scr4pe:metrics", "--token", "reader:r3ad:read", "--token", "admin:adm1n:*"})
	line := s.stderr.waitLine(t, 10*time.Second, func(l string) bool {
		_, ok := logLine(l, "serving the metrics")
		return ok
	})
	m, _ := logLine(line, "serving the metrics")
	own := m["url"].(string)
	for _, url := range []string{s.url + "/metrics", own} {
		code, body := get(t, url, "")
		require.Equal(t, http.StatusUnauthorized, code, "%s: %s", url, body)
		code, body = get(t, url, "r3ad")
		require.Equal(t, http.StatusForbidden, code, "%s: %s", url, body)
		require.Contains(t, body, `lacks the \"metrics\" scope`)
		for _, token := range []string{"scr4pe", "adm1n"} {
			code, body = get(t, url, token)
			require.Equal(t, http.StatusOK, code, "%s: %s", url, body)
			require.Contains(t, body, "duraflow_tasks_ready ")
			require.Contains(t, body, "go_goroutines ")
		}
	}
	// The API is served beside it as before.
	code, _ := get(t, s.url+"/api/workflows", "r3ad")
	require.Equal(t, http.StatusOK, code)
}

// TestDevServesMetrics: dev serves the metrics at /metrics on the API
// address, which its banner prints, and they count what ran.
func TestDevServesMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	require.Equal(t, []string{s.url + "/metrics"}, devMetricsURLs(t, s))
	c := s.client(t)
	c.run(0, "instances", "create", "hello", "--id", "m1", "--params", `{"name":"Ada"}`)
	c.waitStatus("hello", "m1", "complete")
	code, body := get(t, s.url+"/metrics", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `duraflow_instances_created_total{workflow="hello"} 1`)
	require.Contains(t, body, `duraflow_instances_completed_total{workflow="hello"} 1`)
}

// TestDevServersSideBySide: two dev servers on other --addr ports of one
// machine both start with their default flags (no port of their own for
// the metrics, which would be taken by the first), and each serves its
// own API and its own metrics on its API address.
func TestDevServersSideBySide(t *testing.T) {
	t.Parallel()
	a := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	b := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	require.NotEqual(t, a.url, b.url)
	for _, s := range []*server{a, b} {
		require.Equal(t, []string{s.url + "/metrics"}, devMetricsURLs(t, s))
	}
	a.client(t).run(0, "instances", "create", "hello", "--id", "on-a", "--params", `{"name":"Ada"}`)
	a.client(t).waitStatus("hello", "on-a", "complete")
	b.client(t).run(0, "instances", "create", "hello", "--id", "on-b1", "--params", `{"name":"Bob"}`)
	b.client(t).run(0, "instances", "create", "hello", "--id", "on-b2", "--params", `{"name":"Bea"}`)
	b.client(t).waitStatus("hello", "on-b2", "complete")
	for s, created := range map[*server]int{a: 1, b: 2} {
		code, body := get(t, s.url+"/metrics", "")
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, fmt.Sprintf(`duraflow_instances_created_total{workflow="hello"} %d`, created), "each server counts its own")
	}
}

// TestDevMetricsFlags: --metrics-addr serves the metrics on an address of
// their own as well, and --metrics=false takes them off the API address.
func TestDevMetricsFlags(t *testing.T) {
	t.Parallel()
	t.Run("OwnAddressToo", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, []string{"dev", "--db", sqliteDB(t), "--metrics-addr", "127.0.0.1:0"})
		urls := devMetricsURLs(t, s)
		require.Len(t, urls, 2)
		require.Equal(t, s.url+"/metrics", urls[0])
		for _, u := range urls {
			code, body := get(t, u, "")
			require.Equal(t, http.StatusOK, code, body)
			require.Contains(t, body, "duraflow_workers_online")
		}
	})
	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, []string{"dev", "--db", sqliteDB(t), "--metrics=false"})
		require.Empty(t, devMetricsURLs(t, s))
		code, _ := get(t, s.url+"/metrics", "")
		require.Equal(t, http.StatusNotFound, code)
	})
}

// devMetricsURLs are the metrics URLs dev's banner prints.
func devMetricsURLs(t *testing.T, s *server) []string {
	t.Helper()
	s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
	var urls []string
	for l := range strings.Lines(s.stdout.String()) {
		if u, ok := strings.CutPrefix(strings.TrimSpace(l), "Prometheus metrics: "); ok {
			urls = append(urls, u)
		}
	}
	return urls
}

// TestMetricsAddrNeedsLoopbackWithoutTokens: without tokens the metrics,
// like the API, listen on loopback only.
func TestMetricsAddrNeedsLoopbackWithoutTokens(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "worker", "--db", sqliteDB(t), "--metrics-addr", "0.0.0.0:0")
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "--metrics-addr")
}

// TestWorkerMetricsWithTokens: worker, which serves no API, takes --token
// for its --metrics-addr: a scrape then needs the metrics scope, and the
// address may be other than loopback, as docs/metrics.md says.
func TestWorkerMetricsWithTokens(t *testing.T) {
	t.Parallel()
	stderr := newLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--db", sqliteDB(t), "--metrics-addr", "0.0.0.0:0",
			"--token", "prom:scr4pe:metrics", "--token", "reader:r3ad:read", "--log-format", "json", "--log-level", "info"},
			cli.WithOutput(newLines(), stderr), cli.WithLookupEnv(noEnv))
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, cli.ExitOK, <-done, stderr.String())
	})
	line := stderr.waitLine(t, 30*time.Second, func(l string) bool {
		_, ok := logLine(l, "serving the metrics")
		return ok || strings.Contains(l, `"level":"ERROR"`)
	})
	m, ok := logLine(line, "serving the metrics")
	require.True(t, ok, stderr.String())
	u, err := url.Parse(m["url"].(string))
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(u.Host)
	require.NoError(t, err)
	scrape := "http://127.0.0.1:" + port + "/metrics"

	code, body := get(t, scrape, "")
	require.Equal(t, http.StatusUnauthorized, code, body)
	code, body = get(t, scrape, "r3ad")
	require.Equal(t, http.StatusForbidden, code, body)
	code, body = get(t, scrape, "scr4pe")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "duraflow_tasks_ready ")
}

// TestServeMetricsLeaveAPIPathsAlone: with /metrics on the API address, a
// path the API answers itself is not cleaned or redirected on the way (a
// ServeMux would answer "/x/." with a 301 to "/x/"), and only GET /metrics
// is the metrics'.
func TestServeMetricsLeaveAPIPathsAlone(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t)})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/api/workflows/hello/instances/.", http.StatusBadRequest, "INVALID_INSTANCE_ID"},
		{http.MethodGet, "/api/workflows/hello/instances/./history", http.StatusBadRequest, "INVALID_INSTANCE_ID"},
		{http.MethodGet, "/api/workflows/../workflows", http.StatusNotFound, "NOT_FOUND"},
		{http.MethodPost, "/metrics", http.StatusNotFound, "NOT_FOUND"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), c.method, s.url+c.path, nil)
		require.NoError(t, err)
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, c.status, resp.StatusCode, "%s %s: %s", c.method, c.path, body)
		require.Contains(t, string(body), `"code":"`+c.code+`"`, "%s %s", c.method, c.path)
	}
	code, body := get(t, s.url+"/metrics", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "duraflow_tasks_ready ")
}
