//go:build chaos && linux

package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/pgcluster"
	"github.com/duraflow/duraflow/workflow"
)

var seedFlag = flag.Int64("chaos.seed", 0, "seed of the chaos run; 0 takes DURAFLOW_CHAOS_SEED, else the clock")

const (
	// crashLoopID is the id of the crash-looping instance on a worker of
	// its own.
	crashLoopID = "crashloop-1"
	// sharedLoopID is the id of the crash-looping instance on the chaos
	// workers, beside the ordinary instances.
	sharedLoopID = "crashloop-shared"
	// crashLimit is how many lost leases the runner allows a step before it
	// errors the instance ("step X lost its runner N times"), by default.
	crashLimit = 5
	// maxSuspectLosses is the most crash-loop attempts in a row an
	// ordinary instance may die beside under the quarantine: the lease
	// losses that make a task suspect (runner's threshold, 1 or 2). Once
	// both it and the crash loop are suspect, no runner runs them together.
	maxSuspectLosses = 2
	// restartDowntime is how long the private Postgres stays down per restart.
	restartDowntime = 2500 * time.Millisecond
	// pollTick is how often the test looks at the database while it waits.
	pollTick = 100 * time.Millisecond
)

// config is the run's knobs (see the package documentation).
type config struct {
	seed      int64
	duration  time.Duration
	backends  []string
	workers   int
	rate      float64
	lease     time.Duration
	maxStall  time.Duration
	crashLoop bool
	report    string
}

func loadConfig(t *testing.T) config {
	t.Helper()
	cfg := config{
		seed:      *seedFlag,
		duration:  envDuration(t, "DURAFLOW_CHAOS_DURATION", time.Minute),
		backends:  []string{"sqlite", "postgres"},
		workers:   envInt(t, "DURAFLOW_CHAOS_WORKERS", 3),
		lease:     envDuration(t, "DURAFLOW_CHAOS_LEASE", 10*time.Second),
		maxStall:  envDuration(t, "DURAFLOW_CHAOS_MAX_STALL", 3*time.Second),
		crashLoop: os.Getenv("DURAFLOW_CHAOS_CRASHLOOP") != "0",
		report:    os.Getenv("DURAFLOW_CHAOS_REPORT"),
	}
	cfg.rate = float64(envInt(t, "DURAFLOW_CHAOS_RATE", 4))
	if cfg.seed == 0 {
		if s := os.Getenv("DURAFLOW_CHAOS_SEED"); s != "" {
			n, err := strconv.ParseInt(s, 10, 64)
			require.NoError(t, err, "DURAFLOW_CHAOS_SEED")
			cfg.seed = n
		} else {
			cfg.seed = time.Now().UnixNano()
		}
	}
	if s := os.Getenv("DURAFLOW_CHAOS_BACKENDS"); s != "" {
		cfg.backends = strings.Split(s, ",")
	}
	require.GreaterOrEqual(t, cfg.workers, 2, "DURAFLOW_CHAOS_WORKERS: a stopped worker needs another to take over")
	require.Positive(t, cfg.rate, "DURAFLOW_CHAOS_RATE")
	return cfg
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	require.NoError(t, err, name)
	return d
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return n
}

// TestChaos runs the chaos suite on each backend in turn (one at a time, so
// each has the machine to itself) and prints the summary table.
func TestChaos(t *testing.T) {
	if os.Getenv(envWorker) == "1" {
		return
	}
	cfg := loadConfig(t)
	t.Logf("seed %d (replay with -chaos.seed=%d or DURAFLOW_CHAOS_SEED=%d)", cfg.seed, cfg.seed, cfg.seed)
	// A runner that drops its run when the database goes away stalls until
	// its lease expires: at least a lease less a heartbeat interval less the
	// downtime after the database's return. Only when that exceeds the
	// allowed stall does the check tell keeping the lease from losing it.
	if floor := cfg.lease*2/3 - restartDowntime; floor <= cfg.maxStall {
		t.Logf("warning: with a %s lease, a runner that loses its lease in a restart stalls only about %s, within the allowed %s: the stall check cannot fail",
			cfg.lease, floor.Round(100*time.Millisecond), cfg.maxStall)
	}
	var sums []*summary
	for i, backend := range cfg.backends {
		t.Run(backend, func(t *testing.T) {
			s := &summary{backend: backend, duration: cfg.duration}
			sums = append(sums, s)
			runChaos(t, cfg, backend, cfg.seed+int64(i)*7919, s)
		})
	}
	table := formatSummary(cfg, sums)
	fmt.Printf("\nchaos summary (seed %d):\n%s\n", cfg.seed, table)
	// The failures again below the table: a CI log cut to its tail still
	// shows why the run failed.
	for _, s := range sums {
		for i, f := range s.failures {
			if i == maxFailuresShown {
				fmt.Printf("%s: %d more failures (see above)\n", s.backend, len(s.failures)-i)
				break
			}
			fmt.Printf("%s: FAILED: %s\n", s.backend, f)
		}
	}
	if cfg.report != "" {
		require.NoError(t, os.WriteFile(cfg.report, []byte(table), 0o644))
	}
}

