//go:build chaos && linux

package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/pgbouncertest"
	"github.com/duraflow/duraflow/internal/pgcluster"
	"github.com/duraflow/duraflow/workflow"
)

// The "PgBouncer restarted" scenario (TestChaosPgBouncer, `make
// chaos-pgbouncer`): the runner processes and the test's client reach the
// private Postgres through a private PgBouncer in transaction mode (pgx's
// cache_describe query exec mode), the runners LISTEN on direct
// connections (postgres.WithListenURL), and the database was migrated
// through the pooler. While the test creates instances and sends them
// events, PgBouncer is restarted (every connection through it cut, down for
// bouncerDowntime) at set times, and random runners are killed between.
// Afterwards the checks of TestChaos run (from a direct connection), and
// after each restart every instance that was running on a live runner
// must make progress within DURAFLOW_CHAOS_MAX_STALL of PgBouncer's
// return.
//
// Knobs beyond TestChaos's (DURAFLOW_CHAOS_WORKERS, _RATE, _LEASE,
// _MAX_STALL, _SEED, _REPORT apply):
//
//	DURAFLOW_CHAOS_PGBOUNCER_DURATION  chaos time (default 40s)
const bouncerDowntime = time.Second

// bouncerRestart is what one PgBouncer restart stalled, as restartStall.
type bouncerRestart struct {
	restartStall
	back time.Duration // how long the restart took, downtime included
}

// TestChaosPgBouncer runs the "PgBouncer restarted" scenario and prints its
// summary table.
func TestChaosPgBouncer(t *testing.T) {
	if os.Getenv(envWorker) == "1" {
		return
	}
	cfg := loadConfig(t)
	cfg.duration = envDuration(t, "DURAFLOW_CHAOS_PGBOUNCER_DURATION", 40*time.Second)
	// The crash loops are TestChaos's: here every worker death is the
	// test's kill.
	cfg.crashLoop = false
	t.Logf("seed %d (replay with -chaos.seed=%d or DURAFLOW_CHAOS_SEED=%d)", cfg.seed, cfg.seed, cfg.seed)
	ctx := t.Context()
	dir := t.TempDir()
	sum := &summary{backend: "pgbouncer", duration: cfg.duration}
	r := &run{
		t: t, cfg: cfg, backend: "postgres", ledger: filepath.Join(dir, "ledger"), sum: sum,
		created: map[string]int{}, stopping: map[int]bool{},
	}
	cluster := pgcluster.Start(t)
	bouncer := pgbouncertest.Start(t, cluster.URL())
	pooled, err := bouncer.URL(cluster.URL(), "default_query_exec_mode=cache_describe")
	require.NoError(t, err)
	r.dsn = pooled

	// Migrated through the pooler; checked from a direct connection, which
	// the restarts leave alone.
	through, err := postgres.Open(ctx, pooled)
	require.NoError(t, err)
	t.Cleanup(func() { _ = through.Close() })
	require.NoError(t, postgres.Migrate(ctx, through.Pool()))
	direct, err := postgres.Open(ctx, cluster.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = direct.Close() })
	r.store = direct
	reg := workflow.NewRegistry()
	registerWorkflows(reg, r.ledger)
	r.client, err = client.New(&client.Config{Store: through, Registry: reg})
	require.NoError(t, err)

	settle := r.settleTimeout()
	r.fleet = newFleet(t, "worker", dir, cfg.workers, []string{
		envBackend + "=postgres",
		envDSN + "=" + pooled,
		envListenDSN + "=" + cluster.URL(),
		envLedger + "=" + r.ledger,
		envLease + "=" + cfg.lease.String(),
		envLifetime + "=" + (cfg.duration + 2*settle + 2*time.Minute).String(),
		envWorkflow + "=" + chaosWorkflow,
	})

	start := time.Now()
	chaosCtx, stopChaos := context.WithTimeout(ctx, cfg.duration)
	defer stopChaos()
	var load, events sync.WaitGroup
	load.Go(func() { r.load(chaosCtx, rand.New(rand.NewPCG(uint64(cfg.seed), 1)), &events) })
	restarts := r.bouncerChaos(chaosCtx, rand.New(rand.NewPCG(uint64(cfg.seed), 2)), bouncer, start)
	load.Wait()
	events.Wait()
	t.Logf("pgbouncer: chaos over after %s; settling", time.Since(start).Round(time.Second))

	r.settle(ctx, settle)
	r.checkDirectListeners(ctx, cluster.URL())
	r.fleet.close()
	r.crashed, r.killed = r.fleet.crashedPids(), r.fleet.killedPids()
	r.verify(ctx)
	if len(restarts) == 0 {
		r.failf("pgbouncer was never restarted")
	}
	for i, st := range restarts {
		if st.max > cfg.maxStall {
			r.failf("pgbouncer restart %d: in-flight instances stalled up to %s after PgBouncer was back (median %s, %d instances; the slowest %s), want at most %s",
				i+1, st.max.Round(10*time.Millisecond), st.median.Round(10*time.Millisecond), st.inFlight, st.slowest, cfg.maxStall)
		}
	}
	r.mu.Lock()
	sum.failures = slices.Clone(r.failures)
	r.mu.Unlock()

	table := formatSummary(cfg, []*summary{sum})
	fmt.Printf("\nchaos summary, PgBouncer restarted (seed %d):\n%s", cfg.seed, table)
	for i, st := range restarts {
		fmt.Printf("pgbouncer restart %d: back after %s; %d in-flight instances, stall median %s, max %s\n",
			i+1, st.back.Round(10*time.Millisecond), st.inFlight, st.median.Round(10*time.Millisecond), st.max.Round(10*time.Millisecond))
	}
	for i, f := range sum.failures {
		if i == maxFailuresShown {
			fmt.Printf("pgbouncer: %d more failures (see above)\n", len(sum.failures)-i)
			break
		}
		fmt.Printf("pgbouncer: FAILED: %s\n", f)
	}
	for _, f := range sum.failures {
		t.Error(f)
	}
	if cfg.report != "" {
		require.NoError(t, os.WriteFile(cfg.report, []byte(table), 0o644))
	}
}

