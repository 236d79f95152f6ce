//go:build attack

package attack_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// binary is the duraflow binary TestMain builds once for the whole run.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "duraflow-attack-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "duraflow")
	// CGO_ENABLED=0 pins the pure Go resolver, so that no test name is ever
	// sent to a DNS server: names are answered from /etc/hosts or refused.
	build := exec.Command(goTool(), "build", "-o", binary, "./cmd/duraflow")
	build.Dir = filepath.Join("..", "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/duraflow:", err)
		return 1
	}
	return m.Run()
}

func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// Secrets of the tokens every server accepts, one per scope, and "*".
const (
	secretAdmin     = "attack-admin-secret"
	secretRead      = "attack-read-secret"
	secretCreate    = "attack-create-secret"
	secretManage    = "attack-manage-secret"
	secretEvents    = "attack-events-secret"
	secretFlows     = "attack-flows-secret"
	secretTick      = "attack-tick-secret"
	secretSchedules = "attack-schedules-secret"
	// secretTenant is a token limited to the namespace "tenant", with every
	// action it may have.
	secretTenant = "attack-tenant-secret"
)

// server is a duraflow process serving on loopback.
type server struct {
	name    string // "sqlite" or "postgres"
	url     string // http://127.0.0.1:port
	dbURL   string // the server's --db
	cmd     *exec.Cmd
	http    *http.Client
	logMu   sync.Mutex
	log     bytes.Buffer
	exited  chan struct{}
	waitErr error
}

// serverOptions are the extra flags of a server.
type serverOptions struct {
	databaseURL string
	extraArgs   []string
}

// startServer starts `duraflow serve` on 127.0.0.1 with a port of its own,
// every token, the tick route, a trigger and 127.0.0.2 allow-listed for
// http steps, and stops it when the test ends.
func startServer(t testing.TB, name string, o serverOptions) *server {
	t.Helper()
	args := []string{"serve", "--db", o.databaseURL, "--addr", "127.0.0.1:0",
		"--log-format", "json", "--log-level", "info", "--tick", "--poll-interval", "100ms",
		"--shutdown-timeout", "2s", "--http-allow", "127.0.0.2",
		"--trigger", "POST /hooks/hello=hello",
		"--token", "admin:" + secretAdmin + ":*",
		"--token", "reader:" + secretRead + ":read",
		"--token", "creator:" + secretCreate + ":create",
		"--token", "manager:" + secretManage + ":manage",
		"--token", "sender:" + secretEvents + ":events",
		"--token", "flows:" + secretFlows + ":flows",
		"--token", "ticker:" + secretTick + ":tick",
		"--token", "scheduler:" + secretSchedules + ":schedules",
		"--token", "tenant:" + secretTenant + ":*@tenant",
	}
	args = append(args, o.extraArgs...)
	s := &server{name: name, dbURL: o.databaseURL, exited: make(chan struct{}), http: &http.Client{Timeout: 30 * time.Second}}
	s.cmd = exec.Command(binary, args...)
	// netdns=go on top of CGO_ENABLED=0: whatever the build, names are
	// answered by the pure Go resolver, which never sends an all-numeric
	// name to DNS.
	s.cmd.Env = append(os.Environ(), "DURAFLOW_TOKENS=", "DURAFLOW_DATABASE_URL=", "DURAFLOW_HTTP_ALLOW=", "GODEBUG=netdns=go")
	stderr, err := s.cmd.StderrPipe()
	require.NoError(t, err)
	s.cmd.Stdout = io.Discard
	require.NoError(t, s.cmd.Start())

	urlCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.logMu.Lock()
			s.log.Write(line)
			s.log.WriteByte('\n')
			s.logMu.Unlock()
			var rec struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "serving the HTTP API" {
				select {
				case urlCh <- rec.URL:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop(t) })

	select {
	case s.url = <-urlCh:
	case <-s.exited:
		t.Fatalf("duraflow serve exited at start (%v):\n%s", s.waitErr, s.logs())
	case <-time.After(60 * time.Second):
		t.Fatalf("duraflow serve did not start within a minute:\n%s", s.logs())
	}
	return s
}

