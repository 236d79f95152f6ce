//go:build !windows

package durability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// The environment through which the test tells its helper process what to do.
const (
	// envHelper set to "1" turns TestHelperProcess into the host program.
	envHelper = "DURAFLOW_DURABILITY_HELPER"
	// envDB is the database the host runs on: an SQLite file, or a
	// Postgres URL whose search_path is the test's schema.
	envDB = "DURAFLOW_DURABILITY_DB"
	// envWakeChannel is the wake channel of the test's Postgres schema.
	envWakeChannel = "DURAFLOW_DURABILITY_WAKE_CHANNEL"
	// envKillAfterChild set to "1" makes the host kill itself with
	// SIGKILL as soon as the first child an Invoke step starts is stored,
	// before the parent's runner records that it started it.
	envKillAfterChild = "DURAFLOW_DURABILITY_KILL_AFTER_CHILD"
	// envLog is the side-effect log the step callbacks append to.
	envLog = "DURAFLOW_DURABILITY_LOG"
	// envWorkflow names the workflow of the instances.
	envWorkflow = "DURAFLOW_DURABILITY_WORKFLOW"
	// envInstances is the comma-separated ids of the instances.
	envInstances = "DURAFLOW_DURABILITY_INSTANCES"
	// envCreate set to "1" makes the host create the instances; a restarted
	// host only recovers them.
	envCreate = "DURAFLOW_DURABILITY_CREATE"
)

const (
	sleeperWorkflow = "sleeper"
	slowWorkflow    = "slow"
	sagaWorkflow    = "saga"
	parentWorkflow  = "parent"
	kidWorkflow     = "kid"

	// napFor is the sleep of the sleeper workflow. The host is killed during
	// it, so it must outlast starting a -race binary and running step a on a
	// slow machine; the test fails, saying so, when it did not.
	napFor = 5 * time.Second
	// slowBlock is how long the first start of the slow step takes: far
	// longer than the test, so only a crash recovery can finish it.
	slowBlock = 60 * time.Second

	leaseDuration     = 2 * time.Second
	heartbeatInterval = 500 * time.Millisecond
	pollInterval      = 100 * time.Millisecond

	// helperLifetime bounds a helper process that nobody killed, should the
	// test process itself die.
	helperLifetime = 2 * time.Minute
	// waitTimeout bounds every wait of the test for its helper.
	waitTimeout = 30 * time.Second
	waitTick    = 20 * time.Millisecond

	instancesPerScenario = 3
)

type params struct {
	N int `json:"n"`
}

type sleeperOutput struct {
	A int `json:"a"`
	B int `json:"b"`
}

type slowOutput struct {
	A    int `json:"a"`
	Slow int `json:"slow"`
	C    int `json:"c"`
}