// checkDirectListeners checks that every live worker LISTENs on a direct
// connection to the cluster (found by its application_name), across the
// restarts of PgBouncer, which do not cut it.
func (r *run) checkDirectListeners(ctx context.Context, directURL string) {
	conn, err := pgx.Connect(ctx, directURL)
	if err != nil {
		r.failf("connecting to the cluster: %v", err)
		return
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	for _, pid := range r.fleet.pids() {
		// A worker started by the last kill may not listen yet.
		err := retry(ctx, func() error {
			ok, err := listening(ctx, conn, pid)
			if err == nil && !ok {
				err = fmt.Errorf("worker %d does not LISTEN on a direct connection", pid)
			}
			return err
		}, nil)
		if err != nil {
			r.failf("%v", err)
		}
	}
}

// bouncerChaos restarts PgBouncer at set times (a third of the way, two
// thirds, and every 15 s of a longer run) and kills a random worker every
// few seconds between, until ctx ends. It returns what each restart
// stalled.
func (r *run) bouncerChaos(ctx context.Context, rng *rand.Rand, b *pgbouncertest.Bouncer, start time.Time) []bouncerRestart {
	var at []time.Time
	n := max(2, int(r.cfg.duration/(15*time.Second)))
	for i := range n {
		at = append(at, start.Add(time.Duration(float64(i+1)/float64(n+1)*float64(r.cfg.duration))))
	}
	var restarts []bouncerRestart
	for {
		wait := min(max(time.Duration(rng.ExpFloat64()*float64(3*time.Second)), 500*time.Millisecond), 8*time.Second)
		if len(at) > 0 && time.Until(at[0]) < wait {
			wait = max(time.Until(at[0]), 0)
		}
		select {
		case <-ctx.Done():
			return restarts
		case <-time.After(wait):
		}
		if len(at) > 0 && !time.Now().Before(at[0]) {
			at = at[1:]
			if st, ok := r.restartBouncer(ctx, b); ok {
				restarts = append(restarts, st)
			}
			continue
		}
		r.killWorker(rng)
	}
}

// restartBouncer restarts PgBouncer with bouncerDowntime and measures the
// stall as restartDatabase does: from PgBouncer's return until each
// instance that was running on a live worker, its lease current, has made
// progress (a new step row, a completed step, or an end). It reads from
// the direct store, which the restart does not cut.
func (r *run) restartBouncer(ctx context.Context, b *pgbouncertest.Bouncer) (bouncerRestart, bool) {
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
		r.failf("listing running instances before the pgbouncer restart: %v", err)
		return bouncerRestart{}, false
	}
	for _, inst := range insts {
		ref := db.InstanceRef{WorkflowName: inst.WorkflowName, ID: inst.ID}
		task, err := r.store.TaskGet(ctx, ref)
		if err != nil || task.Status != db.TaskStatusProcessing || !live[task.LockOwner] ||
			task.LockedUntil == nil || !task.LockedUntil.After(time.Now()) {
			continue
		}
		if n, _, err := progress(ref); err == nil {
			before[ref] = n
			holder[ref] = task.LockOwner
		}
	}
	began := time.Now()
	if err := b.Restart(bouncerDowntime); err != nil {
		r.failf("restarting pgbouncer: %v", err)
		return bouncerRestart{}, false
	}
	back := time.Now()
	limit := 3*r.cfg.lease + 10*time.Second
	var stalls []time.Duration
	var slowest string
	for len(before) > 0 && time.Since(back) < limit {
		alive := map[string]bool{}
		for _, pid := range r.fleet.pids() {
			alive[workerID(pid)] = true
		}
		for ref, n := range before {
			if !alive[holder[ref]] {
				// Killed by the test since: its instances wait for its
				// lease, which is no restart's stall.
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
	st := bouncerRestart{restartStall: restartStall{inFlight: len(stalls), slowest: slowest}, back: back.Sub(began)}
	if len(stalls) > 0 {
		st.max = stalls[len(stalls)-1]
		st.median = stalls[len(stalls)/2]
	}
	r.t.Logf("pgbouncer restart: %d in-flight instances, stall median %s, max %s",
		st.inFlight, st.median.Round(10*time.Millisecond), st.max.Round(10*time.Millisecond))
	return st, true
}