func (s *server) logs() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// stop drains the server with SIGTERM, and kills it if it does not stop.
func (s *server) stop(t testing.TB) {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("duraflow serve (%s) did not stop on SIGTERM within 15 s", s.name)
	}
}

// sqliteServer starts a server on an SQLite file of the test's own.
func sqliteServer(t testing.TB, extra ...string) *server {
	t.Helper()
	return startServer(t, "sqlite", serverOptions{
		databaseURL: "sqlite:" + filepath.Join(t.TempDir(), "attack.db"), extraArgs: extra,
	})
}

// postgresReachable reports why the test database cannot be used, nil when
// it can.
func postgresReachable() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DatabaseURL())
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// postgresServer starts a server on a fresh schema of the test database
// (search_path in its URL), dropped when the test ends.
func postgresServer(t testing.TB, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.DatabaseURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	schema := "duraflow_attack_" + suffix
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	// Cleanups run last first: the server registers its stop after this,
	// so the schema is dropped once the server is gone.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, pgtest.DatabaseURL())
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return startServer(t, "postgres", serverOptions{
		databaseURL: pgtest.DatabaseURLWith("search_path=" + schema),
		extraArgs:   append([]string{"--wake-channel", "duraflow_wake_attack_" + suffix}, extra...),
	})
}

