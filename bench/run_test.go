package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/bench"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// envWorkerArgs, set, makes the test binary a bench worker with these
// arguments (separated by newlines), as `duraflow bench worker` is one.
const envWorkerArgs = "DURAFLOW_BENCH_TEST_WORKER_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(envWorkerArgs); ok {
		os.Exit(runTestWorker(strings.Split(args, "\n")))
	}
	os.Exit(m.Run())
}

func runTestWorker(args []string) int {
	wc := &bench.WorkerConfig{}
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	wc.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := bench.RunWorker(context.Background(), wc, os.Stdin, os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testWorkerCommand re-executes the test binary as a worker.
func testWorkerCommand(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorkerArgs+"="+strings.Join(args, "\n"))
	return cmd
}

// tinyConfig runs every workload at a size that takes seconds.
func tinyConfig(url string) *bench.Config {
	return &bench.Config{
		DatabaseURL:   url,
		Workloads:     bench.Workloads,
		N:             8,
		Concurrency:   4,
		Duration:      2 * time.Second,
		Interval:      time.Second,
		Batch:         4,
		InFlight:      16,
		PollInterval:  100 * time.Millisecond,
		WorkerCommand: testWorkerCommand,
	}
}

// requireResults checks that every workload reported its figures: none
// negative, and the headline one (throughput or latency, taken over the
// whole workload) positive. A soak interval may see no completion on a
// machine slowed by -race, so soak's only has to be there.
func requireResults(t *testing.T, rep *bench.Report, workloads ...string) {
	t.Helper()
	require.Len(t, rep.Results, len(workloads))
	for i, w := range workloads {
		res := rep.Results[i]
		require.Equal(t, w, res.Workload)
		require.NotEmpty(t, res.Metrics, w)
		for _, m := range res.Metrics {
			require.GreaterOrEqual(t, m.Value, 0.0, "%s: %s", w, m.Name)
		}
		if w != "soak" {
			require.Positive(t, res.Metrics[0].Value, "%s: %s", w, res.Metrics[0].Name)
		}
		require.Positive(t, res.N, w)
		require.NotNil(t, res.CPU, w)
	}
	var table strings.Builder
	require.NoError(t, rep.WriteTable(&table))
	for _, w := range workloads {
		require.Contains(t, table.String(), w)
	}
}

func TestRunSQLite(t *testing.T) {
	t.Parallel()

	var progress strings.Builder
	cfg := tinyConfig("sqlite")
	cfg.Progress = &progress
	defer func() {
		if t.Failed() {
			t.Log(progress.String())
		}
	}()
	cfg.Ceiling = true
	cfg.CeilingDuration = time.Second
	cfg.CeilingClients = 2
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	requireResults(t, rep, "empty", "steps10", "keyed", "wake", "soak", "create")
	require.Equal(t, "sqlite", rep.Database.Backend)

	// The SQLite ceiling ran, and every throughput is a ratio of it.
	require.Empty(t, rep.Ceiling.Skipped)
	require.Equal(t, "sqlite", rep.Ceiling.Backend)
	require.Len(t, rep.Ceiling.Scripts, 3)
	for _, s := range rep.Ceiling.Scripts {
		require.Positive(t, s.StepsPerSecond, s.Name)
		require.Equal(t, "database/sql (SQLite)", s.Via, s.Name)
	}
	ratios := map[string][]string{}
	for _, res := range rep.Results {
		for _, m := range res.Metrics {
			if m.Ceiling != "" && m.CeilingValue > 0 {
				ratios[res.Workload] = append(ratios[res.Workload], m.Ceiling)
			}
		}
	}
	require.Equal(t, map[string][]string{
		"empty":   {"step-tx"},
		"steps10": {"step-tx", "batch10"},
		"soak":    {"step-tx"},
		"create":  {"checkpoint", "batch10"},
	}, ratios, "wake has no notify ceiling on SQLite")
	require.Positive(t, rep.Results[0].Metrics[0].Ratio, "empty workflows/s is a ratio of step-tx")
	require.Positive(t, rep.Results[1].Metrics[0].Ratio, "steps10 steps/s is a ratio of step-tx")
	require.Len(t, rep.Results[4].Intervals, 2)
	require.Contains(t, progress.String(), "bench: steps10: done in")
	require.Empty(t, rep.Kept)

	dir := strings.TrimPrefix(rep.Database.Where, "file ")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "the temporary file is removed")
}

