package bench

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duraflow/duraflow/db/sqlite"
)

//go:embed sqliteceiling/*.sql
var sqliteCeilingScripts embed.FS

// sqliteCeilingFiles are the SQL files of the SQLite ceiling's shapes, by
// ceiling name; they run in the order of ceilingScripts.
var sqliteCeilingFiles = map[string]string{
	CeilingStepTx:     "step_tx.sql",
	CeilingCheckpoint: "checkpoint.sql",
	CeilingBatch10:    "batch10.sql",
}

// sqliteCeilingVia names how the SQLite ceiling is measured, in the report.
const sqliteCeilingVia = "database/sql (SQLite)"

// sqliteStmt is one statement of a ceiling script.
type sqliteStmt struct {
	text string
	// params are the named parameters (":name") it uses.
	params []string
	// returns is set for a statement whose one row's columns become
	// parameters of the later statements.
	returns bool
}

var (
	sqliteParam     = regexp.MustCompile(`:([a-z_][a-z0-9_]*)`)
	sqliteReturning = regexp.MustCompile(`(?i)\bRETURNING\b`)
)

// parseSQLiteScript splits a script into its statements: whole-line "--"
// comments are dropped, and a statement ends with a ';' at the end of a
// line.
func parseSQLiteScript(text string) ([]sqliteStmt, error) {
	var (
		stmts []sqliteStmt
		cur   strings.Builder
	)
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if t := strings.TrimSpace(line); !strings.HasSuffix(t, ";") {
			continue
		}
		s := sqliteStmt{text: strings.TrimSpace(cur.String())}
		cur.Reset()
		seen := map[string]bool{}
		for _, m := range sqliteParam.FindAllStringSubmatch(s.text, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				s.params = append(s.params, m[1])
			}
		}
		s.returns = sqliteReturning.MatchString(s.text)
		stmts = append(stmts, s)
	}
	if strings.TrimSpace(cur.String()) != "" {
		return nil, errors.New("the last statement does not end with ';'")
	}
	if len(stmts) == 0 {
		return nil, errors.New("no statements")
	}
	return stmts, nil
}

// execSQLiteScript runs the statements in order inside tx, binding each
// parameter from vars; a RETURNING statement must return one row, whose
// columns are added to vars.
func execSQLiteScript(ctx context.Context, tx *sql.Tx, stmts []sqliteStmt, prepared []*sql.Stmt, vars map[string]any) error {
	for i, s := range stmts {
		args := make([]any, len(s.params))
		for j, p := range s.params {
			v, ok := vars[p]
			if !ok {
				return fmt.Errorf("statement %d uses :%s, which nothing set", i+1, p)
			}
			args[j] = sql.Named(p, v)
		}
		var st *sql.Stmt
		if prepared != nil {
			st = tx.StmtContext(ctx, prepared[i])
		}
		if !s.returns {
			var err error
			if st != nil {
				_, err = st.ExecContext(ctx, args...)
			} else {
				_, err = tx.ExecContext(ctx, s.text, args...)
			}
			if err != nil {
				return fmt.Errorf("statement %d: %w", i+1, err)
			}
			continue
		}
		var (
			rows *sql.Rows
			err  error
		)
		if st != nil {
			rows, err = st.QueryContext(ctx, args...)
		} else {
			rows, err = tx.QueryContext(ctx, s.text, args...)
		}
		if err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
		err = scanOneRow(rows, vars)
		if err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	return nil
}

// scanOneRow reads the one row of rows into vars, by column name.
func scanOneRow(rows *sql.Rows, vars map[string]any) error {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return err
	}
	for i, c := range cols {
		vars[c] = vals[i]
	}
	if rows.Next() {
		return errors.New("more than one row")
	}
	return rows.Err()
}

// sqliteCeilingPath is the file the SQLite ceiling writes: a sibling of
// the run's database, so on the same filesystem.
func sqliteCeilingPath(runFile string) string { return runFile + ".ceiling.db" }

// removeSQLiteFile removes a database file with its WAL and shared-memory
// files.
func removeSQLiteFile(path string) error {
	var errs []error
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// engineTables are the tables the ceiling copies.
var engineTables = []string{"workflow_instance", "workflow_step", "workflow_task"}

// engineSchema reads the CREATE statements of the engine's tables and of
// their indexes from the run's database, renamed workflow_* -> ceiling_*,
// tables first.
func engineSchema(ctx context.Context, runFile string) ([]string, error) {
	r, err := sql.Open("sqlite", runFile+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rows, err := r.QueryContext(ctx, `
		SELECT sql FROM sqlite_schema
		WHERE tbl_name IN (?, ?, ?) AND type IN ('table', 'index') AND sql IS NOT NULL
		ORDER BY type = 'index', rowid`, engineTables[0], engineTables[1], engineTables[2])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	rename := regexp.MustCompile(`\bworkflow_(instance|step|task)`)
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, rename.ReplaceAllString(s, "ceiling_$1"))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) < len(engineTables) {
		return nil, fmt.Errorf("found %d CREATE statements of the engine's tables in %s", len(out), runFile)
	}
	return out, nil
}

