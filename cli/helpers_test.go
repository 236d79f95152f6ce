package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/examples/demo"
	"github.com/duraflow/duraflow/workflow"
)

// lines is an io.Writer that keeps what is written and lets a test wait
// for a line.
type lines struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLines() *lines { return &lines{changed: make(chan struct{})} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return n, err
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitLine waits until a line satisfies match and returns it.
func (l *lines) waitLine(t *testing.T, timeout time.Duration, match func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		text, changed := l.buf.String(), l.changed
		l.mu.Unlock()
		sc := bufio.NewScanner(strings.NewReader(text))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if match(sc.Text()) {
				return sc.Text()
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			require.FailNow(t, "no matching line within "+timeout.String(), "output so far:\n%s", text)
		}
	}
}

// logLine decodes a JSON log line and reports whether its message is msg.
func logLine(line, msg string) (map[string]any, bool) {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return nil, false
	}
	return m, m["msg"] == msg
}

// noEnv is an environment with nothing set, so the tests do not see the
// DURAFLOW_* variables of the machine they run on.
func noEnv(string) (string, bool) { return "", false }

// envMap is an environment of the given variables.
func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// server is a dev or serve command running in this process.
type server struct {
	url    string // base URL, without the API prefix
	stdout *lines
	stderr *lines
	cancel context.CancelFunc
	done   chan int
}

// startServer runs `<args> --addr 127.0.0.1:0 --log-format json` in the
// background with the demo workflows, waits until it serves, and stops it
// (requiring a clean exit) when the test ends.
func startServer(t *testing.T, args []string, opts ...cli.Option) *server {
	t.Helper()
	s := &server{stdout: newLines(), stderr: newLines(), done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	all := append([]string{}, args...)
	all = append(all, "--addr", "127.0.0.1:0", "--log-format", "json", "--log-level", "info")
	opts = append([]cli.Option{cli.WithWorkflows(demo.Register), cli.WithOutput(s.stdout, s.stderr), cli.WithLookupEnv(noEnv)}, opts...)
	go func() { s.done <- cli.Run(ctx, all, opts...) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-s.done:
			require.Equal(t, cli.ExitOK, code, "a drained server exits 0; stderr:\n%s", s.stderr.String())
		case <-time.After(30 * time.Second):
			t.Errorf("the server did not stop within 30 s")
		}
	})
	line := s.stderr.waitLine(t, 30*time.Second, func(l string) bool {
		_, ok := logLine(l, "serving the HTTP API")
		return ok || strings.Contains(l, `"level":"ERROR"`)
	})
	m, ok := logLine(line, "serving the HTTP API")
	require.True(t, ok, line)
	s.url = m["url"].(string)
	return s
}

// sqliteDB returns the URL of a fresh SQLite file.
func sqliteDB(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "duraflow.db")
}

// result is what one command printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// run runs one command in this process with the given environment.
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), args, cli.WithWorkflows(demo.Register),
		cli.WithOutput(&stdout, &stderr), cli.WithLookupEnv(envMap(env)))
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// client runs client commands against a server.
type client struct {
	t   *testing.T
	env map[string]string
}

func (s *server) client(t *testing.T) *client {
	return &client{t: t, env: map[string]string{"DURAFLOW_SERVER": s.url}}
}

// run runs a command and requires the exit code.
func (c *client) run(code int, args ...string) result {
	c.t.Helper()
	r := run(c.t, c.env, args...)
	require.Equal(c.t, code, r.code, "%v\nstdout:\n%s\nstderr:\n%s", args, r.stdout, r.stderr)
	return r
}

// json runs a command with --json, requires exit 0 and decodes stdout.
func (c *client) json(out any, args ...string) {
	c.t.Helper()
	r := c.run(cli.ExitOK, append(args, "--json")...)
	require.NoError(c.t, json.Unmarshal([]byte(r.stdout), out), r.stdout)
}

// waitStatus polls an instance until it has status and returns it, as
// instances get --json prints it: the API's shape, its status, error and
// output under "details".
func (c *client) waitStatus(workflowName, id, status string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var info map[string]any
		c.json(&info, "instances", "get", workflowName, id)
		details, _ := info["details"].(map[string]any)
		if details["status"] == status {
			return info
		}
		if time.Now().After(deadline) {
			require.FailNow(c.t, "instance did not reach status "+status, "%s/%s is %v", workflowName, id, details["status"])
		}
		<-tick.C
	}
}

// registerDemo registers the demo workflows.
func registerDemo(reg *workflow.Registry) error { return demo.Register(reg) }
