package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/duraflow/duraflow/bench"
)

// newBenchCommand is `duraflow bench`: the workloads of package bench
// against a database URL, a table on stdout, JSON to a file.
func newBenchCommand(o *Options) *cobra.Command {
	cfg := &bench.Config{}
	var (
		workloads, jsonPath, mdPath, cpuProfile string
		quiet, eagerStart, eventLog             bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and latency on a database, against its own ceiling",
		Long: `bench runs named workloads with real runners against a database and prints
what they reached: a progress bar on stderr, a table on stdout, and with
--json the whole report as JSON.

  empty    N workflows without steps, created and run to completion:
           workflows/s and created→completed p50/p99
  steps10  N workflows of 10 sequential no-op steps returning ~250 bytes:
           steps/s and the time per step
  keyed    steps10 with a concurrency key of max 1 over 100 keys (not in the
           default set): steps/s, to compare with steps10 without limits
  wake     sequential samples of sendEvent → the step after waitForEvent
           starts, idle and under a background steps10 load: p50/p99
  soak     steps10 for --duration, throughput per --interval, so a decay shows
  create   single creates/s and batch creates/s (batches of 100), last,
           because no runner takes its instances

Each run uses a database of its own: a new schema (dropped afterwards) in the
Postgres database --db names, or a new SQLite file (--db sqlite for a
temporary one). --runners K spreads the runners over K processes (this
binary re-executed as 'bench worker'); on Postgres they wake each other with
LISTEN/NOTIFY. --ceiling first measures what the database itself reaches
with the SQL shapes the engine uses, and shows every throughput as a ratio
of that ceiling from the same run: on Postgres with pgbench, when it is on
PATH; on SQLite with the same shapes run through database/sql by
--ceiling-clients goroutines, in a sibling file of the run's database opened
as the store opens its own (WAL, synchronous=NORMAL, one write connection).`,
		Example: `  duraflow bench --db 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' --ceiling
  duraflow bench --db sqlite --workload steps10 -n 5000 --json steps10.json
  duraflow bench --db sqlite --ceiling --workload empty,steps10
  duraflow bench --db "$DB" --workload soak --duration 10m --interval 1m
  duraflow bench --db "$DB" --workload steps10 --runners 2 --cpuprofile cpu.out`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Workloads, err = bench.ParseWorkloads(workloads); err != nil {
				return usageError(fmt.Errorf("--workload: %w", err))
			}
			if !quiet {
				cfg.Progress = o.Stderr
			}
			cfg.NoEagerStart = !eagerStart
			cfg.NoLifecycleLog = !eventLog
			cfg.WorkerCommand, err = workerCommand(cmd)
			if err != nil {
				return err
			}
			if err := cfg.WithDefaults().Validate(); err != nil {
				return usageError(err)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return withCode(ExitError, fmt.Errorf("--cpuprofile: %w", err))
				}
				defer f.Close()
				cfg.CPUProfile = f
			}
			rep, runErr := bench.Run(cmd.Context(), cfg)
			if rep != nil && (len(rep.Results) > 0 || rep.Ceiling != nil || runErr == nil) {
				if err := rep.WriteTable(o.Stdout); err != nil {
					return withCode(ExitError, err)
				}
				if jsonPath != "" {
					if err := rep.WriteJSONFile(jsonPath); err != nil {
						return withCode(ExitError, errors.Join(runErr, err))
					}
				}
				if mdPath != "" {
					if err := writeMarkdown(rep, mdPath); err != nil {
						return withCode(ExitError, errors.Join(runErr, err))
					}
				}
			}
			if runErr != nil {
				return withCode(ExitError, runErr)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.DatabaseURL, "db", "", "database URL: postgres://… (a schema of the run's own is created and dropped), sqlite:path (a new file), or sqlite (a temporary file)")
	fs.StringVar(&workloads, "workload", strings.Join(bench.DefaultWorkloads, ","), "workloads to run, comma-separated: "+strings.Join(bench.Workloads, ", ")+", or all")
	fs.IntVarP(&cfg.N, "n", "n", 0, "size of each workload: instances (empty, steps10, keyed), samples per phase (wake), single creates (create); 0 for each one's default (5000, 2000 and 2000, 200, 2000)")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "each runner's concurrency (instances executed at once)")
	fs.IntVar(&cfg.Runners, "runners", 1, "runner processes: this one and K-1 workers")
	fs.BoolVar(&cfg.ExternalRunners, "external-runners", false, "run no runner in this process: all --runners are workers, so every wake-up crosses processes")
	fs.Var(newDurationValue(&cfg.Duration, time.Minute), "duration", "how long soak runs")
	fs.Var(newDurationValue(&cfg.Interval, 0), "interval", "soak's reporting interval; 0 for 1m, or a tenth of --duration under 5m")
	fs.IntVar(&cfg.Batch, "batch", 100, "instances per create call in empty, steps10, soak and wake's load (1 for single creates)")
	fs.IntVar(&cfg.InFlight, "in-flight", 0, "most unfinished instances at once; creation waits above it (default 4 × concurrency × runners, at least 200)")
	fs.Var(newDurationValue(&cfg.PollInterval, time.Second), "poll-interval", "each runner's poll interval")
	fs.BoolVar(&eagerStart, "eager-start", true, "start instances on the in-process runner at once when it has a free slot, as duraflow worker does (--eager-start=false: queue every one for a claim)")
	fs.BoolVar(&eventLog, "event-log", true, "keep the lifecycle event log in the bench process (--event-log=false: off, to measure what it costs)")
	fs.BoolVar(&cfg.Metrics, "metrics", false, "give the in-process host the Prometheus metrics' observer, as serve and worker have with /metrics on, to measure its cost (nothing scrapes)")
	fs.BoolVar(&cfg.Ceiling, "ceiling", false, "measure the database's ceiling first and show ratios to it: pgbench on Postgres, the same SQL shapes through database/sql on SQLite")
	fs.Var(newDurationValue(&cfg.CeilingDuration, 5*time.Second), "ceiling-duration", "how long each ceiling script (pgbench) or shape (SQLite) runs")
	fs.IntVar(&cfg.CeilingClients, "ceiling-clients", 8, "ceiling clients: pgbench clients, or goroutines sharing the write connection on SQLite")
	fs.StringVar(&cfg.Pgbench, "pgbench", "pgbench", "the pgbench program")
	fs.Var(newDurationValue(&cfg.Maintenance, 0), "maintenance", "on Postgres, do autovacuum's work with this naptime: vacuum and analyze the run's tables past autovacuum's thresholds (0: never)")
	fs.BoolVar(&cfg.SQLStats, "sql-stats", false, "on Postgres, count this process's statements and their wall time per workload")
	fs.StringVar(&jsonPath, "json", "", "write the report as JSON to this file")
	fs.StringVar(&mdPath, "markdown", "", "write the report's tables as Markdown to this file")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process during the workloads to this file (go tool pprof)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the run's schema or file for inspection")
	fs.BoolVarP(&quiet, "quiet", "q", false, "no progress on stderr")
	cmd.AddCommand(newBenchWorkerCommand(o))
	return cmd
}

