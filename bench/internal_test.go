package bench

import (
	"encoding/json"
	"errors"
	"io/fs"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFormatNumber(t *testing.T) {
	t.Parallel()

	tests := map[float64]string{
		0: "0", 0.0682: "0.068", 1.5: "1.50", 12.345: "12.3", 123.4: "123",
		1234.5: "1,235", 27000: "27,000", 1234567: "1,234,567", -2500: "-2,500",
	}
	for in, want := range tests {
		require.Equal(t, want, formatNumber(in), "formatNumber(%v)", in)
	}
}

func TestStatementLabel(t *testing.T) {
	t.Parallel()

	require.Equal(t, "TaskClaim", statementLabel("-- name: TaskClaim :many\nWITH due AS (SELECT 1)"))
	require.Equal(t, "begin", statementLabel("BEGIN"))
	require.Equal(t, "select pg_notify($1, 'x')", statementLabel("  SELECT pg_notify($1,\n 'x')"))
	long := statementLabel("SELECT a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q FROM t")
	require.Len(t, []rune(long), 49)
}

func TestSQLTracerTake(t *testing.T) {
	t.Parallel()

	tr := newSQLTracer()
	tr.stats["commit"] = &stmtAgg{calls: 4, total: 4 * time.Millisecond}
	tr.stats["TaskClaim"] = &stmtAgg{calls: 1, total: 10 * time.Millisecond}
	got := tr.take(2)
	require.Equal(t, []StatementStat{
		{Statement: "TaskClaim", Calls: 1, PerUnit: 0.5, MeanMs: 10, TotalSeconds: 0.01},
		{Statement: "commit", Calls: 4, PerUnit: 2, MeanMs: 1, TotalSeconds: 0.004},
		{Statement: "(all round trips)", Calls: 5, PerUnit: 2.5, MeanMs: 2.8, TotalSeconds: 0.014},
	}, got)
	require.Empty(t, tr.take(2), "take starts over")
	var none *sqlTracer
	require.Nil(t, none.take(1))
}

func TestParsePgbench(t *testing.T) {
	t.Parallel()

	out := `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: /tmp/step_tx.sql
scaling factor: 1
query mode: prepared
number of clients: 8
number of threads: 2
maximum number of tries: 1
duration: 3 s
number of transactions actually processed: 8487
number of failed transactions: 0 (0.000%)
latency average = 2.807 ms
initial connection time = 35.999 ms
tps = 2850.285935 (without initial connection time)
`
	s, err := parsePgbench(out, nil)
	require.NoError(t, err)
	require.InDelta(t, 2850.285935, s.TPS, 1e-9)
	require.InDelta(t, 2.807, s.LatencyMs, 1e-9)
	require.Zero(t, s.Failed)

	_, err = parsePgbench("pgbench: error: connection refused", errors.New("exit status 1"))
	require.ErrorContains(t, err, "connection refused")
	_, err = parsePgbench(out, errors.New("exit status 2"))
	require.ErrorContains(t, err, "a client aborted")
}

// TestStepResultSize keeps steps10's step results near the 250 bytes that
// StepResult documents.
func TestStepResultSize(t *testing.T) {
	t.Parallel()

	require.InDelta(t, 250, stepResultSize(), 15)
	b, err := json.Marshal(stepResult("s1234", 0))
	require.NoError(t, err)
	require.InDelta(t, 250, len(b), 15, "the ceiling's result payload is as big")
}

// TestPgbenchScriptVariables checks that the scripts use only the variables
// they set and the one the ceiling passes with -D.
func TestPgbenchScriptVariables(t *testing.T) {
	t.Parallel()

	variable := regexp.MustCompile(`(?:^|[^:]):([a-z_]+)`)
	set := regexp.MustCompile(`\\set (\w+)|AS (\w+)`)
	for _, s := range ceilingScripts {
		b, err := fs.ReadFile(pgbenchScripts, "pgbench/"+s.file)
		require.NoError(t, err)
		defined := []string{"result"}
		for _, m := range set.FindAllStringSubmatch(string(b), -1) {
			defined = append(defined, m[1], m[2])
		}
		for _, m := range variable.FindAllStringSubmatch(string(b), -1) {
			require.True(t, slices.Contains(defined, m[1]), "%s uses :%s, which it does not set", s.file, m[1])
		}
	}
}

func TestCeilingValue(t *testing.T) {
	t.Parallel()

	c := &Ceiling{Scripts: []CeilingScript{{Name: CeilingBatch10, TPS: 100, StepsPerSecond: 1000}}, Notify: &Summary{P50: 0.5, P99: 2}}
	v, ok := c.Value(CeilingBatch10)
	require.True(t, ok)
	require.InDelta(t, 1000, v, 0)
	v, ok = c.Value(CeilingNotifyP99)
	require.True(t, ok)
	require.InDelta(t, 2, v, 0)
	_, ok = c.Value(CeilingStepTx)
	require.False(t, ok)
	_, ok = (*Ceiling)(nil).Value(CeilingStepTx)
	require.False(t, ok)
}

func TestAnalyze(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ok := []instanceTimes{
		{status: "complete", created: t0, started: t0.Add(time.Millisecond), completed: t0.Add(3 * time.Millisecond)},
		{status: "complete", created: t0.Add(time.Millisecond), started: t0.Add(2 * time.Millisecond), completed: t0.Add(10 * time.Millisecond)},
	}
	a, err := analyze(ok)
	require.NoError(t, err)
	require.Equal(t, 10*time.Millisecond, a.elapsed)
	require.Equal(t, []time.Duration{3 * time.Millisecond, 9 * time.Millisecond}, a.startToComplete)
	require.Equal(t, []time.Duration{2 * time.Millisecond, 8 * time.Millisecond}, a.runTime)

	_, err = analyze(append(ok, instanceTimes{status: "errored", created: t0}))
	require.ErrorContains(t, err, "1 of 3 instances did not complete")
	_, err = analyze(nil)
	require.ErrorContains(t, err, "no instances")
}

func TestParseProcStatCPU(t *testing.T) {
	t.Parallel()

	total, busy, iowait, steal := parseProcStatCPU("cpu  100 5 50 800 40 3 2 0 0 0")
	require.Equal(t, uint64(1000), total)
	require.Equal(t, uint64(160), busy)
	require.Equal(t, uint64(40), iowait)
	require.Zero(t, steal)
	total, busy, iowait, steal = parseProcStatCPU("cpu  100 5 50 700 40 3 2 100 0 0")
	require.Equal(t, uint64(1000), total)
	require.Equal(t, uint64(160), busy, "stolen time is not this machine's work")
	require.Equal(t, uint64(40), iowait)
	require.Equal(t, uint64(100), steal)
	total, _, _, _ = parseProcStatCPU("cpu0 1 2 3 4 5")
	require.Zero(t, total, "only the machine-wide line")
	total, _, _, _ = parseProcStatCPU("cpu x")
	require.Zero(t, total)
}

func TestParseProcPidStat(t *testing.T) {
	t.Parallel()

	d, ok := parseProcPidStat("4242 (postgres: 15/main: postgres x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 1 0 100 0 0")
	require.True(t, ok)
	require.Equal(t, 3*time.Second, d)
	_, ok = parseProcPidStat("4242 postgres S 1")
	require.False(t, ok)
}

func TestAutovacuumDecide(t *testing.T) {
	t.Parallel()

	server := autovacuumSettings{enabled: true, vacuumThreshold: 50, vacuumScale: 0.2, insertThreshold: 1000, insertScale: 0.2, analyzeThreshold: 50, analyzeScale: 0.1}
	tests := []struct {
		name            string
		options         []string
		stats           tableStats
		vacuum, analyze bool
	}{
		{"never analyzed, a few rows", nil, tableStats{reltuples: -1, modifiedSinceAnalyze: 40}, false, false},
		{"never analyzed, past the analyze threshold", nil, tableStats{reltuples: -1, modifiedSinceAnalyze: 51}, false, true},
		{"dead rows under 50 + 20%", nil, tableStats{reltuples: 1000, dead: 250}, false, false},
		{"dead rows past 50 + 20%", nil, tableStats{reltuples: 1000, dead: 251}, true, false},
		{"inserts past 1000 + 20%", nil, tableStats{reltuples: 1000, insertedSinceVacuum: 1201}, true, false},
		{"the table's own threshold", []string{"autovacuum_vacuum_threshold=500", "autovacuum_vacuum_scale_factor=0", "fillfactor=70"}, tableStats{reltuples: 100000, dead: 501}, true, false},
		{"disabled on the table", []string{"autovacuum_enabled=false"}, tableStats{dead: 1e6, modifiedSinceAnalyze: 1e6}, false, false},
		{"inserts ignored with a threshold of -1", []string{"autovacuum_vacuum_insert_threshold=-1"}, tableStats{insertedSinceVacuum: 1e6}, false, false},
	}
	for _, tt := range tests {
		vacuum, analyze := server.withOptions(tt.options).decide(tt.stats)
		require.Equal(t, tt.vacuum, vacuum, tt.name)
		require.Equal(t, tt.analyze, analyze, tt.name)
	}
}