// run is one backend's chaos run.
type run struct {
	t       *testing.T
	cfg     config
	backend string
	dsn     string
	store   db.Store
	client  *client.Client
	fleet   *fleet
	cluster *pgcluster.Cluster
	ledger  string
	sum     *summary

	mu sync.Mutex
	// created maps every instance the test created to its params' N.
	created map[string]int
	// stale are the attempts of stopped workers whose tasks were taken over
	// while they were stopped: none of them may ever be recorded.
	stale []staleAttempt
	// stopping is set while a worker is stopped.
	stopping map[int]bool
	// stopped are the workers that were ever stopped.
	stopped []int
	// failures are the invariant violations found while the chaos ran.
	failures []string
	// crashed and killed are the pids of the chaos workers that died of
	// their own accord and that the test killed; loopCrashed those of the
	// isolated crash-loop worker.
	crashed, killed, loopCrashed []int
}

type staleAttempt struct {
	pid                   int
	instance, step, token string
}

func (r *run) failf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func runChaos(t *testing.T, cfg config, backend string, seed int64, sum *summary) {
	ctx := t.Context()
	dir := t.TempDir()
	r := &run{
		t: t, cfg: cfg, backend: backend, ledger: filepath.Join(dir, "ledger"), sum: sum,
		created: map[string]int{}, stopping: map[int]bool{},
	}
	t.Logf("%s: seed %d", backend, seed)
	switch backend {
	case "sqlite":
		r.dsn = filepath.Join(dir, "chaos.db")
		s, err := sqlite.Open(ctx, r.dsn)
		require.NoError(t, err)
		require.NoError(t, sqlite.Migrate(ctx, s))
		r.store = s
	case "postgres":
		r.cluster = pgcluster.Start(t)
		r.dsn = r.cluster.URL()
		s, err := postgres.Open(ctx, r.dsn)
		require.NoError(t, err)
		require.NoError(t, postgres.Migrate(ctx, s.Pool()))
		r.store = s
	default:
		t.Fatalf("DURAFLOW_CHAOS_BACKENDS: unknown backend %q", backend)
	}
	t.Cleanup(func() { _ = r.store.Close() })
	reg := workflow.NewRegistry()
	registerWorkflows(reg, r.ledger)
	c, err := client.New(&client.Config{Store: r.store, Registry: reg})
	require.NoError(t, err)
	r.client = c

	settle := r.settleTimeout()
	env := []string{
		envBackend + "=" + backend,
		envDSN + "=" + r.dsn,
		envLedger + "=" + r.ledger,
		envLease + "=" + cfg.lease.String(),
		envLifetime + "=" + (cfg.duration + 2*settle + 2*time.Minute).String(),
	}
	workflows := chaosWorkflow
	if cfg.crashLoop {
		// The chaos workers also run a crash loop, which kills the worker
		// that runs it on every attempt: the runner's quarantine must keep
		// it from taking the ordinary instances down with it.
		workflows += "," + sharedLoopWorkflow
	}
	r.fleet = newFleet(t, "worker", dir, cfg.workers, append(env, envWorkflow+"="+workflows))
	var loop *fleet
	if cfg.crashLoop {
		// And a worker of its own, out of the chaos, which its instance
		// kills on every attempt and the fleet starts again: the bound
		// alone, with nothing else to lose a lease to.
		loop = newFleet(t, "crashloop", dir, 1, append(env, envWorkflow+"="+crashLoopWorkflow))
		r.create(ctx, crashLoopWorkflow, crashLoopID, json.RawMessage(`{}`))
		r.create(ctx, sharedLoopWorkflow, sharedLoopID, json.RawMessage(`{}`))
	}

	start := time.Now()
	chaosCtx, stopChaos := context.WithTimeout(ctx, cfg.duration)
	defer stopChaos()
	var load, stops, events sync.WaitGroup
	load.Go(func() { r.load(chaosCtx, rand.New(rand.NewPCG(uint64(seed), 1)), &events) })
	r.chaos(chaosCtx, rand.New(rand.NewPCG(uint64(seed), 2)), &stops, start)
	load.Wait()
	stops.Wait()
	events.Wait()
	t.Logf("%s: chaos over after %s; settling", backend, time.Since(start).Round(time.Second))

	r.settle(ctx, settle)
	r.fleet.close()
	r.crashed, r.killed = r.fleet.crashedPids(), r.fleet.killedPids()
	if loop != nil {
		loop.close()
		r.loopCrashed = loop.crashedPids()
	}
	r.verify(ctx)
	r.mu.Lock()
	sum.failures = slices.Clone(r.failures)
	r.mu.Unlock()
	for _, f := range sum.failures {
		t.Error(f)
	}
}

