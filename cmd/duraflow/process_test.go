//go:build unix

package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dftype"
)

// The cross-process tests run the real binary: one `duraflow serve` (API
// only, so nothing runs in the process that receives the HTTP requests) and
// two `duraflow worker` processes on one fresh Postgres schema.

const (
	// notifyBound is how soon an event sent over HTTP must complete a
	// waiting instance when workers LISTEN for wake-ups. It is generous, as
	// the test may share two cores with the race detector and other tests.
	notifyBound = 2 * time.Second
	// notifyPoll is the workers' poll interval when they LISTEN: five times
	// notifyBound, so a poll explains a fast wake-up of all three samples
	// only rarely; a notification explains it always.
	notifyPoll = "10s"
	// pollOnly is the poll interval when notifications are off; an event
	// must complete the instance within a few intervals (a loaded machine
	// may delay one poll), long before the test's wait gives up.
	pollOnly      = 500 * time.Millisecond
	pollOnlyBound = 5 * time.Second
	// lease is the workers' lease: the work of a killed worker is taken over
	// this long after its last heartbeat.
	lease = "2s"
	// waitTimeout bounds every wait of the tests.
	waitTimeout = 30 * time.Second
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildDir  string
)

// duraflowBinary builds ./cmd/duraflow once per test binary.
func duraflowBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "duraflow-bin-")
		if buildErr != nil {
			return
		}
		binary = filepath.Join(buildDir, "duraflow")
		buildErr = goBuild(binary)
	})
	require.NoError(t, buildErr)
	return binary
}

// goBuild builds ./cmd/duraflow into out with the extra build flags (on
// top of GOFLAGS).
func goBuild(out string, flags ...string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	args := append(append([]string{"build"}, flags...), "-o", out, "github.com/duraflow/duraflow/cmd/duraflow")
	if msg, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// output keeps what a process writes and lets the test wait for a line.
type output struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newOutput() *output { return &output{changed: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.buf.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return n, err
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// waitLog waits for a JSON log line with the message and returns its fields.
func (o *output) waitLog(t *testing.T, name, msg string) map[string]any {
	t.Helper()
	var m map[string]any
	o.waitLine(t, name, fmt.Sprintf("no log %q", msg), func(line string) bool {
		m = nil
		return json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg
	})
	return m
}

// waitLine waits for a line for which match is true and returns it; what
// names the line in the failure.
func (o *output) waitLine(t *testing.T, name, what string, match func(line string) bool) string {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		text, changed := o.buf.String(), o.changed
		o.mu.Unlock()
		sc := bufio.NewScanner(strings.NewReader(text))
		for sc.Scan() {
			if match(sc.Text()) {
				return sc.Text()
			}
		}
		select {
		case <-changed:
		case <-deadline.C:
			require.FailNow(t, fmt.Sprintf("%s printed %s within %s", name, what, waitTimeout), "its output:\n%s", text)
		}
	}
}

// proc is a duraflow process the test started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *output
	done   chan struct{}
	err    error
	killed bool
	// quiet is set for a process that logs at warn (dev's default), so it
	// does not log "stopped" when it stops.
	quiet bool
}

// start runs the binary with args. When the test ends, a process that is
// still running gets SIGTERM and must drain and exit 0.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: newOutput(), done: make(chan struct{})}
	p.cmd = exec.Command(duraflowBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = cleanEnv()
	setParentDeathSignal(p.cmd)
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if p.killed {
			<-p.done
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			require.NoError(t, p.err, "%s did not exit cleanly after SIGTERM; its output:\n%s", name, p.out.String())
			if !p.quiet {
				require.Contains(t, p.out.String(), `"msg":"stopped"`)
			}
		case <-time.After(waitTimeout):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not stop within %s of SIGTERM; its output:\n%s", name, waitTimeout, p.out.String())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to die.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.killed = true
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// cleanEnv is the test's environment without DURAFLOW_* variables, so the
// processes see only their flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DURAFLOW_") {
			env = append(env, kv)
		}
	}
	return env
}

// cluster is a serve process and two workers on one fresh schema.
type cluster struct {
	api     *apiclient.Client
	workers []*proc
}

