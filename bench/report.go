package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything a run measured, with what it ran on. It is what
// --json writes.
type Report struct {
	// Started and Finished bound the run, setup and teardown included.
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Build    Build     `json:"build"`
	Machine  Machine   `json:"machine"`
	Database Database  `json:"database"`
	Settings Settings  `json:"settings"`
	// Ceiling is the ceiling of this run (pgbench on Postgres, the same SQL
	// shapes through database/sql on SQLite), when one was asked for.
	Ceiling *Ceiling `json:"ceiling,omitempty"`
	// Results holds one entry per workload, in the order they ran.
	Results []*Result `json:"results"`
	// Kept says where the database was left, with Config.Keep.
	Kept string `json:"kept,omitempty"`
}

// Build identifies the code that was measured.
type Build struct {
	// Commit is the VCS revision stamped into the binary, when it was built
	// from a checkout (go build, not go run or go test).
	Commit string `json:"commit,omitempty"`
	// Modified is true when the checkout had uncommitted changes.
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Machine describes where the run happened.
type Machine struct {
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

// Database describes the database of the run.
type Database struct {
	// Backend is "postgres" or "sqlite".
	Backend string `json:"backend"`
	// Version is the server's (or the SQLite library's) version.
	Version string `json:"version"`
	// Settings are the settings that bound durable throughput
	// (synchronous_commit, shared_buffers, fsync, … or the SQLite pragmas).
	Settings map[string]string `json:"settings,omitempty"`
	// Where is the schema or file the run used.
	Where string `json:"where"`
}

// Settings are the run's knobs, after defaults.
type Settings struct {
	Workloads       []string `json:"workloads"`
	N               int      `json:"n,omitempty"`
	Concurrency     int      `json:"concurrency"`
	Runners         int      `json:"runners"`
	ExternalRunners bool     `json:"external_runners,omitempty"`
	Batch           int      `json:"batch"`
	InFlight        int      `json:"in_flight"`
	PollIntervalMs  float64  `json:"poll_interval_ms"`
	NoEagerStart    bool     `json:"no_eager_start,omitempty"`
	NoLifecycleLog  bool     `json:"no_lifecycle_log,omitempty"`
	SoakSeconds     float64  `json:"soak_s,omitempty"`
	IntervalSeconds float64  `json:"interval_s,omitempty"`
	// MaintenanceSeconds is Config.Maintenance; MaintenanceVacuums and
	// MaintenanceAnalyzes count the VACUUMs and ANALYZEs it ran.
	MaintenanceSeconds  float64 `json:"maintenance_s,omitempty"`
	MaintenanceVacuums  int     `json:"maintenance_vacuums,omitempty"`
	MaintenanceAnalyzes int     `json:"maintenance_analyzes,omitempty"`
	// PoolMaxConns is the in-process store's connection pool size (Postgres).
	PoolMaxConns int `json:"pool_max_conns,omitempty"`
}

// Result is what one workload measured.
type Result struct {
	Workload string `json:"workload"`
	// Description says in a line what was run.
	Description string `json:"description"`
	// N is the workload's size (instances, samples or creates).
	N int `json:"n"`
	// ElapsedSeconds is the measured interval.
	ElapsedSeconds float64 `json:"elapsed_s"`
	// Metrics are the headline figures, in table order.
	Metrics []Metric `json:"metrics"`
	// Latencies are the full latency distributions, by name.
	Latencies map[string]Summary `json:"latencies,omitempty"`
	// Intervals are the soak's throughput over time.
	Intervals []Interval `json:"intervals,omitempty"`
	// SQL is what the in-process store sent to Postgres during the
	// workload, with Config.SQLStats.
	SQL []StatementStat `json:"sql,omitempty"`
	// CPU is where the processor time went while the workload ran.
	CPU *CPU `json:"cpu,omitempty"`
	// Notes are remarks on how to read the figures.
	Notes []string `json:"notes,omitempty"`
}

// Metric is one figure of a result.
type Metric struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Ceiling names the ceiling figure the value is compared with, if any
	// (see Ceiling.Value), CeilingValue is that figure from the same run and
	// Ratio is Value / CeilingValue.
	Ceiling      string  `json:"ceiling,omitempty"`
	CeilingValue float64 `json:"ceiling_value,omitempty"`
	Ratio        float64 `json:"ratio,omitempty"`
}

// Interval is the soak's throughput during one interval.
type Interval struct {
	// StartSeconds is the interval's start, from the start of the soak.
	StartSeconds float64 `json:"start_s"`
	// Workflows is how many instances completed in the interval.
	Workflows int `json:"workflows"`
	// StepsPerSecond is 10 × Workflows over the interval's length.
	StepsPerSecond float64 `json:"steps_per_s"`
	// Queue describes the task table at the interval's end (Postgres).
	Queue *QueueStats `json:"queue,omitempty"`
}

// QueueStats describes the task table, to show bloat as it builds up.
type QueueStats struct {
	LiveRows    int64 `json:"live_rows"`
	DeadRows    int64 `json:"dead_rows"`
	Bytes       int64 `json:"bytes"`
	Autovacuums int64 `json:"autovacuums"`
}

// newReport fills in what is known before anything runs.
func newReport(cfg *Config) *Report {
	r := &Report{
		Started: time.Now().UTC(),
		Build:   buildInfo(),
		Machine: Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)},
		Settings: Settings{
			Workloads: cfg.ordered(), N: cfg.N, Concurrency: cfg.Concurrency, Runners: cfg.Runners,
			ExternalRunners: cfg.ExternalRunners, Batch: cfg.Batch, InFlight: cfg.InFlight,
			PollIntervalMs: ms(cfg.PollInterval), MaintenanceSeconds: cfg.Maintenance.Seconds(),
			NoEagerStart: cfg.NoEagerStart, NoLifecycleLog: cfg.NoLifecycleLog,
		},
	}
	for _, w := range cfg.Workloads {
		if w == WorkloadSoak {
			r.Settings.SoakSeconds = cfg.Duration.Seconds()
			r.Settings.IntervalSeconds = cfg.Interval.Seconds()
		}
	}
	return r
}

