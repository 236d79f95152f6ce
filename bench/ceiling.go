package bench

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duraflow/duraflow/db/dburl"
)

// Ceiling is the database's own limit for the SQL shapes the engine uses,
// measured in the same run: on Postgres with pgbench, plus the
// LISTEN/NOTIFY latency; on SQLite with the same shapes run through
// database/sql on a write connection opened as db/sqlite opens its store's.
type Ceiling struct {
	// Backend is the database measured: "postgres" or "sqlite".
	Backend string `json:"backend,omitempty"`
	// Tool says what measured it: pgbench's version line, or the SQLite
	// version and driver.
	Tool string `json:"tool,omitempty"`
	// Clients is pgbench's clients, or on SQLite the goroutines that share
	// the one write connection.
	Clients         int     `json:"clients"`
	DurationSeconds float64 `json:"duration_s"`
	// Where is the SQLite file the shapes ran in.
	Where string `json:"where,omitempty"`
	// Settings are the SQLite pragmas the ceiling's connection reported.
	Settings map[string]string `json:"settings,omitempty"`
	// Scripts are the results, by script (pgbench) or shape (SQLite).
	Scripts []CeilingScript `json:"scripts,omitempty"`
	// Notify is the latency from sending a NOTIFY to receiving it on a
	// LISTENing connection, sequential samples.
	Notify *Summary `json:"notify,omitempty"`
	// Skipped says why the ceiling was not measured (pgbench not on PATH, …).
	Skipped string `json:"skipped,omitempty"`
}

// CeilingScript is what one pgbench script or SQLite shape reached.
type CeilingScript struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Via says what ran it: "pgbench", or "database/sql (SQLite)".
	Via        string  `json:"via,omitempty"`
	TPS        float64 `json:"tps"`
	StepsPerTx int     `json:"steps_per_tx"`
	// StepsPerSecond is TPS × StepsPerTx.
	StepsPerSecond float64 `json:"steps_per_s"`
	// LatencyMs is the mean time of a transaction as its client saw it,
	// waiting for the connection or a lock included.
	LatencyMs float64 `json:"latency_avg_ms"`
	Failed    int     `json:"failed,omitempty"`
	// SQL is the script that ran (bench/pgbench/*.sql or
	// bench/sqliteceiling/*.sql).
	SQL string `json:"sql"`
}

// Ceiling names, as metrics refer to them.
const (
	CeilingStepTx     = "step-tx"
	CeilingCheckpoint = "checkpoint"
	CeilingBatch10    = "batch10"
	CeilingNotifyP50  = "notify-p50"
	CeilingNotifyP99  = "notify-p99"
)

//go:embed pgbench/*.sql
var pgbenchScripts embed.FS

// ceilingScripts are the scripts the ceiling runs, in order.
var ceilingScripts = []struct {
	name, file, description string
	steps                   int
}{
	{CeilingStepTx, "step_tx.sql", "one transaction per step: claim the task, update the instance, insert the step, reschedule the task", 1},
	{CeilingCheckpoint, "checkpoint.sql", "a checkpoint only: update the instance and insert the step in one transaction", 1},
	{CeilingBatch10, "batch10.sql", "10 step rows in one multi-row INSERT per commit", 10},
}

// Value returns a ceiling figure by name: steps per second for the scripts,
// milliseconds for the notify latencies.
func (c *Ceiling) Value(name string) (float64, bool) {
	if c == nil {
		return 0, false
	}
	switch name {
	case CeilingNotifyP50:
		if c.Notify != nil {
			return c.Notify.P50, true
		}
		return 0, false
	case CeilingNotifyP99:
		if c.Notify != nil {
			return c.Notify.P99, true
		}
		return 0, false
	}
	for _, s := range c.Scripts {
		if s.Name == name {
			return s.StepsPerSecond, true
		}
	}
	return 0, false
}