// register registers the two workflows of the test. Their step callbacks
// record what runs in the side-effect log at logPath.
func register(reg *workflow.Registry, logPath string) {
	// sleeper: step a, a sleep of napFor, step b.
	workflow.MustRegister(reg, sleeperWorkflow, func(ctx context.Context, ev workflow.Event[params], step workflow.Step) (sleeperOutput, error) {
		a, err := workflow.Do(step, "a", recorded(logPath, func(context.Context) (int, error) {
			return ev.Payload.N * 10, nil
		}))
		if err != nil {
			return sleeperOutput{}, err
		}
		if err := step.Sleep("nap", napFor); err != nil {
			return sleeperOutput{}, err
		}
		b, err := workflow.Do(step, "b", recorded(logPath, func(context.Context) (int, error) {
			return a + 1, nil
		}))
		if err != nil {
			return sleeperOutput{}, err
		}
		return sleeperOutput{A: a, B: b}, nil
	})

	// slow: step a, step slow, whose first start blocks for slowBlock while
	// any later start returns at once, and step c.
	workflow.MustRegister(reg, slowWorkflow, func(ctx context.Context, ev workflow.Event[params], step workflow.Step) (slowOutput, error) {
		a, err := workflow.Do(step, "a", recorded(logPath, func(context.Context) (int, error) {
			return ev.Payload.N * 10, nil
		}))
		if err != nil {
			return slowOutput{}, err
		}
		slow, err := workflow.Do(step, "slow", recorded(logPath, func(ctx context.Context) (int, error) {
			if err := blockFirstStart(ctx, logPath); err != nil {
				return 0, err
			}
			return a + 1, nil
		}))
		if err != nil {
			return slowOutput{}, err
		}
		c, err := workflow.Do(step, "c", recorded(logPath, func(context.Context) (int, error) {
			return slow + 1, nil
		}))
		if err != nil {
			return slowOutput{}, err
		}
		return slowOutput{A: a, Slow: slow, C: c}, nil
	})

	// saga: steps s1 to s5, each undone by a compensation. Step s4 fails
	// for good, so the compensations of s3, s2 and s1 run, in that order;
	// the first start of s2's blocks for slowBlock.
	workflow.MustRegister(reg, sagaWorkflow, func(ctx context.Context, ev workflow.Event[params], step workflow.Step) (int, error) {
		for i := 1; i <= 5; i++ {
			_, err := workflow.DoWithCompensation(step, fmt.Sprintf("s%d", i),
				recorded(logPath, func(context.Context) (int, error) {
					if i == 4 {
						return 0, workflow.NonRetryable(errors.New("s4 failed for good"))
					}
					return ev.Payload.N*10 + i, nil
				}),
				recordedUndo(logPath, func(ctx context.Context, _ int) error {
					if i == 2 {
						return blockFirstStart(ctx, logPath)
					}
					return nil
				}))
			if err != nil {
				return 0, err
			}
		}
		return 0, errors.New("unreachable: s4 fails")
	})

	// parent: step a, then an Invoke of kid, then step b on the child's
	// output.
	workflow.MustRegister(reg, parentWorkflow, func(ctx context.Context, ev workflow.Event[params], step workflow.Step) (parentOutput, error) {
		a, err := workflow.Do(step, "a", recorded(logPath, func(context.Context) (int, error) {
			return ev.Payload.N * 10, nil
		}))
		if err != nil {
			return parentOutput{}, err
		}
		kid, err := workflow.Invoke[int](step, "kid", workflow.InvokeOptions{Workflow: kidWorkflow, Params: params{N: a}})
		if err != nil {
			return parentOutput{}, err
		}
		b, err := workflow.Do(step, "b", recorded(logPath, func(context.Context) (int, error) {
			return kid + 1, nil
		}))
		if err != nil {
			return parentOutput{}, err
		}
		return parentOutput{A: a, Kid: kid, B: b}, nil
	})
	// kid: one step, k, on the parent's number.
	workflow.MustRegister(reg, kidWorkflow, func(ctx context.Context, ev workflow.Event[params], step workflow.Step) (int, error) {
		return workflow.Do(step, "k", recorded(logPath, func(context.Context) (int, error) {
			return ev.Payload.N * 10, nil
		}))
	})
}

type parentOutput struct {
	A   int `json:"a"`
	Kid int `json:"kid"`
	B   int `json:"b"`
}

// blockFirstStart blocks the first start of the calling step for slowBlock,
// or until ctx ends; any later start returns at once. The attempt number
// cannot tell the first start, since an attempt cut short by a crash left no
// record; the side-effect log can.
func blockFirstStart(ctx context.Context, logPath string) error {
	lines, err := readLog(logPath)
	if err != nil {
		return err
	}
	info, _ := workflow.StepInfoFromContext(ctx)
	if count(lines, info.InstanceID, info.Step, "start") != 1 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(slowBlock):
		return nil
	}
}

// recordedUndo is recorded for a compensation.
func recordedUndo[T any](logPath string, fn func(ctx context.Context, result T) error) func(ctx context.Context, result T) error {
	return func(ctx context.Context, result T) error {
		_, err := recorded(logPath, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, fn(ctx, result)
		})(ctx)
		return err
	}
}

// recorded wraps a step callback so that it appends "<instance> <step>
// start" to the log before it runs and "<instance> <step> done <attempt>"
// after it succeeded, each synced to disk before it goes on, so the log
// holds everything that ran even when the process is killed.
func recorded[T any](logPath string, fn func(ctx context.Context) (T, error)) func(ctx context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		var zero T
		info, ok := workflow.StepInfoFromContext(ctx)
		if !ok {
			return zero, workflow.NonRetryable(errors.New("step callback without step info"))
		}
		if err := appendLine(logPath, fmt.Sprintf("%s %s start", info.InstanceID, info.Step)); err != nil {
			return zero, err
		}
		v, err := fn(ctx)
		if err != nil {
			return zero, err
		}
		if err := appendLine(logPath, fmt.Sprintf("%s %s done %d", info.InstanceID, info.Step, info.Attempt)); err != nil {
			return zero, err
		}
		return v, nil
	}
}

