package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
)

// schemaPrefix starts the name of every run's Postgres schema.
const schemaPrefix = "duraflow_bench_"

// database is the database of one run, created for it and dropped after it
// (unless Config.Keep).
type database struct {
	backend dburl.Backend
	// url is what stores and workers open: on Postgres the user's URL with
	// the run's schema as search_path; on SQLite a sqlite: URL of the file.
	url string
	// where says in words where the run's data is.
	where string

	// Postgres.
	adminURL    string
	schema      string
	wakeChannel string
	// SQLite.
	file    string
	tempDir string

	probe probe
}

// openDatabase creates and migrates the run's database.
func openDatabase(ctx context.Context, cfg *Config) (*database, error) {
	u := strings.TrimSpace(cfg.DatabaseURL)
	if u == "sqlite" || u == "sqlite:" || u == "sqlite://" {
		dir, err := os.MkdirTemp("", "duraflow-bench-")
		if err != nil {
			return nil, fmt.Errorf("creating a temporary directory: %w", err)
		}
		d, err := openSQLite(ctx, filepath.Join(dir, "bench.db"))
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		d.tempDir = dir
		return d, nil
	}
	backend, dsn, err := dburl.Parse(u)
	if err != nil {
		return nil, err
	}
	if backend == dburl.Postgres {
		return openPostgres(ctx, dsn)
	}
	path := strings.TrimPrefix(dsn, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		return nil, fmt.Errorf("an SQLite URL with parameters (%q) is not supported: name a plain file", dsn)
	}
	if path == ":memory:" || path == "" {
		return nil, errors.New("an in-memory SQLite database cannot be measured; use --db sqlite for a fresh temporary file")
	}
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("%s exists: the benchmark wants a fresh database file (or --db sqlite for a temporary one)", path)
	}
	return openSQLite(ctx, path)
}

func openSQLite(ctx context.Context, path string) (*database, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("opening SQLite: %w", err)
	}
	err = sqlite.Migrate(ctx, s)
	_ = s.Close()
	if err != nil {
		return nil, fmt.Errorf("migrating %s: %w", abs, err)
	}
	d := &database{backend: dburl.SQLite, url: "sqlite:" + abs, file: abs, where: "file " + abs}
	d.probe, err = newSQLiteProbe(abs)
	if err != nil {
		_ = os.Remove(abs)
		return nil, err
	}
	return d, nil
}

func openPostgres(ctx context.Context, rawURL string) (_ *database, err error) {
	schema := schemaPrefix + randomHex(6)
	// The application name tells the run's server processes from others, so
	// their CPU time can be read (see pgProbe.backendCPU).
	appName := "duraflow-" + strings.ReplaceAll(schema, "_", "-")
	storeURL, err := withQuery(rawURL, map[string]string{"search_path": schema, "application_name": appName})
	if err != nil {
		return nil, err
	}
	d := &database{
		backend: dburl.Postgres, url: storeURL, adminURL: rawURL, schema: schema,
		wakeChannel: postgres.WakeChannel + "_bench_" + strings.TrimPrefix(schema, schemaPrefix),
		where:       "schema " + schema,
	}
	if err := execAdmin(ctx, rawURL, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("creating schema %s: %w", schema, err)
	}
	defer func() {
		if err != nil {
			_, _ = d.close(context.WithoutCancel(ctx), false)
		}
	}()
	pc, err := pgxpool.ParseConfig(storeURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrating schema %s: %w", schema, err)
	}
	d.probe = &pgProbe{pool: pool, appName: appName}
	return d, nil
}

