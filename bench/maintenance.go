package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// maintainedTables are the engine's tables the maintenance looks after.
var maintainedTables = []string{"workflow_task", "workflow_instance", "workflow_step", "workflow_event", "workflow_hook_outbox"}

// maintenance does what autovacuum would do to the run's tables, with a
// naptime of its own: every interval it reads each table's statistics and
// vacuums or analyzes the ones past autovacuum's thresholds (the server's
// autovacuum_* settings, or the table's own storage options, as the engine
// sets them on its queue). It stands in for autovacuum on a server where it
// is off, and for the first minute of a fresh schema, before autovacuum
// (which visits a database once a minute by default) has analyzed it.
type maintenance struct {
	stop func()
	done chan struct{}

	mu       sync.Mutex
	vacuums  int
	analyzes int
	err      error
	defaults autovacuumSettings
}

// autovacuumSettings are autovacuum's thresholds for one table.
type autovacuumSettings struct {
	enabled                        bool
	vacuumThreshold, vacuumScale   float64
	insertThreshold, insertScale   float64
	analyzeThreshold, analyzeScale float64
}

// startMaintenance connects, runs a first round and starts the loop.
func startMaintenance(ctx context.Context, url string, every time.Duration) (*maintenance, error) {
	conn, err := connect(ctx, url)
	if err != nil {
		return nil, err
	}
	m := &maintenance{done: make(chan struct{})}
	if m.defaults, err = serverAutovacuumSettings(ctx, conn); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("reading autovacuum's settings: %w", err)
	}
	if err := m.round(ctx, conn); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = cancel
	go func() {
		defer close(m.done)
		defer conn.Close(context.WithoutCancel(loopCtx))
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-loopCtx.Done():
				return
			case <-t.C:
				if err := m.round(loopCtx, conn); err != nil && loopCtx.Err() == nil {
					m.mu.Lock()
					m.err = err
					m.mu.Unlock()
					return
				}
			}
		}
	}()
	return m, nil
}

// serverAutovacuumSettings reads the server-wide autovacuum thresholds.
func serverAutovacuumSettings(ctx context.Context, conn *pgx.Conn) (autovacuumSettings, error) {
	s := autovacuumSettings{enabled: true}
	for name, dst := range map[string]*float64{
		"autovacuum_vacuum_threshold":           &s.vacuumThreshold,
		"autovacuum_vacuum_scale_factor":        &s.vacuumScale,
		"autovacuum_vacuum_insert_threshold":    &s.insertThreshold,
		"autovacuum_vacuum_insert_scale_factor": &s.insertScale,
		"autovacuum_analyze_threshold":          &s.analyzeThreshold,
		"autovacuum_analyze_scale_factor":       &s.analyzeScale,
	} {
		var v string
		if err := conn.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v); err != nil {
			return s, err
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s, fmt.Errorf("%s=%q: %w", name, v, err)
		}
		*dst = f
	}
	return s, nil
}

// withOptions applies a table's storage options (reloptions) to the
// server's settings.
func (s autovacuumSettings) withOptions(options []string) autovacuumSettings {
	for _, o := range options {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			continue
		}
		if k == "autovacuum_enabled" {
			s.enabled = v != "false" && v != "off"
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch k {
		case "autovacuum_vacuum_threshold":
			s.vacuumThreshold = f
		case "autovacuum_vacuum_scale_factor":
			s.vacuumScale = f
		case "autovacuum_vacuum_insert_threshold":
			s.insertThreshold = f
		case "autovacuum_vacuum_insert_scale_factor":
			s.insertScale = f
		case "autovacuum_analyze_threshold":
			s.analyzeThreshold = f
		case "autovacuum_analyze_scale_factor":
			s.analyzeScale = f
		}
	}
	return s
}

// tableStats are the counters autovacuum decides on.
type tableStats struct {
	name                                            string
	reltuples                                       float64
	dead, modifiedSinceAnalyze, insertedSinceVacuum float64
	options                                         []string
}

// decide says whether autovacuum would vacuum and whether it would analyze
// the table, as autovacuum.c's relation_needs_vacanalyze does.
func (s autovacuumSettings) decide(t tableStats) (vacuum, analyze bool) {
	if !s.enabled {
		return false, false
	}
	tuples := max(t.reltuples, 0)
	vacuum = t.dead > s.vacuumThreshold+s.vacuumScale*tuples ||
		s.insertThreshold >= 0 && t.insertedSinceVacuum > s.insertThreshold+s.insertScale*tuples
	analyze = t.modifiedSinceAnalyze > s.analyzeThreshold+s.analyzeScale*tuples
	return vacuum, analyze
}

// round vacuums and analyzes what autovacuum would now.
func (m *maintenance) round(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `
		SELECT s.relname, c.reltuples, s.n_dead_tup, s.n_mod_since_analyze, s.n_ins_since_vacuum,
			coalesce(c.reloptions, '{}')
		FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
		WHERE s.schemaname = current_schema() AND s.relname = ANY($1)`, maintainedTables)
	if err != nil {
		return err
	}
	var tables []tableStats
	for rows.Next() {
		var t tableStats
		var dead, mod, ins int64
		var reltuples float32
		if err := rows.Scan(&t.name, &reltuples, &dead, &mod, &ins, &t.options); err != nil {
			rows.Close()
			return err
		}
		t.reltuples, t.dead, t.modifiedSinceAnalyze, t.insertedSinceVacuum = float64(reltuples), float64(dead), float64(mod), float64(ins)
		tables = append(tables, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, t := range tables {
		vacuum, analyze := m.defaults.withOptions(t.options).decide(t)
		var stmt string
		switch {
		case vacuum && analyze:
			stmt = "VACUUM (ANALYZE) "
		case vacuum:
			stmt = "VACUUM "
		case analyze:
			stmt = "ANALYZE "
		default:
			continue
		}
		if _, err := conn.Exec(ctx, stmt+pgx.Identifier{t.name}.Sanitize(), pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("%s%s: %w", stmt, t.name, err)
		}
		m.mu.Lock()
		if vacuum {
			m.vacuums++
		}
		if analyze {
			m.analyzes++
		}
		m.mu.Unlock()
	}
	return nil
}

// close stops the loop and returns how many vacuums and analyzes ran, and
// the loop's error.
func (m *maintenance) close() (vacuums, analyzes int, err error) {
	if m == nil {
		return 0, 0, nil
	}
	m.stop()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.vacuums, m.analyzes, m.err
}