// appendLine appends one line to the file at path and syncs it. A single
// O_APPEND write keeps lines of concurrent callbacks whole.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening side-effect log: %w", err)
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing side-effect log: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("syncing side-effect log: %w", err)
	}
	return f.Close()
}

// logLine is one line of the side-effect log: "<instance> <step> start",
// "<instance> <step> done <attempt>", or "<parent> <step> created" for the
// child an Invoke step started, written before a host kills itself after
// storing it.
type logLine struct {
	instance, step, what string
	// attempt is set on "done" lines.
	attempt int
}

// readLog returns the lines of the side-effect log; a log not written yet
// has none.
func readLog(path string) ([]logLine, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening side-effect log: %w", err)
	}
	defer func() { _ = f.Close() }()
	var lines []logLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) == 3 && (fields[2] == "start" || fields[2] == "created"):
			lines = append(lines, logLine{instance: fields[0], step: fields[1], what: fields[2]})
		case len(fields) == 4 && fields[2] == "done":
			attempt, err := strconv.Atoi(fields[3])
			if err != nil {
				return nil, fmt.Errorf("reading side-effect log line %q: %w", sc.Text(), err)
			}
			lines = append(lines, logLine{instance: fields[0], step: fields[1], what: "done", attempt: attempt})
		default:
			return nil, fmt.Errorf("reading side-effect log: malformed line %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading side-effect log: %w", err)
	}
	return lines, nil
}

// count returns how many lines record what ("start" or "done") for the step
// of the instance.
func count(lines []logLine, instance, step, what string) int {
	n := 0
	for _, l := range lines {
		if l.instance == instance && l.step == step && l.what == what {
			n++
		}
	}
	return n
}

// doneAttempts returns the attempt numbers of the "done" lines of the step of
// the instance.
func doneAttempts(lines []logLine, instance, step string) []int {
	var attempts []int
	for _, l := range lines {
		if l.instance == instance && l.step == step && l.what == "done" {
			attempts = append(attempts, l.attempt)
		}
	}
	return attempts
}

// TestHelperProcess is the host program the durability tests start, kill and
// start again: it is this test binary re-executed with envHelper set. It
// opens the database (migrating an SQLite file; the test migrated its
// Postgres schema), builds a host (duraflow.New) as a real host program does,
// creates the instances when envCreate asks it to, and runs until every
// instance has ended. With envKillAfterChild it kills itself once the first
// child of an Invoke step is stored. Without envHelper it does nothing.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(envHelper) != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), helperLifetime)
	defer cancel()

	var store db.Store
	if dsn := os.Getenv(envDB); strings.HasPrefix(dsn, "postgres") {
		pg, err := postgres.Open(ctx, dsn, postgres.WithWakeChannel(os.Getenv(envWakeChannel)))
		require.NoError(t, err)
		defer func() { require.NoError(t, pg.Close()) }()
		store = pg
	} else {
		lite, err := sqlite.Open(ctx, dsn)
		require.NoError(t, err)
		defer func() { require.NoError(t, lite.Close()) }()
		require.NoError(t, sqlite.Migrate(ctx, lite))
		store = lite
	}
	if os.Getenv(envKillAfterChild) == "1" {
		store = &killAfterChild{Store: store, logPath: os.Getenv(envLog)}
	}

	reg := workflow.NewRegistry()
	register(reg, os.Getenv(envLog))
	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), DisableScheduler: true,
		Runner: &runner.Config{
			LeaseDuration:     leaseDuration,
			HeartbeatInterval: heartbeatInterval,
			PollInterval:      pollInterval,
		},
	})
	require.NoError(t, err)
	require.NoError(t, host.Start(ctx))
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, host.Stop(stopCtx))
	}()
	c := host.Client()

	name := os.Getenv(envWorkflow)
	ids := strings.Split(os.Getenv(envInstances), ",")
	if os.Getenv(envCreate) == "1" {
		// One batch, so that every instance exists before any runs (a host
		// that kills itself may do so as soon as the first one runs).
		reqs := make([]dftype.CreateRequest, len(ids))
		for i, id := range ids {
			p, err := json.Marshal(params{N: i + 1})
			require.NoError(t, err)
			reqs[i] = dftype.CreateRequest{ID: id, Params: p}
		}
		_, err := c.CreateBatch(ctx, name, reqs)
		require.NoError(t, err)
	}

	tick := time.NewTicker(waitTick)
	defer tick.Stop()
	for {
		ended := true
		for _, id := range ids {
			info, err := c.Get(ctx, name, id)
			require.NoError(t, err)
			ended = ended && info.Status.Terminal()
		}
		if ended {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("helper: instances of %s did not end within %s", name, helperLifetime)
		case <-tick.C:
		}
	}
}

