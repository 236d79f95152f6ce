package bench

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Workload names.
const (
	WorkloadEmpty   = "empty"
	WorkloadSteps10 = "steps10"
	WorkloadWake    = "wake"
	WorkloadCreate  = "create"
	WorkloadSoak    = "soak"
	// WorkloadKeyed is steps10 under a concurrency key of max 1 over
	// KeyedKeys keys (docs/limits.md).
	WorkloadKeyed = "keyed"
)

// KeyedKeys is how many concurrency keys the keyed workload spreads its
// instances over, each limited to one instance at a time.
const KeyedKeys = 100

// Workloads lists every workload in the order a run executes them when
// several are asked for. Create comes last: its instances stay queued (no
// runner takes them), and their tasks would sit at the head of the queue
// that the other workloads claim from.
var Workloads = []string{WorkloadEmpty, WorkloadSteps10, WorkloadKeyed, WorkloadWake, WorkloadSoak, WorkloadCreate}

// DefaultWorkloads are the workloads of a run that names none: every one but
// soak, which runs for a set time.
var DefaultWorkloads = []string{WorkloadEmpty, WorkloadSteps10, WorkloadWake, WorkloadCreate}

// defaultN is each workload's count when Config.N is zero: instances for
// empty and steps10, samples per phase for wake, single creates for create.
var defaultN = map[string]int{
	WorkloadEmpty:   5000,
	WorkloadSteps10: 2000,
	WorkloadKeyed:   2000,
	WorkloadWake:    200,
	WorkloadCreate:  2000,
}

// MemorySQLite is the database URL of an in-memory SQLite database, which a
// benchmark cannot use: it measures through a second connection.
const MemorySQLite = "sqlite::memory:"