// close drops the run's schema or file unless keep, and returns where the
// kept data is.
func (d *database) close(ctx context.Context, keep bool) (string, error) {
	if d.probe != nil {
		d.probe.close()
	}
	if keep {
		if d.backend == dburl.Postgres {
			return fmt.Sprintf("schema %s (search_path=%s)", d.schema, d.schema), nil
		}
		return d.file, nil
	}
	if d.backend == dburl.Postgres {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := execAdmin(ctx, d.adminURL, "DROP SCHEMA IF EXISTS "+pgx.Identifier{d.schema}.Sanitize()+" CASCADE"); err != nil {
			return "", fmt.Errorf("dropping schema %s: %w", d.schema, err)
		}
		return "", nil
	}
	if d.tempDir != "" {
		return "", os.RemoveAll(d.tempDir)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(d.file + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", nil
}

// connect opens one connection to a postgres:// URL that may also set the
// store's pool (pool_max_conns and the other pool_ parameters, which
// pgxpool.ParseConfig takes out, where pgx.Connect would send them to the
// server as settings it does not know).
func connect(ctx context.Context, rawURL string) (*pgx.Conn, error) {
	pc, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, pc.ConnConfig)
}

// execAdmin runs one statement on a connection of its own.
func execAdmin(ctx context.Context, rawURL, stmt string) error {
	conn, err := connect(ctx, rawURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, stmt)
	return err
}

// withQuery returns a postgres:// URL with query parameters set.
func withQuery(rawURL string, params map[string]string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("parsing the database URL: %w", err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// instanceTimes are the timestamps of one instance.
type instanceTimes struct {
	status    string
	created   time.Time
	started   time.Time // zero when it never started
	completed time.Time // zero when it is not finished
}

// probe reads the run's figures from the database on connections of its
// own, whichever process did the work.
type probe interface {
	// inFlight counts the unfinished instances of a workflow: the rows of
	// its tasks. Every unfinished instance has one task row and a finished
	// one none, and the task table holds only those rows, so the count is a
	// short walk of its (workflow_name, instance_id) index, where counting
	// instances by status would walk an index that grows with every
	// instance the run has finished, on the very database being measured.
	inFlight(ctx context.Context, workflowName string) (int, error)
	// instances returns the timestamps of every instance of a workflow.
	instances(ctx context.Context, workflowName string) ([]instanceTimes, error)
	// queueStats describes the task table, nil where the backend keeps no
	// such statistics.
	queueStats(ctx context.Context) (*QueueStats, error)
	// backendCPU is the CPU time so far of the server processes of the run's
	// connections; false where there are none (SQLite) or it cannot be read.
	backendCPU(ctx context.Context) (time.Duration, bool)
	// info returns the database's version and the settings that bound it.
	info(ctx context.Context) (version string, settings map[string]string, err error)
	close()
}

type pgProbe struct {
	pool    *pgxpool.Pool
	appName string
}

func (p *pgProbe) inFlight(ctx context.Context, name string) (int, error) {
	var n int
	if name == nameKeyed {
		// Instances waiting for a slot have no task: count them too.
		err := p.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM workflow_task WHERE workflow_name = $1)
			+ (SELECT count(*) FROM workflow_limit_member WHERE scope >= $2 AND scope < $3 AND state = 'waiting' AND blocked)`,
			name, keyScopeStart, keyScopeEnd).Scan(&n)
		return n, err
	}
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM workflow_task WHERE workflow_name = $1`, name).Scan(&n)
	return n, err
}

// The range of the keyed workload's key scopes (db.KeyScope).
const (
	keyScopeStart = "key:" + nameKeyed + ":"
	keyScopeEnd   = "key:" + nameKeyed + ";"
)

func (p *pgProbe) instances(ctx context.Context, name string) ([]instanceTimes, error) {
	rows, err := p.pool.Query(ctx, `SELECT status, created_at, started_at, completed_at FROM workflow_instance WHERE workflow_name = $1`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []instanceTimes
	for rows.Next() {
		var it instanceTimes
		var started, completed *time.Time
		if err := rows.Scan(&it.status, &it.created, &started, &completed); err != nil {
			return nil, err
		}
		if started != nil {
			it.started = *started
		}
		if completed != nil {
			it.completed = *completed
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func (p *pgProbe) queueStats(ctx context.Context) (*QueueStats, error) {
	var s QueueStats
	err := p.pool.QueryRow(ctx, `
		SELECT n_live_tup, n_dead_tup, autovacuum_count, pg_total_relation_size(relid)
		FROM pg_stat_user_tables
		WHERE schemaname = current_schema() AND relname = 'workflow_task'`).Scan(&s.LiveRows, &s.DeadRows, &s.Autovacuums, &s.Bytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &s, err
}

// backendCPU adds up the CPU time of the run's backends, read from
// /proc/<pid>/stat: it works when Postgres runs on this machine (Linux).
func (p *pgProbe) backendCPU(ctx context.Context) (time.Duration, bool) {
	rows, err := p.pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, p.appName)
	if err != nil {
		return 0, false
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, pid := range pids {
		d, ok := procCPU(int(pid))
		if !ok {
			return 0, false
		}
		total += d
	}
	return total, true
}

// pgSettings are the server settings a report records.
var pgSettings = []string{
	"synchronous_commit", "fsync", "wal_sync_method", "full_page_writes", "commit_delay",
	"shared_buffers", "wal_buffers", "max_wal_size", "checkpoint_timeout", "autovacuum", "max_connections",
}

func (p *pgProbe) info(ctx context.Context) (string, map[string]string, error) {
	var version string
	if err := p.pool.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&version); err != nil {
		return "", nil, err
	}
	settings := map[string]string{}
	for _, name := range pgSettings {
		var v string
		if err := p.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			return "", nil, fmt.Errorf("reading setting %s: %w", name, err)
		}
		settings[name] = v
	}
	var preload string
	if err := p.pool.QueryRow(ctx, `SELECT current_setting('shared_preload_libraries')`).Scan(&preload); err == nil && preload != "" {
		settings["shared_preload_libraries"] = preload
	}
	return "PostgreSQL " + version, settings, nil
}

func (p *pgProbe) close() { p.pool.Close() }

type sqliteProbe struct{ db *sql.DB }

func newSQLiteProbe(path string) (*sqliteProbe, error) {
	// The sqlite package registered the modernc.org/sqlite driver.
	sdb, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("opening %s to measure: %w", path, err)
	}
	sdb.SetMaxOpenConns(2)
	return &sqliteProbe{db: sdb}, nil
}

func (p *sqliteProbe) inFlight(ctx context.Context, name string) (int, error) {
	var n int
	if name == nameKeyed {
		// Instances waiting for a slot have no task: count them too.
		err := p.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM workflow_task WHERE workflow_name = ?1)
			+ (SELECT count(*) FROM workflow_limit_member WHERE scope >= ?2 AND scope < ?3 AND state = 'waiting' AND blocked = 1)`,
			name, keyScopeStart, keyScopeEnd).Scan(&n)
		return n, err
	}
	err := p.db.QueryRowContext(ctx, `SELECT count(*) FROM workflow_task WHERE workflow_name = ?`, name).Scan(&n)
	return n, err
}

func (p *sqliteProbe) instances(ctx context.Context, name string) ([]instanceTimes, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT status, created_at, started_at, completed_at FROM workflow_instance WHERE workflow_name = ?`, name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []instanceTimes
	for rows.Next() {
		var it instanceTimes
		var created int64
		var started, completed sql.NullInt64
		if err := rows.Scan(&it.status, &created, &started, &completed); err != nil {
			return nil, err
		}
		it.created = time.UnixMicro(created)
		if started.Valid {
			it.started = time.UnixMicro(started.Int64)
		}
		if completed.Valid {
			it.completed = time.UnixMicro(completed.Int64)
		}
		out = append(out, it)
	}
	return out, rows.Err()
}

func (p *sqliteProbe) queueStats(context.Context) (*QueueStats, error) { return nil, nil }

func (p *sqliteProbe) backendCPU(context.Context) (time.Duration, bool) { return 0, false }

func (p *sqliteProbe) info(ctx context.Context) (string, map[string]string, error) {
	var version, journal string
	if err := p.db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&version); err != nil {
		return "", nil, err
	}
	if err := p.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		return "", nil, err
	}
	// The store's write connection sets synchronous=NORMAL and a single
	// writer (see package sqlite); a second connection cannot read them.
	return "SQLite " + version, map[string]string{"journal_mode": journal, "driver": "modernc.org/sqlite (pure Go)"}, nil
}

func (p *sqliteProbe) close() { _ = p.db.Close() }