// killAfterChild is a store that kills its process with SIGKILL as soon as
// it has stored the first child of an Invoke step: the parent's runner
// started the child and dies before it records that it did. It writes
// "<parent> <step> created" to the side-effect log first.
type killAfterChild struct {
	db.Store
	logPath string
}

func (s *killAfterChild) InstanceCreate(ctx context.Context, p *db.InstanceCreateParams) (db.CreateResult, error) {
	res, err := s.Store.InstanceCreate(ctx, p)
	if err == nil && p.Parent != nil {
		if err := appendLine(s.logPath, fmt.Sprintf("%s %s created", p.Parent.InstanceID, p.Parent.StepKey)); err != nil {
			return res, err
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not delivered synchronously; nothing may run after it
	}
	return res, err
}

// backend is a database the scenarios run on.
type backend struct {
	name string
	// open returns a fresh, migrated database for the test: a store on it
	// for the test's own reads, the DSN a helper process opens, and for
	// Postgres the wake channel.
	open func(t *testing.T, dir string) (store db.Store, dsn, wakeChannel string)
}

var backends = []backend{
	{name: "sqlite", open: func(t *testing.T, dir string) (db.Store, string, string) {
		// The test reads the file beside the helper processes, which WAL
		// mode allows.
		path := filepath.Join(dir, "duraflow.db")
		store, err := sqlite.Open(t.Context(), path)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, store.Close()) })
		require.NoError(t, sqlite.Migrate(t.Context(), store))
		return store, path, ""
	}},
	{name: "postgres", open: func(t *testing.T, _ string) (db.Store, string, string) {
		s := pgtest.NewSchema(t)
		return s.Store, s.URL, s.WakeChannel
	}},
}

// forEachBackend runs scenario on each backend, in parallel subtests.
func forEachBackend(t *testing.T, scenario func(t *testing.T, be backend)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			scenario(t, be)
		})
	}
}

// testBundle is one scenario's database, side-effect log and instances.
type testBundle struct {
	dir         string
	dsn         string
	wakeChannel string
	logPath     string
	store       db.Store
	workflow    string
	ids         []string
	helpers     int
	// killAfterChild makes the next helper kill itself after storing the
	// first child of an Invoke step.
	killAfterChild bool
}

// setup creates a fresh database on be and opens it for reading beside the
// helper processes.
func setup(t *testing.T, be backend, workflowName string) *testBundle {
	t.Helper()
	dir := t.TempDir()
	b := &testBundle{
		dir:      dir,
		logPath:  filepath.Join(dir, "side-effects.log"),
		workflow: workflowName,
	}
	for i := range instancesPerScenario {
		b.ids = append(b.ids, fmt.Sprintf("%s-%d", workflowName, i+1))
	}
	b.store, b.dsn, b.wakeChannel = be.open(t, dir)
	return b
}

func (b *testBundle) ref(id string) db.InstanceRef {
	return db.InstanceRef{WorkflowName: b.workflow, ID: id}
}

func (b *testBundle) readLog(t *testing.T) []logLine {
	t.Helper()
	lines, err := readLog(b.logPath)
	require.NoError(t, err)
	return lines
}

// helper is a running host process.
type helper struct {
	cmd     *exec.Cmd
	outPath string
	// exited is closed once the process has exited and cmd.ProcessState is set.
	exited chan struct{}
}