func TestRunSQLiteFile(t *testing.T) {
	t.Parallel()

	path := t.TempDir() + "/bench.db"
	cfg := tinyConfig("sqlite:" + path)
	cfg.Workloads = []string{"empty"}
	cfg.Keep = true
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	requireResults(t, rep, "empty")
	require.Equal(t, path, rep.Kept)
	_, err = os.Stat(path)
	require.NoError(t, err, "kept")

	_, err = bench.Run(t.Context(), cfg)
	require.ErrorContains(t, err, "exists", "a used file is refused")
}

func TestRunSQLiteWorkers(t *testing.T) {
	t.Parallel()

	cfg := tinyConfig("sqlite")
	cfg.Workloads = []string{"wake"}
	cfg.N = 3
	cfg.Runners = 2
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	requireResults(t, rep, "wake")
	require.Contains(t, rep.Results[0].Notes[0], "polling")
}

func TestRunInvalidConfig(t *testing.T) {
	t.Parallel()

	_, err := bench.Run(t.Context(), &bench.Config{DatabaseURL: "sqlite::memory:"})
	require.ErrorContains(t, err, "in-memory")
	_, err = bench.Run(t.Context(), nil)
	require.Error(t, err)
	_, err = bench.Run(t.Context(), &bench.Config{DatabaseURL: "mysql://x"})
	require.ErrorContains(t, err, "unsupported database URL scheme")
}

// requirePostgres skips the test when the test database is unreachable,
// or fails it with DURAFLOW_REQUIRE_POSTGRES=1.
func requirePostgres(t *testing.T) string {
	t.Helper()
	url := pgtest.DatabaseURL()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(ctx)
	}
	if err != nil {
		if os.Getenv(pgtest.EnvRequirePostgres) == "1" {
			t.Fatalf("Postgres not reachable: %v", err)
		}
		t.Skipf("Postgres not reachable: %v", err)
	}
	return url
}

func TestRunPostgres(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)

	// The store's pool size rides on the URL; every other connection the
	// run opens (schema, ceiling, maintenance) must take the URL too.
	cfg := tinyConfig(pgtest.DatabaseURLWith("pool_max_conns=5"))
	cfg.Ceiling = true
	cfg.CeilingDuration = time.Second
	cfg.CeilingClients = 1
	cfg.SQLStats = true
	cfg.Maintenance = 200 * time.Millisecond
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	requireResults(t, rep, "empty", "steps10", "keyed", "wake", "soak", "create")
	require.Equal(t, "postgres", rep.Database.Backend)
	require.Equal(t, 5, rep.Settings.PoolMaxConns)
	require.Equal(t, "on", rep.Database.Settings["synchronous_commit"])
	require.NotNil(t, rep.Ceiling.Notify)
	require.Positive(t, rep.Ceiling.Notify.P50)
	if _, err := exec.LookPath("pgbench"); err == nil {
		require.Empty(t, rep.Ceiling.Skipped)
		require.Len(t, rep.Ceiling.Scripts, 3)
		for _, s := range rep.Ceiling.Scripts {
			require.Positive(t, s.StepsPerSecond, s.Name)
		}
		require.Positive(t, rep.Results[1].Metrics[0].Ratio, "steps10 is a ratio of the ceiling")
	} else {
		require.Contains(t, rep.Ceiling.Skipped, "not on PATH")
	}
	require.NotEmpty(t, rep.Results[1].SQL, "statements were counted")
	require.Positive(t, rep.Settings.MaintenanceAnalyzes, "the tables were analyzed")
	require.NotNil(t, rep.Results[4].Intervals[0].Queue, "the queue table was sampled")

	// The run's schema is gone.
	schema := strings.TrimPrefix(rep.Database.Where, "schema ")
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n))
	require.Zero(t, n)
}

func TestRunPostgresWorkers(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)

	cfg := tinyConfig(url)
	cfg.Workloads = []string{"empty", "wake"}
	cfg.Runners = 2
	cfg.ExternalRunners = true
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	requireResults(t, rep, "empty", "wake")
	require.Contains(t, rep.Results[1].Notes[0], "LISTEN/NOTIFY")
}

func TestRunPgbenchMissing(t *testing.T) {
	t.Parallel()
	url := requirePostgres(t)

	cfg := tinyConfig(url)
	cfg.Workloads = []string{"empty"}
	cfg.Ceiling = true
	cfg.Pgbench = "pgbench-that-is-not-installed"
	rep, err := bench.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Contains(t, rep.Ceiling.Skipped, "not on PATH")
	require.Zero(t, rep.Results[0].Metrics[0].Ratio)
	var table strings.Builder
	require.NoError(t, rep.WriteTable(&table))
	require.Contains(t, table.String(), "ceiling skipped: pgbench (pgbench-that-is-not-installed) is not on PATH")
}