// Config configures a benchmark run.
type Config struct {
	// DatabaseURL names the database: a postgres:// URL, in which the run
	// creates a schema of its own and drops it afterwards, or an SQLite URL
	// or path naming a file that does not exist yet. "sqlite" (or "sqlite:")
	// asks for a fresh file in a temporary directory. Required.
	DatabaseURL string
	// Workloads are the workloads to run, in any order; they run in the order
	// of Workloads.
	//
	// Defaults to DefaultWorkloads.
	Workloads []string
	// N is the size of every workload: instances for empty and steps10,
	// sequential samples of each phase for wake, single creates for create
	// (and ten times as many batch-created instances). Soak runs for Duration
	// instead.
	//
	// Defaults to each workload's own: empty 5000, steps10 2000, wake 200,
	// create 2000.
	N int
	// Concurrency is each runner's MaxConcurrency, and the number of
	// goroutines that create instances in the create workload.
	//
	// Defaults to 64, the default of duraflow worker.
	Concurrency int
	// Runners is how many processes run workflows. With InProcessRunner the
	// first runs in this process and the others in worker processes started
	// through WorkerCommand.
	//
	// Defaults to 1.
	Runners int
	// ExternalRunners puts every runner in a worker process, none in this
	// one, so that every wake-up crosses processes (LISTEN/NOTIFY on
	// Postgres).
	//
	// Defaults to false: the first runner runs in this process.
	ExternalRunners bool
	// Duration is how long soak creates work.
	//
	// Defaults to 1 minute.
	Duration time.Duration
	// Interval is the length of the soak's throughput intervals.
	//
	// Defaults to 1 minute, or a tenth of Duration (at least 1 second) when
	// Duration is shorter than 5 minutes.
	Interval time.Duration
	// Batch is how many instances one create call starts in empty, steps10,
	// soak and the background load of wake.
	//
	// Defaults to 100, the most a batch create takes.
	Batch int
	// InFlight is how many started but unfinished instances the workloads
	// keep at most: creation waits while there are more, so the measured
	// start-to-complete latency is not the length of an ever-growing queue.
	//
	// Defaults to 4 × Concurrency × Runners, at least 200.
	InFlight int
	// PollInterval is each runner's PollInterval.
	//
	// Defaults to 1 second, the default of duraflow worker.
	PollInterval time.Duration
	// NoEagerStart turns eager start off in the bench process, as
	// --eager-start=false does for duraflow worker: every instance it creates
	// is queued and claimed. By default an instance starts on the in-process
	// runner at once when it has a free slot. Worker processes create
	// nothing, so it does not concern them.
	NoEagerStart bool
	// NoLifecycleLog turns the lifecycle event log off in the bench
	// process's store (duraflow.Config.DisableLifecycleLog), as
	// --event-log=false does for duraflow worker, to measure what the log
	// costs. Worker processes (Runners > 1) keep theirs on.
	NoLifecycleLog bool
	// Metrics gives the bench process's host the Prometheus metrics'
	// observer (package metrics), as duraflow serve and worker have when
	// they serve /metrics, to measure what the observations cost. Nothing
	// scrapes them.
	Metrics bool
	// Ceiling measures the database's ceiling before the workloads and
	// reports throughputs as ratios of it: pgbench on Postgres; on SQLite
	// the same SQL shapes through database/sql, in a sibling file of the
	// run's database opened as db/sqlite opens its store.
	//
	// Defaults to false.
	Ceiling bool
	// CeilingDuration is how long each pgbench script or SQLite shape runs.
	//
	// Defaults to 5 seconds.
	CeilingDuration time.Duration
	// CeilingClients is pgbench's number of clients, or the number of
	// goroutines that run the SQLite shapes.
	//
	// Defaults to 8.
	CeilingClients int
	// Pgbench is the pgbench program.
	//
	// Defaults to "pgbench", looked up on PATH.
	Pgbench string
	// Maintenance, on Postgres, does autovacuum's work with this naptime
	// while the workloads run: every Maintenance it vacuums and analyzes
	// the run's tables that are past autovacuum's thresholds (the server's
	// settings or the tables' own). A fresh schema has no statistics until
	// autovacuum has visited it (once a minute by default) or, on a server
	// with autovacuum off, ever; without them the planner may pick plans a
	// deployed database would not.
	//
	// Defaults to 0: nothing is run, the tables are as the server leaves them.
	Maintenance time.Duration
	// SQLStats counts the statements the in-process runner and client send
	// to Postgres and their wall time, per workload (a pgx tracer on the
	// store's pool).
	//
	// Defaults to false.
	SQLStats bool
	// Keep leaves the schema or SQLite file in place after the run, for
	// inspection, and reports where it is.
	//
	// Defaults to false: it is dropped.
	Keep bool
	// CPUProfile, when set, receives a CPU profile of this process taken
	// while the workloads run (not during setup or the ceiling).
	//
	// Defaults to nil: no profile.
	CPUProfile io.Writer
	// Progress receives the progress bar; it is drawn in place when it is a
	// terminal and as one line per workload otherwise.
	//
	// Defaults to nil: no progress.
	Progress io.Writer
	// Logger receives the logs of the in-process runner.
	//
	// Defaults to warnings and errors on Progress, or nothing without it.
	Logger *slog.Logger
	// WorkerCommand returns the command that starts one worker process with
	// the given arguments (see WorkerConfig.Args and RunWorker). Required
	// when a runner runs outside this process.
	WorkerCommand func(args []string) *exec.Cmd
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *Config) WithDefaults() *Config {
	out := *c
	if len(out.Workloads) == 0 {
		out.Workloads = slices.Clone(DefaultWorkloads)
	}
	out.Concurrency = cmp.Or(out.Concurrency, 64)
	out.Runners = cmp.Or(out.Runners, 1)
	out.Duration = cmp.Or(out.Duration, time.Minute)
	if out.Interval == 0 {
		out.Interval = time.Minute
		if out.Duration < 5*time.Minute {
			out.Interval = max(time.Second, (out.Duration / 10).Round(time.Second))
		}
	}
	out.Batch = cmp.Or(out.Batch, 100)
	out.InFlight = cmp.Or(out.InFlight, max(200, 4*out.Concurrency*out.Runners))
	out.PollInterval = cmp.Or(out.PollInterval, time.Second)
	out.CeilingDuration = cmp.Or(out.CeilingDuration, 5*time.Second)
	out.CeilingClients = cmp.Or(out.CeilingClients, 8)
	out.Pgbench = cmp.Or(out.Pgbench, "pgbench")
	if out.Logger == nil {
		var w io.Writer = io.Discard
		if out.Progress != nil {
			w = out.Progress
		}
		out.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return &out
}

// Validate reports the first setting that makes no sense. Run calls it on
// the config with defaults applied; commands call it to tell usage errors
// from failures.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.DatabaseURL) == "" {
		return errors.New("a database URL is required: postgres://…, sqlite:path (a new file) or sqlite (a temporary file)")
	}
	if u := strings.TrimSpace(c.DatabaseURL); u == MemorySQLite || u == ":memory:" {
		return errors.New("an in-memory SQLite database cannot be measured from a second connection; use --db sqlite for a fresh temporary file")
	}
	seen := map[string]bool{}
	for _, w := range c.Workloads {
		if !slices.Contains(Workloads, w) {
			return fmt.Errorf("unknown workload %q (known: %s)", w, strings.Join(Workloads, ", "))
		}
		if seen[w] {
			return fmt.Errorf("workload %q is named twice", w)
		}
		seen[w] = true
	}
	switch {
	case c.N < 0:
		return fmt.Errorf("-n %d must not be negative", c.N)
	case c.Concurrency < 1:
		return fmt.Errorf("concurrency %d must be at least 1", c.Concurrency)
	case c.Runners < 1:
		return fmt.Errorf("runners %d must be at least 1", c.Runners)
	case c.Runners > 64:
		return fmt.Errorf("runners %d: at most 64 processes", c.Runners)
	case c.Duration < time.Second:
		return fmt.Errorf("duration %s must be at least 1 second", c.Duration)
	case c.Interval < time.Second || c.Interval > c.Duration:
		return fmt.Errorf("interval %s must be at least 1 second and at most the duration %s", c.Interval, c.Duration)
	case c.Batch < 1 || c.Batch > 100:
		return fmt.Errorf("batch %d must be between 1 and 100", c.Batch)
	case c.InFlight < 1:
		return fmt.Errorf("in-flight limit %d must be at least 1", c.InFlight)
	case c.PollInterval <= 0:
		return fmt.Errorf("poll interval %s must be positive", c.PollInterval)
	case c.CeilingDuration < time.Second:
		return fmt.Errorf("ceiling duration %s must be at least 1 second", c.CeilingDuration)
	case c.Maintenance < 0 || c.Maintenance > 0 && c.Maintenance < 100*time.Millisecond:
		return fmt.Errorf("maintenance interval %s must be 0 (off) or at least 100ms", c.Maintenance)
	case c.CeilingClients < 1:
		return fmt.Errorf("ceiling clients %d must be at least 1", c.CeilingClients)
	}
	if c.workerCount() > 0 && c.WorkerCommand == nil {
		return errors.New("runners outside this process need a WorkerCommand")
	}
	return nil
}

// workerCount is how many worker processes the run starts.
func (c *Config) workerCount() int {
	if c.ExternalRunners {
		return c.Runners
	}
	return c.Runners - 1
}

// n is the size of a workload.
func (c *Config) n(workload string) int {
	if c.N > 0 {
		return c.N
	}
	return defaultN[workload]
}

// ordered returns the configured workloads in run order.
func (c *Config) ordered() []string {
	var out []string
	for _, w := range Workloads {
		if slices.Contains(c.Workloads, w) {
			out = append(out, w)
		}
	}
	return out
}

// ParseWorkloads splits a comma-separated list of workload names; "all"
// stands for every workload, soak included.
func ParseWorkloads(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(strings.ToLower(part))
		switch {
		case part == "":
			continue
		case part == "all":
			out = append(out, Workloads...)
		case slices.Contains(Workloads, part):
			out = append(out, part)
		default:
			return nil, fmt.Errorf("unknown workload %q (known: %s, all)", part, strings.Join(Workloads, ", "))
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil, errors.New("no workload named")
	}
	return out, nil
}