// startHelper starts a host process on the bundle's database. With create it
// creates the instances; without, it only recovers what the file holds. The
// process is killed when the test ends, and its output logged if the test
// failed.
func (b *testBundle) startHelper(t *testing.T, create bool) *helper {
	t.Helper()
	b.helpers++
	outPath := filepath.Join(b.dir, fmt.Sprintf("helper-%d.out", b.helpers))
	out, err := os.Create(outPath)
	require.NoError(t, err)
	defer func() { _ = out.Close() }() // the child has its own descriptor

	createFlag := "0"
	if create {
		createFlag = "1"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	kill := "0"
	if b.killAfterChild {
		kill = "1"
	}
	cmd.Env = append(os.Environ(),
		envHelper+"=1",
		envDB+"="+b.dsn,
		envWakeChannel+"="+b.wakeChannel,
		envKillAfterChild+"="+kill,
		envLog+"="+b.logPath,
		envWorkflow+"="+b.workflow,
		envInstances+"="+strings.Join(b.ids, ","),
		envCreate+"="+createFlag,
	)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	h := &helper{cmd: cmd, outPath: outPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.exited
		if t.Failed() {
			output, _ := os.ReadFile(outPath)
			t.Logf("output of helper process %d (%s):\n%s", cmd.Process.Pid, cmd.ProcessState, output)
		}
	})
	return h
}

// kill kills the host with SIGKILL, so that it gets no chance to clean up,
// and waits until it is gone. It fails the test if the host had exited on
// its own.
func (h *helper) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, h.cmd.Process.Kill())
	select {
	case <-h.exited:
	case <-time.After(waitTimeout):
		t.Fatalf("helper process %d did not die within %s of SIGKILL", h.cmd.Process.Pid, waitTimeout)
	}
	require.Equal(t, -1, h.cmd.ProcessState.ExitCode(),
		"helper process ended on its own (%s) before it was killed", h.cmd.ProcessState)
}

// waitExit waits until the host has ended every instance and exited, and
// requires that it exited cleanly.
func (h *helper) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-h.exited:
	case <-time.After(waitTimeout):
		t.Fatalf("helper process %d did not finish its instances within %s", h.cmd.Process.Pid, waitTimeout)
	}
	require.True(t, h.cmd.ProcessState.Success(), "helper process failed: %s", h.cmd.ProcessState)
}

// waitFor polls cond until it returns nil. It fails the test with cond's last
// error when waitTimeout passes or when the host exits first.
func (h *helper) waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	timeout := time.After(waitTimeout)
	tick := time.NewTicker(waitTick)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-h.exited:
			t.Fatalf("waiting for %s: helper process exited (%s); last: %v", what, h.cmd.ProcessState, err)
		case <-timeout:
			t.Fatalf("waiting for %s: not within %s; last: %v", what, waitTimeout, err)
		case <-tick.C:
		}
	}
}

// requireComplete requires that the instance completed with exactly the
// output want and that its task is gone.
func (b *testBundle) requireComplete(t *testing.T, id string, want any) {
	t.Helper()
	inst := b.get(t, id)
	require.Equal(t, dftype.StatusComplete, inst.Status, "%s: error %s: %s", id, inst.ErrorName, inst.ErrorMessage)
	wantJSON, err := json.Marshal(want)
	require.NoError(t, err)
	require.JSONEq(t, string(wantJSON), string(inst.Output), "%s: output", id)
	_, err = b.store.TaskGet(t.Context(), b.ref(id))
	require.ErrorIs(t, err, db.ErrNotFound, "%s: a complete instance keeps no task", id)
}

// requireSteps requires that the instance's run recorded exactly the steps of
// want, by name and type, each once and complete, and returns them by name.
func (b *testBundle) requireSteps(t *testing.T, id string, want map[string]db.StepType) map[string]*db.Step {
	t.Helper()
	byKey := b.requireStepsOf(t, id)
	for _, s := range byKey {
		require.Equal(t, want[s.Key], s.Type, "%s: type of step %q", id, s.Key)
		require.Equal(t, db.StepStatusComplete, s.Status, "%s: status of step %q", id, s.Key)
	}
	require.Len(t, byKey, len(want), "%s: steps %v", id, byKey)
	return byKey
}