// runSQLiteCeiling measures the SQLite ceiling: the SQL shapes of
// sqliteceiling/*.sql on copies of the engine's tables, in a sibling file of
// the run's database opened as db/sqlite opens its store, from
// Config.CeilingClients goroutines for Config.CeilingDuration each.
func runSQLiteCeiling(ctx context.Context, cfg *Config, runFile string, c *Ceiling) (err error) {
	path := sqliteCeilingPath(runFile)
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists: the ceiling wants a fresh file", path)
	}
	schema, err := engineSchema(ctx, runFile)
	if err != nil {
		return fmt.Errorf("reading the engine's tables: %w", err)
	}
	w, err := sqlite.OpenWriter(ctx, path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer func() {
		err = errors.Join(err, w.Close(), removeSQLiteFile(path))
	}()
	c.Where = "file " + path + " (a sibling of the run's database, removed afterwards)"
	var version string
	if err := w.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&version); err != nil {
		return err
	}
	c.Tool = "SQLite " + version + " through database/sql (modernc.org/sqlite), not pgbench"
	if c.Settings, err = sqliteConnSettings(ctx, w); err != nil {
		return fmt.Errorf("reading the connection's pragmas: %w", err)
	}
	c.Settings["write connections"] = "1"

	if err := setupSQLiteCeiling(ctx, w, schema); err != nil {
		return fmt.Errorf("creating the ceiling's tables: %w", err)
	}
	result, err := json.Marshal(stepResult("s1234", 0))
	if err != nil {
		return err
	}
	var keys atomic.Int64
	for _, s := range ceilingScripts {
		file := sqliteCeilingFiles[s.name]
		text, err := sqliteCeilingScripts.ReadFile("sqliteceiling/" + file)
		if err != nil {
			return err
		}
		stmts, err := parseSQLiteScript(string(text))
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		p := newProgress(cfg.Progress, "ceiling "+s.name+" (SQLite)", int(cfg.CeilingDuration.Seconds()), "s")
		stopTicks := tickProgress(p)
		run, err := runSQLiteShape(ctx, w, stmts, cfg.CeilingClients, cfg.CeilingDuration, string(result), &keys)
		stopTicks()
		if err != nil {
			p.Finish("failed")
			return fmt.Errorf("SQLite ceiling %s: %w", s.name, err)
		}
		run.Name, run.Description, run.StepsPerTx, run.SQL, run.Via = s.name, s.description, s.steps, string(text), sqliteCeilingVia
		run.StepsPerSecond = run.TPS * float64(s.steps)
		p.Finish(fmt.Sprintf("%s steps/s", formatNumber(run.StepsPerSecond)))
		c.Scripts = append(c.Scripts, *run)
	}
	return nil
}

// sqliteConnSettings reads the pragmas that bound write throughput from
// the connection itself.
func sqliteConnSettings(ctx context.Context, w *sql.DB) (map[string]string, error) {
	settings := map[string]string{}
	for _, name := range []string{"journal_mode", "synchronous", "busy_timeout", "foreign_keys"} {
		var v string
		if err := w.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			return nil, fmt.Errorf("PRAGMA %s: %w", name, err)
		}
		if name == "synchronous" {
			v = map[string]string{"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}[v] + " (" + v + ")"
		}
		settings[name] = v
	}
	return settings, nil
}

// setupSQLiteCeiling creates the copies of the engine's tables and seeds
// them with setup.sql, in one transaction.
func setupSQLiteCeiling(ctx context.Context, w *sql.DB, schema []string) error {
	text, err := sqliteCeilingScripts.ReadFile("sqliteceiling/setup.sql")
	if err != nil {
		return err
	}
	seed, err := parseSQLiteScript(string(text))
	if err != nil {
		return fmt.Errorf("setup.sql: %w", err)
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, s := range schema {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	if err := execSQLiteScript(ctx, tx, seed, nil, map[string]any{"now": time.Now().UnixMicro()}); err != nil {
		return fmt.Errorf("setup.sql: %w", err)
	}
	return tx.Commit()
}

// runSQLiteShape runs one shape from clients goroutines for d: each runs
// the script's statements in a write transaction of its own, again and
// again, queueing for the one write connection as the store's writers do.
// Statements are prepared once, as pgbench -M prepared does.
func runSQLiteShape(ctx context.Context, w *sql.DB, stmts []sqliteStmt, clients int, d time.Duration, result string, keys *atomic.Int64) (*CeilingScript, error) {
	prepared := make([]*sql.Stmt, len(stmts))
	for i, s := range stmts {
		st, err := w.PrepareContext(ctx, s.text)
		if err != nil {
			return nil, fmt.Errorf("preparing statement %d: %w", i+1, err)
		}
		defer st.Close()
		prepared[i] = st
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		txs      int64
		busy     time.Duration
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			var n int64
			var spent time.Duration
			defer func() {
				mu.Lock()
				txs += n
				busy += spent
				mu.Unlock()
			}()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				vars := map[string]any{
					"now":    time.Now().UnixMicro(),
					"key":    "s" + strconv.FormatInt(keys.Add(1), 10),
					"iid":    strconv.Itoa(1 + rand.IntN(1000)),
					"result": result,
				}
				t0 := time.Now()
				if err := sqliteTx(ctx, w, stmts, prepared, vars); err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				spent += time.Since(t0)
				n++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if txs == 0 {
		return nil, errors.New("no transaction committed")
	}
	return &CeilingScript{
		TPS:       float64(txs) / elapsed.Seconds(),
		LatencyMs: ms(busy) / float64(txs),
	}, nil
}

// sqliteTx runs the script once in a write transaction of its own.
func sqliteTx(ctx context.Context, w *sql.DB, stmts []sqliteStmt, prepared []*sql.Stmt, vars map[string]any) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := execSQLiteScript(ctx, tx, stmts, prepared, vars); err != nil {
		return err
	}
	return tx.Commit()
}