// runCeiling measures the ceiling of the run's database.
func runCeiling(ctx context.Context, cfg *Config, d *database) (*Ceiling, error) {
	c := &Ceiling{Backend: string(d.backend), Clients: cfg.CeilingClients, DurationSeconds: cfg.CeilingDuration.Seconds()}
	if d.backend == dburl.SQLite {
		if err := runSQLiteCeiling(ctx, cfg, d.file, c); err != nil {
			return nil, err
		}
		return c, nil
	}
	var err error
	if c.Notify, err = notifyLatency(ctx, d.url, 200); err != nil {
		return nil, fmt.Errorf("measuring LISTEN/NOTIFY: %w", err)
	}
	path, err := exec.LookPath(cfg.Pgbench)
	if err != nil {
		c.Skipped = fmt.Sprintf("pgbench (%s) is not on PATH: no ceiling ratios; install the PostgreSQL client tools (postgresql-client) to get them", cfg.Pgbench)
		return c, nil
	}
	if out, err := exec.CommandContext(ctx, path, "--version").Output(); err == nil {
		c.Tool = strings.TrimSpace(string(out))
	}
	if err := setupCeilingTables(ctx, d.url); err != nil {
		return nil, fmt.Errorf("creating the ceiling's tables: %w", err)
	}
	defer func() {
		_ = execAdmin(context.WithoutCancel(ctx), d.url, "DROP TABLE IF EXISTS ceiling_step, ceiling_task, ceiling_instance; DROP SEQUENCE IF EXISTS ceiling_step_key")
	}()
	env, err := pgbenchEnv(d.adminURL, d.schema)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "duraflow-ceiling-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	result, err := json.Marshal(stepResult("s1234", 0))
	if err != nil {
		return nil, err
	}
	for _, s := range ceilingScripts {
		sqlText, err := pgbenchScripts.ReadFile("pgbench/" + s.file)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(dir, s.file)
		if err := os.WriteFile(file, sqlText, 0o600); err != nil {
			return nil, err
		}
		p := newProgress(cfg.Progress, "ceiling "+s.name, int(cfg.CeilingDuration.Seconds()), "s")
		stopTicks := tickProgress(p)
		run, err := runPgbench(ctx, path, env, file, cfg, string(result))
		stopTicks()
		if err != nil {
			p.Finish("failed")
			return nil, fmt.Errorf("pgbench %s: %w", s.name, err)
		}
		run.Name, run.Description, run.StepsPerTx, run.SQL, run.Via = s.name, s.description, s.steps, string(sqlText), "pgbench"
		run.StepsPerSecond = run.TPS * float64(s.steps)
		p.Finish(fmt.Sprintf("%s steps/s", formatNumber(run.StepsPerSecond)))
		c.Scripts = append(c.Scripts, *run)
	}
	return c, nil
}

// tickProgress advances p with the seconds elapsed until the returned
// function is called.
func tickProgress(p *progress) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.Set(int(time.Since(start).Seconds()))
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// setupCeilingTables creates and seeds the scratch tables, with the storage
// options (fillfactor…) of the engine's tables.
func setupCeilingTables(ctx context.Context, storeURL string) error {
	setup, err := pgbenchScripts.ReadFile("pgbench/setup.sql")
	if err != nil {
		return err
	}
	conn, err := connect(ctx, storeURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, string(setup)); err != nil {
		return err
	}
	for src, dst := range map[string]string{"workflow_instance": "ceiling_instance", "workflow_step": "ceiling_step", "workflow_task": "ceiling_task"} {
		var opts string
		if err := conn.QueryRow(ctx, `SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class WHERE oid = $1::regclass`, src).Scan(&opts); err != nil {
			return fmt.Errorf("reading the storage options of %s: %w", src, err)
		}
		if opts == "" {
			continue
		}
		if _, err := conn.Exec(ctx, "ALTER TABLE "+dst+" SET ("+opts+")"); err != nil {
			return fmt.Errorf("copying the storage options of %s: %w", src, err)
		}
	}
	return nil
}

// pgbenchEnv passes the connection to pgbench through libpq's variables,
// with the run's schema as search_path.
func pgbenchEnv(rawURL, schema string) ([]string, error) {
	pc, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	env := append(os.Environ(),
		"PGHOST="+pc.Host, "PGPORT="+strconv.Itoa(int(pc.Port)), "PGUSER="+pc.User,
		"PGDATABASE="+pc.Database, "PGOPTIONS=-c search_path="+schema,
		"PGAPPNAME=duraflow-bench-ceiling")
	if pc.Password != "" {
		env = append(env, "PGPASSWORD="+pc.Password)
	}
	if u, err := url.Parse(rawURL); err == nil {
		if mode := u.Query().Get("sslmode"); mode != "" {
			env = append(env, "PGSSLMODE="+mode)
		}
	}
	return env, nil
}

var (
	pgbenchTPS     = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
	pgbenchLatency = regexp.MustCompile(`(?m)^latency average = ([0-9.]+) ms`)
	pgbenchFailed  = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
)