// TestSurvivesSIGKILL kills a host process with SIGKILL, on an SQLite file
// and on Postgres: while its instances sleep, while a step runs, inside a
// saga's compensation, and between an Invoke step's start of its child and
// the parent's record of it. It starts the host again and requires, from the
// database and the side-effect log, that every instance ends as it should
// and that nothing that had completed before the kill runs again.
func TestSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, be backend)
	}{
		{"while instances sleep", testKillWhileSleeping},
		{"while a step runs", testKillWhileStepRuns},
		{"inside a compensation", testKillInsideCompensation},
		{"after an invoke starts its child", testKillAfterChildStarted},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, sc.run)
		})
	}
}

func testKillWhileSleeping(t *testing.T, be backend) {
	b := setup(t, be, sleeperWorkflow)

	before := b.killWhen(t, "every instance to sleep after step a", func(lines []logLine) error {
		if err := b.each(lines, "a", "done"); err != nil {
			return err
		}
		for _, id := range b.ids {
			inst, err := b.store.InstanceGet(t.Context(), b.ref(id))
			if err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			if inst.Status != dftype.StatusWaiting {
				return fmt.Errorf("%s: status %s", id, inst.Status)
			}
		}
		return nil
	})
	for _, id := range b.ids {
		require.Zero(t, count(before, id, "b", "start"),
			"%s: step b started before the kill; the %s sleep is too short for this machine", id, napFor)
		require.Equal(t, dftype.StatusWaiting, b.get(t, id).Status,
			"%s: status at the kill; the %s sleep is too short for this machine", id, napFor)
	}

	after, restarted := b.restart(t, before)
	for i, id := range b.ids {
		n := i + 1
		b.requireComplete(t, id, sleeperOutput{A: n * 10, B: n*10 + 1})

		requireRanOnce(t, after, id, "a")
		require.Zero(t, count(restarted, id, "a", "start"), "%s: step a ran again after the restart", id)
		require.Equal(t, 1, count(restarted, id, "b", "start"), "%s: step b starts after the restart", id)
		requireRanOnce(t, after, id, "b")

		steps := b.requireSteps(t, id, map[string]db.StepType{"a": db.StepTypeDo, "nap": db.StepTypeSleep, "b": db.StepTypeDo})
		require.Equal(t, 1, steps["a"].Attempts, "%s: attempts of step a", id)
		require.Equal(t, 1, steps["b"].Attempts, "%s: attempts of step b", id)
	}
}

func testKillWhileStepRuns(t *testing.T, be backend) {
	b := setup(t, be, slowWorkflow)

	before := b.killWhen(t, "the slow step to start in every instance", func(lines []logLine) error {
		return b.each(lines, "slow", "start")
	})
	for _, id := range b.ids {
		require.Equal(t, []int{1}, doneAttempts(before, id, "a"), "%s: step a completed before the kill", id)
		require.Empty(t, doneAttempts(before, id, "slow"), "%s: step slow completed before the kill", id)
		require.Zero(t, count(before, id, "c", "start"), "%s: step c started before the kill", id)
		require.Equal(t, dftype.StatusRunning, b.get(t, id).Status, "%s: status at the kill", id)
		task, err := b.store.TaskGet(t.Context(), b.ref(id))
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusProcessing, task.Status, "%s: the dead host holds the task's lease", id)
	}

	after, restarted := b.restart(t, before)
	for i, id := range b.ids {
		n := i + 1
		b.requireComplete(t, id, slowOutput{A: n * 10, Slow: n*10 + 1, C: n*10 + 2})

		requireRanOnce(t, after, id, "a")
		require.Zero(t, count(restarted, id, "a", "start"), "%s: step a ran again after the restart", id)
		require.Equal(t, 2, count(after, id, "slow", "start"), "%s: step slow starts, before and after the kill", id)
		require.Len(t, doneAttempts(restarted, id, "slow"), 1, "%s: step slow completions after the restart", id)
		require.Len(t, doneAttempts(after, id, "slow"), 1, "%s: step slow completions", id)
		requireRanOnce(t, after, id, "c")

		steps := b.requireSteps(t, id, map[string]db.StepType{"a": db.StepTypeDo, "slow": db.StepTypeDo, "c": db.StepTypeDo})
		require.Equal(t, 1, steps["a"].Attempts, "%s: attempts of step a", id)
		require.Equal(t, doneAttempts(after, id, "slow")[0], steps["slow"].Attempts,
			"%s: step slow records the attempt that completed it", id)
		require.Equal(t, 1, steps["c"].Attempts, "%s: attempts of step c", id)
	}
}