// settleTimeout bounds the wait for every instance to end once the chaos
// stopped: a few leases for the recoveries still pending.
func (r *run) settleTimeout() time.Duration {
	return max(90*time.Second, 6*r.cfg.lease+30*time.Second)
}

// retry calls f until it succeeds, ctx ends or a minute passes (the
// database may be restarting); done reports an error that ends the retries.
func retry(ctx context.Context, f func() error, done func(error) bool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil || done != nil && done(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// create creates an instance, retrying through database restarts; an id
// already taken means an earlier try succeeded.
func (r *run) create(ctx context.Context, name, id string, params json.RawMessage) bool {
	err := retry(ctx, func() error {
		_, err := r.client.Create(ctx, name, dftype.CreateRequest{ID: id, Params: params})
		return err
	}, func(err error) bool { return errors.Is(err, workflow.ErrInstanceAlreadyExists) })
	if err != nil && !errors.Is(err, workflow.ErrInstanceAlreadyExists) {
		r.failf("creating %s: %v", id, err)
		return false
	}
	return true
}

// load creates chaos instances at the configured rate until ctx ends, and
// sends each its event after a random delay, while the chaos goes on.
func (r *run) load(ctx context.Context, rng *rand.Rand, events *sync.WaitGroup) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.rate))
	defer tick.Stop()
	for k := 1; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := chaosParams{N: k, NapMillis: 200 + rng.IntN(1300)}
		for i := range doSteps {
			var ms int
			switch doSteps[i] {
			case "a":
				ms = rng.IntN(100)
			case "b":
				ms = 500 + rng.IntN(1000)
			default:
				ms = 50 + rng.IntN(250)
			}
			p.StepMillis = append(p.StepMillis, ms)
		}
		raw, err := json.Marshal(p)
		if err != nil {
			r.failf("encoding params: %v", err)
			return
		}
		id := fmt.Sprintf("c%05d", k)
		delay := time.Duration(rng.IntN(4000)) * time.Millisecond
		if !r.create(context.WithoutCancel(ctx), chaosWorkflow, id, raw) {
			continue
		}
		r.mu.Lock()
		r.created[id] = k
		r.mu.Unlock()
		events.Go(func() {
			<-time.After(delay)
			payload, _ := json.Marshal(goEvent{X: eventValue(k)})
			bg := r.t.Context()
			// A send that fails as the database goes away may have been
			// stored all the same (committed, its answer lost). The instance
			// may then take the event and end before a retry, which finds
			// it terminal: that retry's answer means the send got through.
			// verify checks the output each instance made of its event.
			failed := false
			err := retry(bg, func() error {
				err := r.client.SendEvent(bg, chaosWorkflow, id, eventType, payload)
				if err != nil && !errors.Is(err, workflow.ErrInstanceTerminal) {
					failed = true
				}
				return err
			}, func(err error) bool { return failed && errors.Is(err, workflow.ErrInstanceTerminal) })
			if err != nil && !(failed && errors.Is(err, workflow.ErrInstanceTerminal)) {
				r.failf("sending the event of %s: %v", id, err)
				return
			}
			r.mu.Lock()
			r.sum.events++
			r.mu.Unlock()
		})
	}
}