// backends returns a server per backend: SQLite always, Postgres when it
// is reachable (DURAFLOW_REQUIRE_POSTGRES=1 makes an unreachable Postgres a
// failure).
func backends(t *testing.T) []*server {
	t.Helper()
	out := []*server{sqliteServer(t)}
	if err := postgresReachable(); err != nil {
		if os.Getenv(pgtest.EnvRequirePostgres) == "1" {
			t.Fatalf("Postgres is not reachable at %s: %v", pgtest.DatabaseURL(), err)
		}
		t.Logf("the Postgres cases are skipped: Postgres is not reachable (%v); set %s", err, pgtest.EnvDatabaseURL)
		return out
	}
	return append(out, postgresServer(t))
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// uniqueID returns an id no other test uses.
func uniqueID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// response is an answer of the server.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errorCode returns the code of an error answer, "" when the body is not
// the API's error shape.
func (r *response) errorCode() string {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(r.body, &e) != nil || e.Error == nil || e.Error.Message == "" {
		return ""
	}
	return e.Error.Code
}

// request is what do sends.
type request struct {
	method, path string
	body         io.Reader
	token        string // a secret; "" sends no Authorization
	header       map[string]string
}

// do sends a request and reads the answer.
func (s *server) do(t testing.TB, r request) *response {
	t.Helper()
	req, err := http.NewRequest(r.method, s.url+r.path, r.body)
	require.NoError(t, err)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := s.http.Do(req)
	require.NoError(t, err, "%s %s", r.method, r.path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// call sends a JSON body (or none when body is "") with the admin token.
func (s *server) call(t testing.TB, method, path, body string) *response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return s.do(t, request{method: method, path: path, body: r, token: secretAdmin})
}

// requireRefused asserts an error answer with status and code.
func requireRefused(t testing.TB, r *response, status int, codes ...string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %.500s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"), "body: %.500s", r.body)
	code := r.errorCode()
	require.NotEmpty(t, code, "not the API's error shape: %.500s", r.body)
	if len(codes) > 0 {
		require.Contains(t, codes, code, "body: %.500s", r.body)
	}
}

// requireHealthy asserts that the server answers /healthz within two
// seconds.
func (s *server) requireHealthy(t testing.TB) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(s.url + "/healthz")
	require.NoError(t, err, "the server does not answer /healthz within 2 s; its log:\n%s", tail(s.logs(), 4000))
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// instance is the part of an instance the tests read: its id, and its
// status, error and output, which the API answers under "details".
type instance struct {
	ID     string
	Status string
	Error  *struct {
		Name    string `json:"name"`
		Message string `json:"message"`
	}
	Output json.RawMessage
}

// UnmarshalJSON reads the API's shape, {"id":…, "details":{…}}.
func (i *instance) UnmarshalJSON(b []byte) error {
	var wire struct {
		ID      string `json:"id"`
		Details struct {
			Status string `json:"status"`
			Error  *struct {
				Name    string `json:"name"`
				Message string `json:"message"`
			} `json:"error"`
			Output json.RawMessage `json:"output"`
		} `json:"details"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		return err
	}
	*i = instance{ID: wire.ID, Status: wire.Details.Status, Error: wire.Details.Error, Output: wire.Details.Output}
	return nil
}

// getInstance returns an instance, nil when it does not exist.
func (s *server) getInstance(t testing.TB, workflowName, id string) *instance {
	t.Helper()
	r := s.call(t, http.MethodGet, "/api/workflows/"+workflowName+"/instances/"+id, "")
	if r.status == http.StatusNotFound {
		return nil
	}
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var inst instance
	require.NoError(t, json.Unmarshal(r.body, &inst))
	return &inst
}

// requireNoInstance asserts that a refused create wrote nothing.
func (s *server) requireNoInstance(t testing.TB, workflowName, id string) {
	t.Helper()
	require.Nil(t, s.getInstance(t, workflowName, id), "a refused request created instance %s/%s", workflowName, id)
}

// countInstances counts the instances of a workflow, every page. It reads
// the pages token by token: an instance whose params are nested deeper than
// encoding/json decodes must still be counted.
func (s *server) countInstances(t testing.TB, workflowName string) int {
	t.Helper()
	n, cursor := 0, ""
	for {
		path := "/api/workflows/" + workflowName + "/instances?pageSize=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := s.call(t, http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, r.status, "body: %.500s", r.body)
		count, next := scanPage(t, r.body)
		n += count
		if next == "" {
			return n
		}
		cursor = next
	}
}

// scanPage counts the elements of a page's "instances" and returns its
// "cursor", without decoding the instances.
func scanPage(t testing.TB, body []byte) (count int, next string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // params such as 1e999999 are valid JSON
	depth, key, inInstances := 0, "", false
	expectKey := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return count, next
		}
		require.NoError(t, err, "page: %.300s", body)
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if depth == 2 && inInstances {
					count++
				}
				if depth == 1 && v == '[' && key == "instances" {
					inInstances = true
				}
				depth++
				expectKey = v == '{'
			case '}', ']':
				depth--
				if depth == 1 {
					inInstances = false
				}
				expectKey = depth > 0 // approximate: only depth 1 keys matter
			}
		case string:
			if depth == 1 && expectKey {
				key = v
				expectKey = false
				continue
			}
			if depth == 1 && key == "cursor" {
				next = v
			}
			if depth == 2 && inInstances {
				count++ // an instance that is not an object (never, but count it)
			}
			expectKey = depth == 1
		default:
			if depth == 2 && inInstances {
				count++
			}
			expectKey = depth == 1
		}
	}
}

// waitSettled polls an instance until it is neither queued nor running and
// returns it; it fails the test after timeout. (The server is a black box:
// its API is all there is to wait on.)
func (s *server) waitSettled(t testing.TB, workflowName, id string, timeout time.Duration) *instance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		inst := s.getInstance(t, workflowName, id)
		require.NotNil(t, inst, "instance %s/%s", workflowName, id)
		if inst.Status != "queued" && inst.Status != "running" {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s/%s is still %s after %s; server log:\n%s", workflowName, id, inst.Status, timeout, tail(s.logs(), 4000))
		}
		<-tick.C
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// raw sends a request whose target is written as it is, escapes the Go
// client would refuse included, with the admin token.
func (s *server) raw(t testing.TB, method, target, body string) *response {
	t.Helper()
	host := strings.TrimPrefix(s.url, "http://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		method, target, host, secretAdmin, len(body), body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "%s %s", method, target)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

func queryEscape(s string) string { return url.QueryEscape(s) }