// testKillInsideCompensation kills the host inside the compensation of s2:
// s4 failed for good, the compensation of s3 completed, and that of s2 has
// started. After the restart the compensations of s2 and s1 run, in that
// order, and each compensation and step completes exactly once.
func testKillInsideCompensation(t *testing.T, be backend) {
	b := setup(t, be, sagaWorkflow)

	before := b.killWhen(t, "the compensation of s2 to start in every instance", func(lines []logLine) error {
		return b.each(lines, "compensate:s2", "start")
	})
	for _, id := range b.ids {
		require.Equal(t, []int{1}, doneAttempts(before, id, "compensate:s3"), "%s: the compensation of s3 completed before the kill", id)
		require.Empty(t, doneAttempts(before, id, "compensate:s2"), "%s: the compensation of s2 completed before the kill", id)
		require.Zero(t, count(before, id, "compensate:s1", "start"), "%s: the compensation of s1 started before the kill", id)
		inst := b.get(t, id)
		require.False(t, inst.Status.Terminal(), "%s: status at the kill: %s", id, inst.Status)
	}

	after, _ := b.restart(t, before)
	for _, id := range b.ids {
		inst := b.get(t, id)
		require.Equal(t, dftype.StatusErrored, inst.Status, "%s", id)
		require.Equal(t, "NonRetryableError", inst.ErrorName, "%s: the original error is kept", id)
		require.Contains(t, inst.ErrorMessage, "s4 failed for good", "%s", id)

		for _, st := range []string{"s1", "s2", "s3"} {
			requireRanOnce(t, after, id, st)
		}
		require.Equal(t, 1, count(after, id, "s4", "start"), "%s: step s4 starts (it fails for good)", id)
		require.Zero(t, count(after, id, "s5", "start"), "%s: step s5 never starts", id)
		require.Equal(t, 1, count(after, id, "compensate:s3", "start"), "%s: the compensation of s3 starts", id)
		require.Equal(t, 2, count(after, id, "compensate:s2", "start"), "%s: the compensation of s2 starts, before and after the kill", id)
		require.Equal(t, 1, count(after, id, "compensate:s1", "start"), "%s: the compensation of s1 starts", id)
		var order []string
		for _, l := range after {
			if l.instance == id && l.what == "done" && strings.HasPrefix(l.step, workflow.CompensationStepPrefix) {
				order = append(order, l.step)
			}
		}
		require.Equal(t, []string{"compensate:s3", "compensate:s2", "compensate:s1"}, order, "%s: compensations complete once each, in reverse order", id)

		steps := b.requireStepsOf(t, id)
		for _, key := range []string{"compensate:s3", "compensate:s2", "compensate:s1"} {
			require.Contains(t, steps, key, "%s", id)
			require.Equal(t, db.StepStatusComplete, steps[key].Status, "%s: %s", id, key)
		}
	}
}

// testKillAfterChildStarted has the host kill itself right after the Invoke
// step of a parent stored its child, before the parent's runner recorded
// that it did. After the restart the parent's replay finds that child
// instead of starting another: every parent has exactly one child, and
// completes with its output.
func testKillAfterChildStarted(t *testing.T, be backend) {
	b := setup(t, be, parentWorkflow)
	b.killAfterChild = true
	first := b.startHelper(t, true)
	first.waitKilled(t)
	b.killAfterChild = false

	// Other parents' Invoke steps may have stored their children too
	// before the signal landed; none of them got further (the store never
	// answers them).
	before := b.readLog(t)
	var killedIn []string
	for _, l := range before {
		if l.what == "created" {
			killedIn = append(killedIn, l.instance)
		}
	}
	require.NotEmpty(t, killedIn, "the host killed itself after storing a child: %v", before)
	for _, id := range killedIn {
		steps := b.requireStepsOf(t, id)
		require.NotContains(t, steps, "kid", "%s: the parent recorded its invoke step before the kill", id)
		kids, err := b.store.InstanceChildren(t.Context(), b.ref(id))
		require.NoError(t, err)
		require.Len(t, kids, 1, "%s: the child stored before the kill", id)
	}
	// Step a of a parent that was not at its Invoke yet may have run
	// without its checkpoint committing; it runs again. One recorded
	// complete must not.
	aRecorded := map[string]bool{}
	for _, id := range b.ids {
		if st, ok := b.requireStepsOf(t, id)["a"]; ok && st.Status == db.StepStatusComplete {
			aRecorded[id] = true
		}
	}
	for _, id := range killedIn {
		require.True(t, aRecorded[id], "%s: step a recorded before its Invoke started the child", id)
	}

	after, restarted := b.restart(t, before)
	for i, id := range b.ids {
		n := i + 1
		b.requireComplete(t, id, parentOutput{A: n * 10, Kid: n * 100, B: n*100 + 1})
		if aRecorded[id] {
			require.Empty(t, doneAttempts(restarted, id, "a"), "%s: step a, recorded before the kill, ran again", id)
		}
		require.Equal(t, []int{1}, doneAttempts(after, id, "b"), "%s: step b completions", id)

		kids, err := b.store.InstanceChildren(t.Context(), b.ref(id))
		require.NoError(t, err)
		require.Len(t, kids, 1, "%s: one child, not two", id)
		kid := kids[0]
		require.Equal(t, kidWorkflow, kid.WorkflowName)
		require.Equal(t, dftype.StatusComplete, kid.Status, "%s: its child %s", id, kid.ID)
		require.Equal(t, 1, count(after, kid.ID, "k", "start"), "%s: step k of its child starts", id)
	}
}