// chaos does the chaos until ctx ends: every few seconds a random worker is
// killed, or stopped past its lease and resumed, or (Postgres) its LISTEN
// connection terminated; the Postgres server is restarted at set times.
func (r *run) chaos(ctx context.Context, rng *rand.Rand, stops *sync.WaitGroup, start time.Time) {
	var restarts []time.Time
	if r.cluster != nil {
		n := max(1, int(r.cfg.duration/(45*time.Second)))
		for i := range n {
			restarts = append(restarts, start.Add(time.Duration((float64(i)+0.5)/float64(n)*float64(r.cfg.duration))))
		}
	}
	first := []float64{0.1, 0.9}
	if r.cluster != nil {
		first = append(first, 0.3)
	}
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	for {
		wait := min(max(time.Duration(rng.ExpFloat64()*float64(3*time.Second)), 500*time.Millisecond), 8*time.Second)
		if len(restarts) > 0 && time.Until(restarts[0]) < wait {
			wait = max(time.Until(restarts[0]), 0)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if len(restarts) > 0 && !time.Now().Before(restarts[0]) {
			restarts = restarts[1:]
			r.restartDatabase(ctx)
			continue
		}
		roll := rng.Float64()
		if len(first) > 0 {
			// Every kind of chaos once, in random order, before chance
			// decides: a short run must not miss one.
			roll, first = first[0], first[1:]
		}
		switch {
		case roll < 0.2 && len(r.stoppedPids()) == 0:
			pid := r.fleet.pids()[rng.IntN(r.cfg.workers)]
			r.mu.Lock()
			r.stopping[pid] = true
			r.mu.Unlock()
			stops.Go(func() { r.stopWorker(ctx, pid) })
		case roll < 0.35 && r.cluster != nil:
			r.killListener(ctx, rng)
		default:
			r.killWorker(rng)
		}
	}
}

// everStopped returns the workers that were ever stopped.
func (r *run) everStopped() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.stopped)
}

func (r *run) stoppedPids() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pids []int
	for pid := range r.stopping {
		pids = append(pids, pid)
	}
	return pids
}

// livePids returns the workers that are neither stopped nor being stopped.
func (r *run) livePids() []int {
	stopped := r.stoppedPids()
	var live []int
	for _, pid := range r.fleet.pids() {
		if !slices.Contains(stopped, pid) {
			live = append(live, pid)
		}
	}
	return live
}

// killWorker kills a random worker that is not stopped with SIGKILL and
// starts a new one in its place after up to a second.
func (r *run) killWorker(rng *rand.Rand) {
	live := r.livePids()
	if len(live) == 0 {
		return
	}
	pid := live[rng.IntN(len(live))]
	slot := r.fleet.slotOf(pid)
	if slot < 0 {
		return
	}
	if r.fleet.kill(slot, time.Duration(rng.IntN(1000))*time.Millisecond) != 0 {
		r.mu.Lock()
		r.sum.kills++
		r.mu.Unlock()
	}
}

// killListener terminates the LISTEN connection of a random live worker and
// waits until the worker listens again.
func (r *run) killListener(ctx context.Context, rng *rand.Rand) {
	live := r.livePids()
	if len(live) == 0 {
		return
	}
	pid := live[rng.IntN(len(live))]
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, r.dsn)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	ok, err := terminateListener(cctx, conn, pid)
	if err != nil || !ok {
		return
	}
	r.mu.Lock()
	r.sum.listenerKills++
	r.mu.Unlock()
	for cctx.Err() == nil {
		if back, err := listening(cctx, conn, pid); err == nil && back {
			r.mu.Lock()
			r.sum.listenerReconnects++
			r.mu.Unlock()
			return
		}
		select {
		case <-cctx.Done():
		case <-time.After(pollTick):
		}
	}
	if r.fleet.slotOf(pid) >= 0 && ctx.Err() == nil {
		r.failf("worker %d did not LISTEN again within 15s of its listener's termination", pid)
	}
}