func buildInfo() Build {
	b := Build{GoVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// applyCeiling fills the ceiling figures and ratios of every metric that
// names a ceiling this run measured.
func (r *Report) applyCeiling() {
	if r.Ceiling == nil {
		return
	}
	for _, res := range r.Results {
		for i := range res.Metrics {
			m := &res.Metrics[i]
			if m.Ceiling == "" {
				continue
			}
			if v, ok := r.Ceiling.Value(m.Ceiling); ok && v > 0 {
				m.CeilingValue = v
				m.Ratio = m.Value / v
			}
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing the JSON report: %w", err)
	}
	return nil
}

// WriteJSONFile writes the report to a file, replacing it.
func (r *Report) WriteJSONFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the JSON report: %w", err)
	}
	if err := r.WriteJSON(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing the JSON report: %w", err)
	}
	return nil
}

// WriteTable writes the report as text tables: the setting, the ceiling, the
// figures of each workload, then the soak's intervals and the SQL statistics
// when there are any.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	r.writeHeader(&b)
	if r.Ceiling != nil {
		b.WriteString("\n")
		r.Ceiling.writeTable(&b)
	}
	if len(r.Results) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "WORKLOAD\tMETRIC\tVALUE\tVS CEILING (SAME RUN)")
		for _, res := range r.Results {
			for i, m := range res.Metrics {
				if i > 0 && m.CeilingValue == 0 && res.Metrics[i-1].Name == m.Name && res.Metrics[i-1].Value == m.Value {
					continue // the same figure against a ceiling this run did not measure
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Workload, m.Name, formatValue(m.Value, m.Unit), formatRatio(m))
			}
		}
		_ = tw.Flush()
	}
	for _, res := range r.Results {
		if len(res.Intervals) > 0 {
			b.WriteString("\n")
			writeIntervals(&b, res)
		}
	}
	for _, res := range r.Results {
		if len(res.SQL) > 0 {
			b.WriteString("\n")
			writeSQL(&b, res)
		}
	}
	var notes []string
	for _, res := range r.Results {
		for _, n := range res.Notes {
			notes = append(notes, res.Workload+": "+n)
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
	}
	if r.Kept != "" {
		fmt.Fprintf(&b, "\nThe database was kept: %s\n", r.Kept)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Report) writeHeader(b *strings.Builder) {
	commit := r.Build.Commit
	switch {
	case commit == "":
		commit = "unknown commit (build with go build to stamp it)"
	case len(commit) > 12:
		commit = commit[:12]
	}
	if r.Build.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(b, "duraflow bench  %s  %s\n", r.Started.Format(time.RFC3339), commit)
	fmt.Fprintf(b, "machine:  %d CPUs (GOMAXPROCS %d), %s/%s, %s\n", r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.OS, r.Machine.Arch, r.Build.GoVersion)
	fmt.Fprintf(b, "database: %s %s, %s\n", r.Database.Backend, r.Database.Version, r.Database.Where)
	if len(r.Database.Settings) > 0 {
		keys := make([]string, 0, len(r.Database.Settings))
		for k := range r.Database.Settings {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + r.Database.Settings[k]
		}
		fmt.Fprintf(b, "settings: %s\n", strings.Join(parts, " "))
	}
	s := r.Settings
	where := "first in this process"
	if s.ExternalRunners {
		where = "all in worker processes"
	}
	if s.Runners == 1 && !s.ExternalRunners {
		where = "in this process"
	}
	pool := ""
	if s.PoolMaxConns > 0 {
		pool = fmt.Sprintf(", pool %d conns", s.PoolMaxConns)
	}
	if s.NoEagerStart {
		pool += ", eager start off"
	}
	if s.NoLifecycleLog {
		pool += ", lifecycle log off"
	}
	fmt.Fprintf(b, "runners:  %d (%s), concurrency %d each, batch %d, in flight ≤ %d, poll %s%s\n",
		s.Runners, where, s.Concurrency, s.Batch, s.InFlight, time.Duration(s.PollIntervalMs*float64(time.Millisecond)), pool)
	switch {
	case s.MaintenanceSeconds > 0:
		fmt.Fprintf(b, "maintenance: what autovacuum would do, checked every %s: %d VACUUMs, %d ANALYZEs\n",
			time.Duration(s.MaintenanceSeconds*float64(time.Second)), s.MaintenanceVacuums, s.MaintenanceAnalyzes)
	case r.Database.Settings["autovacuum"] == "off":
		fmt.Fprintf(b, "warning:  autovacuum is off on this server: the run's tables are never vacuumed or analyzed (see --maintenance)\n")
	}
}

func writeIntervals(b *strings.Builder, res *Result) {
	fmt.Fprintf(b, "%s: throughput per interval\n", res.Workload)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "FROM\tWORKFLOWS\tSTEPS/S\tQUEUE LIVE\tQUEUE DEAD\tQUEUE BYTES\t")
	for _, iv := range res.Intervals {
		live, dead, size := "-", "-", "-"
		if iv.Queue != nil {
			live = strconv.FormatInt(iv.Queue.LiveRows, 10)
			dead = strconv.FormatInt(iv.Queue.DeadRows, 10)
			size = formatBytes(iv.Queue.Bytes)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", (time.Duration(iv.StartSeconds) * time.Second).String(),
			iv.Workflows, formatNumber(iv.StepsPerSecond), live, dead, size)
	}
	_ = tw.Flush()
}

func writeSQL(b *strings.Builder, res *Result) {
	fmt.Fprintf(b, "%s: statements sent by this process (round trips)\n", res.Workload)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATEMENT\tCALLS\tPER UNIT\tMEAN MS\tTOTAL S")
	for _, s := range res.SQL {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.3f\t%.2f\n", s.Statement, s.Calls, s.PerUnit, s.MeanMs, s.TotalSeconds)
	}
	_ = tw.Flush()
}

// formatValue prints a figure with its unit: thousands separated above 1000,
// three significant digits below.
func formatValue(v float64, unit string) string {
	return formatNumber(v) + " " + unit
}

func formatNumber(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case math.Abs(v) >= 1000:
		return groupThousands(int64(math.Round(v)))
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func formatRatio(m Metric) string {
	if m.Ceiling == "" || m.CeilingValue == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f× %s (%s)", m.Ratio, m.Ceiling, formatNumber(m.CeilingValue))
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