// startCluster starts `duraflow serve --runner=false` and two workers on a
// fresh Postgres schema, each with a poll interval of poll and
// --notify=notify. It skips the test when Postgres is unreachable (unless
// DURAFLOW_REQUIRE_POSTGRES=1).
func startCluster(t *testing.T, notify bool, poll string) *cluster {
	t.Helper()
	pool := pgtest.NewPool(t, pgtest.WithMaxConns(1)) // a fresh, migrated schema; dropped after the test
	schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
	require.NotEmpty(t, schema)
	u, err := url.Parse(pgtest.DatabaseURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	common := []string{
		"--db", u.String(), "--wake-channel", schema, "--notify=" + fmt.Sprint(notify),
		"--poll-interval", poll, "--lease", lease, "--log-format", "json", "--log-level", "info",
	}
	serve := start(t, "serve", append([]string{"serve", "--addr", "127.0.0.1:0", "--runner=false"}, common...)...)
	c := &cluster{}
	for i := range 2 {
		c.workers = append(c.workers, start(t, fmt.Sprintf("worker %d", i+1), append([]string{"worker", "--concurrency", "2"}, common...)...))
	}
	started := serve.out.waitLog(t, serve.name, "serving the HTTP API")
	for _, w := range c.workers {
		m := w.out.waitLog(t, w.name, "started")
		require.Equal(t, notify, m["notify"], "%s: LISTEN on iff --notify", w.name)
	}
	c.api = apiclient.New(started["url"].(string), "", nil)
	return c
}

// waitStatus polls an instance until it has one of the statuses.
func (c *cluster) waitStatus(t *testing.T, workflowName, id string, statuses ...dftype.InstanceStatus) *dftype.InstanceInfo {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := c.api.Get(ctx, workflowName, id)
		require.NoError(t, err)
		for _, s := range statuses {
			if info.Status == s {
				return info
			}
		}
		require.True(t, time.Now().Before(deadline), "%s/%s is still %s after %s", workflowName, id, info.Status, waitTimeout)
		<-tick.C
	}
}

// eventToComplete creates an approval instance, waits until it waits for its
// event, sends the event over HTTP and returns how long it took from the
// send to the complete status.
func (c *cluster) eventToComplete(t *testing.T, id string) time.Duration {
	t.Helper()
	ctx := context.Background()
	_, err := c.api.Create(ctx, "approval", dftype.CreateRequest{ID: id, Params: json.RawMessage(`{"amount":120}`)})
	require.NoError(t, err)
	c.waitStatus(t, "approval", id, dftype.StatusWaiting)

	sent := time.Now()
	require.NoError(t, c.api.SendEvent(ctx, "approval", id, "approval", json.RawMessage(`{"approved":true}`)))
	info := c.waitStatus(t, "approval", id, dftype.StatusComplete, dftype.StatusErrored)
	took := time.Since(sent)
	require.Equal(t, dftype.StatusComplete, info.Status)
	require.JSONEq(t, `{"approved":true,"amount":120}`, string(info.Output))
	return took
}

func TestAcrossProcessesWithNotify(t *testing.T) {
	t.Parallel()
	c := startCluster(t, true, notifyPoll)
	ctx := context.Background()

	// Events wake a worker through LISTEN/NOTIFY, long before its next poll.
	for i := range 3 {
		took := c.eventToComplete(t, fmt.Sprintf("notified-%d", i))
		t.Logf("event to complete: %s", took)
		require.Less(t, took, notifyBound, "an event must resume the instance within %s with LISTEN/NOTIFY", notifyBound)
	}

	// SIGKILL a worker in the middle of steps: nothing is lost. Each worker
	// runs at most two instances, and serve none, so when four are running
	// each worker holds two of them mid-step.
	const n = 6
	for i := range n {
		_, err := c.api.Create(ctx, "flaky", dftype.CreateRequest{
			ID: fmt.Sprintf("killed-%d", i), Params: json.RawMessage(`{"failures":0,"work":"2 seconds"}`),
		})
		require.NoError(t, err)
	}
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := c.api.List(ctx, listParams("flaky", dftype.StatusRunning))
		require.NoError(t, err)
		if len(list.Instances) == 4 {
			break
		}
		require.True(t, time.Now().Before(deadline), "never saw 4 instances running")
		<-tick.C
	}
	c.workers[0].kill(t)
	killedAt := time.Now()

	for i := range n {
		info := c.waitStatus(t, "flaky", fmt.Sprintf("killed-%d", i), dftype.StatusComplete, dftype.StatusErrored)
		require.Equal(t, dftype.StatusComplete, info.Status, "killed-%d: %+v", i, info.Error)
		require.JSONEq(t, `{"attempts":1}`, string(info.Output))
		hist, err := c.api.History(ctx, "flaky", info.ID, listHistory())
		require.NoError(t, err)
		require.Len(t, hist.Steps, 1)
		require.Equal(t, 1, hist.Steps[0].Attempts, "an interrupted attempt is not recorded; the step completed once")
	}
	t.Logf("all %d instances complete %s after the SIGKILL", n, time.Since(killedAt).Round(time.Millisecond))
}

func TestAcrossProcessesPollingOnly(t *testing.T) {
	t.Parallel()
	c := startCluster(t, false, pollOnly.String())
	for i := range 3 {
		took := c.eventToComplete(t, fmt.Sprintf("polled-%d", i))
		t.Logf("event to complete: %s", took)
		require.Less(t, took, pollOnlyBound, "without notifications an event must resume the instance within a few poll intervals (%s)", pollOnly)
	}
}