// heldTasks returns the tasks the worker's runner holds: instance id to the
// task version its lease is at.
func (r *run) heldTasks(ctx context.Context, owner string) (map[string]int64, error) {
	insts, err := r.store.InstanceList(ctx, &db.InstanceListParams{Statuses: []dftype.InstanceStatus{dftype.StatusRunning}, Limit: 1000})
	if err != nil {
		return nil, err
	}
	held := map[string]int64{}
	for _, inst := range insts {
		task, err := r.store.TaskGet(ctx, db.InstanceRef{WorkflowName: inst.WorkflowName, ID: inst.ID})
		if errors.Is(err, db.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if task.Status == db.TaskStatusProcessing && task.LockOwner == owner {
			held[inst.WorkflowName+"/"+inst.ID] = task.Version
		}
	}
	return held, nil
}

// stopWorker stops the worker with SIGSTOP, waits until another worker has
// taken over every task it held (its lease expired and the task was claimed
// again) or a lease and 10 s have passed, and resumes it with SIGCONT. The
// attempts it had started on the tasks taken over, and whose results were not
// recorded before it stopped, are stale: verify requires that none of them is
// ever recorded, though the resumed process finishes them.
func (r *run) stopWorker(ctx context.Context, pid int) {
	defer func() {
		r.mu.Lock()
		delete(r.stopping, pid)
		r.mu.Unlock()
	}()
	if syscall.Kill(pid, syscall.SIGSTOP) != nil {
		return
	}
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	for range 100 {
		if stopped(pid) {
			break
		}
		<-time.After(10 * time.Millisecond)
	}
	r.mu.Lock()
	r.sum.stops++
	r.stopped = append(r.stopped, pid)
	r.mu.Unlock()
	bg := context.WithoutCancel(ctx)
	var held map[string]int64
	if err := retry(bg, func() (err error) { held, err = r.heldTasks(bg, workerID(pid)); return err }, nil); err != nil {
		r.failf("listing the tasks of stopped worker %d: %v", pid, err)
		return
	}
	deadline := time.Now().Add(r.cfg.lease + 10*time.Second)
	taken := map[string]bool{}
	for len(taken) < len(held) && time.Now().Before(deadline) {
		for key, version := range held {
			if taken[key] {
				continue
			}
			name, id, _ := strings.Cut(key, "/")
			task, err := r.store.TaskGet(bg, db.InstanceRef{WorkflowName: name, ID: id})
			if errors.Is(err, db.ErrNotFound) || err == nil && task.Version != version {
				taken[key] = true
			}
		}
		<-time.After(pollTick)
	}
	// What the stopped process had recorded: it cannot record anything
	// while stopped, so this is all it recorded before the stop.
	recorded := map[string]bool{}
	for key := range taken {
		name, id, _ := strings.Cut(key, "/")
		var steps []*db.Step
		if err := retry(bg, func() (err error) {
			steps, err = r.store.StepList(bg, &db.StepListParams{WorkflowName: name, InstanceID: id, RunNumber: 1})
			return err
		}, nil); err != nil {
			r.failf("listing the steps of %s: %v", id, err)
			return
		}
		for _, s := range steps {
			if res, ok := decodeResult(s); ok {
				recorded[res.Token] = true
			}
		}
	}
	lines, err := readLedger(r.ledger)
	if err != nil {
		r.failf("%v", err)
		return
	}
	var stale []staleAttempt
	for _, l := range lines {
		if l.kind == 'S' && l.pid == pid && !recorded[l.token] &&
			(taken[chaosWorkflow+"/"+l.instance] || taken[sharedLoopWorkflow+"/"+l.instance]) {
			stale = append(stale, staleAttempt{pid: pid, instance: l.instance, step: l.step, token: l.token})
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stale = append(r.stale, stale...)
	r.sum.stopsHeld += len(held)
	r.sum.stopsTaken += len(taken)
}

// restartDatabase restarts the private Postgres in immediate mode with the
// set downtime, and measures the stall: from the database's return until
// each instance that was running on a live worker before the restart has
// made progress (a new step row, a completed step, or an end).
func (r *run) restartDatabase(ctx context.Context) {
	live := map[string]bool{}
	for _, pid := range r.livePids() {
		live[workerID(pid)] = true
	}
	progress := func(ref db.InstanceRef) (int, bool, error) {
		inst, err := r.store.InstanceGet(ctx, ref)
		if err != nil {
			return 0, false, err
		}
		steps, err := r.store.StepList(ctx, &db.StepListParams{WorkflowName: ref.WorkflowName, InstanceID: ref.ID, RunNumber: 1})
		if err != nil {
			return 0, false, err
		}
		n := len(steps)
		for _, s := range steps {
			if s.Status == db.StepStatusComplete {
				n++
			}
		}
		return n, inst.Status.Terminal(), nil
	}
	before := map[db.InstanceRef]int{}
	holder := map[db.InstanceRef]string{}
	insts, err := r.store.InstanceList(ctx, &db.InstanceListParams{Statuses: []dftype.InstanceStatus{dftype.StatusRunning}, Limit: 1000})
	if err != nil {
		r.failf("listing running instances before the restart: %v", err)
		return
	}
	for _, inst := range insts {
		if inst.WorkflowName == crashLoopWorkflow || inst.WorkflowName == sharedLoopWorkflow {
			// A crash-looping instance makes no progress by design: each
			// attempt kills its worker, and it waits for the next holder's
			// claim, restart or not.
			continue
		}
		ref := db.InstanceRef{WorkflowName: inst.WorkflowName, ID: inst.ID}
		task, err := r.store.TaskGet(ctx, ref)
		// A lease that expired already is held by no live runner: its
		// holder stopped heartbeating (it was stopped past its lease and
		// has just been resumed), and the instance waits for a takeover,
		// which is no restart's stall.
		if err != nil || task.Status != db.TaskStatusProcessing || !live[task.LockOwner] ||
			task.LockedUntil == nil || !task.LockedUntil.After(time.Now()) {
			continue
		}
		if n, _, err := progress(ref); err == nil {
			before[ref] = n
			holder[ref] = task.LockOwner
		}
	}
	back, err := r.cluster.Restart(restartDowntime)
	if err != nil {
		r.failf("restarting postgres: %v", err)
		return
	}
	r.mu.Lock()
	r.sum.restarts++
	r.mu.Unlock()
	limit := 3*r.cfg.lease + 10*time.Second
	var stalls []time.Duration
	var slowest string
	crashedHolder := 0
	for len(before) > 0 && time.Since(back) < limit {
		// The chaos waits for the restart, so a worker that left the fleet
		// meanwhile died of its own accord, in the shared crash loop: its
		// instances wait for its lease, which is no restart's stall.
		alive := map[string]bool{}
		for _, pid := range r.fleet.pids() {
			alive[workerID(pid)] = true
		}
		for ref, n := range before {
			if !alive[holder[ref]] {
				crashedHolder++
				delete(before, ref)
				continue
			}
			m, done, err := progress(ref)
			if err == nil && (m > n || done) {
				if d := time.Since(back); len(stalls) == 0 || d > slices.Max(stalls) {
					slowest = ref.ID + " held by " + holder[ref]
				}
				stalls = append(stalls, time.Since(back))
				delete(before, ref)
			}
		}
		<-time.After(pollTick)
	}
	for ref := range before {
		stalls = append(stalls, limit)
		slowest = ref.ID + " held by " + holder[ref] + " (no progress)"
	}
	slices.Sort(stalls)
	st := restartStall{inFlight: len(stalls), slowest: slowest}
	if len(stalls) > 0 {
		st.max = stalls[len(stalls)-1]
		st.median = stalls[len(stalls)/2]
	}
	r.t.Logf("postgres restart: %d in-flight instances, stall median %s, max %s (%d more left out: their worker crashed in the crash loop)",
		st.inFlight, st.median.Round(10*time.Millisecond), st.max.Round(10*time.Millisecond), crashedHolder)
	r.mu.Lock()
	r.sum.stalls = append(r.sum.stalls, st)
	r.mu.Unlock()
}

// settle waits, with the chaos over and every worker running, until every
// chaos instance has ended, and the crash-looping ones have ended or had
// the time for crashLimit lost leases and one more.
func (r *run) settle(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		pending, err := r.store.InstanceList(ctx, &db.InstanceListParams{
			WorkflowName: chaosWorkflow,
			Statuses:     []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting},
			Limit:        1,
		})
		if err == nil && len(pending) == 0 {
			break
		}
		<-time.After(500 * time.Millisecond)
	}
	if !r.cfg.crashLoop {
		return
	}
	for _, ref := range []db.InstanceRef{{WorkflowName: crashLoopWorkflow, ID: crashLoopID}, {WorkflowName: sharedLoopWorkflow, ID: sharedLoopID}} {
		inst, err := r.store.InstanceGet(ctx, ref)
		if err != nil {
			continue
		}
		loopDeadline := inst.CreatedAt.Add(time.Duration(crashLimit+1) * (r.cfg.lease + 3*time.Second))
		for time.Now().Before(loopDeadline) {
			inst, err := r.store.InstanceGet(ctx, ref)
			if err == nil && inst.Status.Terminal() {
				break
			}
			<-time.After(500 * time.Millisecond)
		}
	}
}

// decodeResult returns the stepResult a complete step.Do row of the chaos
// workflow records.
func decodeResult(s *db.Step) (stepResult, bool) {
	var res stepResult
	if s == nil || s.Type != db.StepTypeDo || s.Status != db.StepStatusComplete || json.Unmarshal(s.Result, &res) != nil || res.Token == "" {
		return res, false
	}
	return res, true
}
