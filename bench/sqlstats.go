package bench

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// StatementStat is how often one statement went to Postgres during a
// workload and how long it took, wall time seen by the client: one call is
// one round trip (a pipelined batch counts once).
type StatementStat struct {
	// Statement is the sqlc query name (TaskClaim, Checkpoint…), begin,
	// commit, prepare, or the start of the SQL text.
	Statement string `json:"statement"`
	Calls     int64  `json:"calls"`
	// PerUnit is Calls per unit of the workload: per step for steps10 and
	// soak, per workflow for empty, per sample for wake, per create for
	// create.
	PerUnit      float64 `json:"per_unit"`
	MeanMs       float64 `json:"mean_ms"`
	TotalSeconds float64 `json:"total_s"`
}

// sqlTracer is a pgx tracer that adds up statements by name.
type sqlTracer struct {
	mu    sync.Mutex
	stats map[string]*stmtAgg
}

type stmtAgg struct {
	calls int64
	total time.Duration
}

type traceKey struct{}

type traceStart struct {
	label string
	at    time.Time
}

var (
	_ pgx.QueryTracer   = (*sqlTracer)(nil)
	_ pgx.BatchTracer   = (*sqlTracer)(nil)
	_ pgx.PrepareTracer = (*sqlTracer)(nil)
)

func newSQLTracer() *sqlTracer { return &sqlTracer{stats: map[string]*stmtAgg{}} }

// TraceQueryStart notes the start of a statement.
func (t *sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{label: statementLabel(data.SQL), at: time.Now()})
}

// TraceQueryEnd adds the statement up.
func (t *sqlTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.end(ctx)
}

// TraceBatchStart notes the start of a pipelined batch.
func (t *sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	label := "batch"
	if data.Batch != nil {
		var names []string
		for _, q := range data.Batch.QueuedQueries {
			names = append(names, statementLabel(q.SQL))
		}
		label = "batch[" + strings.Join(names, "+") + "]"
	}
	return context.WithValue(ctx, traceKey{}, traceStart{label: label, at: time.Now()})
}

// TraceBatchQuery is called for each statement of a batch; the batch counts
// as one round trip.
func (t *sqlTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd adds the batch up.
func (t *sqlTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.end(ctx)
}

// TracePrepareStart notes the start of a statement preparation, the extra
// round trip of a statement's first use on a connection.
func (t *sqlTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{label: "prepare", at: time.Now()})
}

// TracePrepareEnd adds the preparation up.
func (t *sqlTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	t.end(ctx)
}

func (t *sqlTracer) end(ctx context.Context) {
	s, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	d := time.Since(s.at)
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.stats[s.label]
	if a == nil {
		a = &stmtAgg{}
		t.stats[s.label] = a
	}
	a.calls++
	a.total += d
}

// take returns the statistics gathered since the last take, busiest first,
// with a total row, and starts over. units is the workload's count of units.
func (t *sqlTracer) take(units int) []StatementStat {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	stats := t.stats
	t.stats = map[string]*stmtAgg{}
	t.mu.Unlock()
	return statementStats(stats, units)
}

func statementStats(stats map[string]*stmtAgg, units int) []StatementStat {
	if len(stats) == 0 {
		return nil
	}
	var out []StatementStat
	var all stmtAgg
	for name, a := range stats {
		out = append(out, statementStat(name, a, units))
		all.calls += a.calls
		all.total += a.total
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TotalSeconds != out[j].TotalSeconds {
			return out[i].TotalSeconds > out[j].TotalSeconds
		}
		return out[i].Statement < out[j].Statement
	})
	return append(out, statementStat("(all round trips)", &all, units))
}

func statementStat(name string, a *stmtAgg, units int) StatementStat {
	s := StatementStat{Statement: name, Calls: a.calls, TotalSeconds: a.total.Seconds()}
	if a.calls > 0 {
		s.MeanMs = ms(a.total / time.Duration(a.calls))
	}
	if units > 0 {
		s.PerUnit = float64(a.calls) / float64(units)
	}
	return s
}

// statementLabel names a statement: the sqlc query name its text starts
// with ("-- name: TaskClaim :many"), or its first words. It runs for every
// statement, so it avoids regular expressions.
func statementLabel(sql string) string {
	s := strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(s, "--"); ok {
		if rest, ok = strings.CutPrefix(strings.TrimSpace(rest), "name:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	if len(s) > 200 {
		s = s[:200]
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 48 {
		s = s[:48] + "…"
	}
	return strings.ToLower(s)
}