func runPgbench(ctx context.Context, path string, env []string, script string, cfg *Config, result string) (*CeilingScript, error) {
	args := []string{
		"-n", "-M", "prepared",
		"-c", strconv.Itoa(cfg.CeilingClients), "-j", strconv.Itoa(min(cfg.CeilingClients, runtime.NumCPU())),
		"-T", strconv.Itoa(int(cfg.CeilingDuration.Seconds())),
		"-D", "result=" + result,
		"-f", script,
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	return parsePgbench(out.String(), runErr)
}

// parsePgbench reads pgbench's summary.
func parsePgbench(out string, runErr error) (*CeilingScript, error) {
	m := pgbenchTPS.FindStringSubmatch(out)
	if m == nil {
		if runErr == nil {
			runErr = errors.New("no tps in its output")
		}
		return nil, fmt.Errorf("%w\n%s", runErr, strings.TrimSpace(out))
	}
	s := &CeilingScript{}
	s.TPS, _ = strconv.ParseFloat(m[1], 64)
	if m := pgbenchLatency.FindStringSubmatch(out); m != nil {
		s.LatencyMs, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := pgbenchFailed.FindStringSubmatch(out); m != nil {
		s.Failed, _ = strconv.Atoi(m[1])
	}
	if runErr != nil {
		return nil, fmt.Errorf("%w (a client aborted)\n%s", runErr, strings.TrimSpace(out))
	}
	return s, nil
}

// notifyLatency measures NOTIFY → received on a LISTENing connection,
// sequentially, after a few unrecorded warm-up rounds.
func notifyLatency(ctx context.Context, storeURL string, samples int) (*Summary, error) {
	listener, err := connect(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	defer listener.Close(context.WithoutCancel(ctx))
	sender, err := connect(ctx, storeURL)
	if err != nil {
		return nil, err
	}
	defer sender.Close(context.WithoutCancel(ctx))
	channel := "duraflow_bench_notify_" + randomHex(4)
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return nil, err
	}
	var lat []time.Duration
	for i := range samples + 10 {
		start := time.Now()
		if _, err := sender.Exec(ctx, "SELECT pg_notify($1, 'x')", channel); err != nil {
			return nil, err
		}
		waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := listener.WaitForNotification(waitCtx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("waiting for a notification: %w", err)
		}
		if i >= 10 {
			lat = append(lat, time.Since(start))
		}
	}
	s := Summarize(lat)
	return &s, nil
}

// writeTable writes the ceiling's table.
func (c *Ceiling) writeTable(b io.Writer) {
	fmt.Fprintf(b, "ceiling: %s\n", c.headline())
	if c.Settings != nil {
		fmt.Fprintf(b, "ceiling connection: %s\n", formatSettings(c.Settings))
	}
	if c.Skipped != "" {
		fmt.Fprintf(b, "ceiling skipped: %s\n", c.Skipped)
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	if len(c.Scripts) > 0 || c.Notify != nil {
		fmt.Fprintln(tw, "CEILING\tMEASURED WITH\tSTEPS/S\tTX/S\tLATENCY\tSQL SHAPE")
	}
	for _, s := range c.Scripts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f ms\t%s\n", s.Name, cmp.Or(s.Via, "pgbench"), formatNumber(s.StepsPerSecond), formatNumber(s.TPS), s.LatencyMs, s.Description)
	}
	if c.Notify != nil {
		fmt.Fprintf(tw, "notify\tpgx\t\t\tp50 %.2f ms, p99 %.2f ms\tNOTIFY → received on a LISTENing connection (%d samples)\n", c.Notify.P50, c.Notify.P99, c.Notify.Count)
	}
	_ = tw.Flush()
}

// headline says in a line what measured the ceiling, and how.
func (c *Ceiling) headline() string {
	if c.Backend == string(dburl.SQLite) {
		tool := cmp.Or(c.Tool, "SQLite through database/sql (modernc.org/sqlite), not pgbench")
		return fmt.Sprintf("%s, %d client goroutines sharing one write connection as the store's writers do, %gs per shape, a sibling file of the run's database, same run",
			tool, c.Clients, c.DurationSeconds)
	}
	return fmt.Sprintf("%s, %d clients, %gs per script, same database, same run", cmp.Or(c.Tool, "pgbench"), c.Clients, c.DurationSeconds)
}

// formatSettings writes settings as sorted key=value pairs.
func formatSettings(settings map[string]string) string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + settings[k]
	}
	return strings.Join(parts, ", ")
}