// killWhen starts a host that creates the instances, waits until ready
// holds of the side-effect log, kills the host with SIGKILL, and returns the
// log as the kill left it.
func (b *testBundle) killWhen(t *testing.T, what string, ready func(lines []logLine) error) []logLine {
	t.Helper()
	first := b.startHelper(t, true)
	first.waitFor(t, what, func() error {
		lines, err := readLog(b.logPath)
		if err != nil {
			return err
		}
		return ready(lines)
	})
	first.kill(t)
	return b.readLog(t)
}

// restart starts the host again, without creating, and waits until it has
// ended every instance and exited. It requires that the side-effect log
// before, read at the kill, is the start of the log now, and returns the
// whole log and the lines the restart wrote.
func (b *testBundle) restart(t *testing.T, before []logLine) (after, restarted []logLine) {
	t.Helper()
	b.startHelper(t, false).waitExit(t)
	after = b.readLog(t)
	require.Equal(t, before, after[:len(before)], "the side-effect log is append-only")
	return after, after[len(before):]
}

// each is a condition of killWhen: every instance has exactly one line
// "<instance> <step> <what>" in lines.
func (b *testBundle) each(lines []logLine, step, what string) error {
	for _, id := range b.ids {
		if n := count(lines, id, step, what); n != 1 {
			return fmt.Errorf("%s: step %s %s %d times", id, step, what, n)
		}
	}
	return nil
}

// requireRanOnce requires that step of the instance started once and
// completed once, at its first attempt, in lines.
func requireRanOnce(t *testing.T, lines []logLine, id, step string) {
	t.Helper()
	require.Equal(t, 1, count(lines, id, step, "start"), "%s: step %s starts", id, step)
	require.Equal(t, []int{1}, doneAttempts(lines, id, step), "%s: step %s completions", id, step)
}

// get returns the instance.
func (b *testBundle) get(t *testing.T, id string) *db.Instance {
	t.Helper()
	inst, err := b.store.InstanceGet(t.Context(), b.ref(id))
	require.NoError(t, err)
	return inst
}

// requireStepsOf returns the steps of the instance's first run by name,
// requiring that none is recorded twice.
func (b *testBundle) requireStepsOf(t *testing.T, id string) map[string]*db.Step {
	t.Helper()
	steps, err := b.store.StepList(t.Context(), &db.StepListParams{WorkflowName: b.workflow, InstanceID: id, RunNumber: 1})
	require.NoError(t, err)
	byKey := map[string]*db.Step{}
	for _, s := range steps {
		require.NotContains(t, byKey, s.Key, "%s: step %q recorded twice", id, s.Key)
		byKey[s.Key] = s
	}
	return byKey
}

// waitKilled waits until the host, which kills itself, is gone, and requires
// that SIGKILL ended it.
func (h *helper) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-h.exited:
	case <-time.After(waitTimeout):
		t.Fatalf("helper process %d did not kill itself within %s", h.cmd.Process.Pid, waitTimeout)
	}
	ws, ok := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"helper process ended (%s), not by SIGKILL", h.cmd.ProcessState)
}