// writeMarkdown writes the report as Markdown to a file.
func writeMarkdown(rep *bench.Report, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--markdown: %w", err)
	}
	if err := rep.WriteMarkdown(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("--markdown: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--markdown: %w", err)
	}
	return nil
}

// workerCommand returns how bench re-executes this binary as a worker:
// the same command path with "worker" added, so it also works when the
// command tree is mounted under another program's.
func workerCommand(cmd *cobra.Command) (func(args []string) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, withCode(ExitError, fmt.Errorf("finding this program to start workers: %w", err))
	}
	path := strings.Fields(cmd.CommandPath())[1:]
	return func(args []string) *exec.Cmd {
		full := append(append(append([]string(nil), path...), "worker"), args...)
		return exec.Command(exe, full...)
	}, nil
}

// newBenchWorkerCommand is the hidden `bench worker`, one runner process of
// a bench run; bench starts it and ends it by closing its stdin.
func newBenchWorkerCommand(o *Options) *cobra.Command {
	wc := &bench.WorkerConfig{}
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Run the bench workflows for a bench run (started by bench)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(o.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			var stdin io.Reader = cmd.InOrStdin()
			if err := bench.RunWorker(cmd.Context(), wc, stdin, o.Stdout, log); err != nil {
				return withCode(ExitError, err)
			}
			return nil
		},
	}
	wc.AddFlags(cmd.Flags())
	return cmd
}
