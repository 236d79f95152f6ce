package bench_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/bench"
)

// sampleReport is a report as a run on Postgres with a ceiling makes it.
func sampleReport() *bench.Report {
	return &bench.Report{
		Started:  time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Finished: time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC),
		Build:    bench.Build{Commit: "0123456789abcdef0123", Modified: true, GoVersion: "go1.26.8"},
		Machine:  bench.Machine{OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2},
		Database: bench.Database{
			Backend: "postgres", Version: "PostgreSQL 15.20", Where: "schema duraflow_bench_x",
			Settings: map[string]string{"synchronous_commit": "on", "shared_buffers": "128MB"},
		},
		Settings: bench.Settings{Workloads: []string{"steps10", "wake", "soak"}, Concurrency: 16, Runners: 1, Batch: 100, InFlight: 200, PollIntervalMs: 1000},
		Ceiling: &bench.Ceiling{
			Backend: "postgres", Tool: "pgbench (PostgreSQL) 15.20", Clients: 8, DurationSeconds: 5,
			Scripts: []bench.CeilingScript{
				{Name: bench.CeilingStepTx, Description: "one transaction per step", Via: "pgbench", TPS: 3000, StepsPerTx: 1, StepsPerSecond: 3000, LatencyMs: 2.6},
				{Name: bench.CeilingBatch10, Description: "10 rows per commit", Via: "pgbench", TPS: 2500, StepsPerTx: 10, StepsPerSecond: 25000, LatencyMs: 3.1},
			},
			Notify: &bench.Summary{Count: 200, P50: 0.5, P99: 1},
		},
		Results: []*bench.Result{
			{
				Workload: "steps10", N: 100, ElapsedSeconds: 1,
				Metrics: []bench.Metric{
					{Name: "steps/s", Value: 1500, Unit: "steps/s", Ceiling: bench.CeilingStepTx},
					{Name: "steps/s", Value: 1500, Unit: "steps/s", Ceiling: bench.CeilingBatch10},
					{Name: "steps/s", Value: 1500, Unit: "steps/s", Ceiling: bench.CeilingCheckpoint},
					{Name: "step time p50", Value: 0.25, Unit: "ms"},
				},
				SQL:   []bench.StatementStat{{Statement: "Checkpoint", Calls: 1000, PerUnit: 1, MeanMs: 0.5, TotalSeconds: 0.5}},
				Notes: []string{"a note"},
			},
			{
				Workload: "wake", N: 10,
				Metrics: []bench.Metric{{Name: "idle send→resumed p50", Value: 2, Unit: "ms", Ceiling: bench.CeilingNotifyP50}},
			},
			{
				Workload: "soak", N: 10,
				Metrics: []bench.Metric{{Name: "last ÷ first interval", Value: 0.95, Unit: "×"}},
				Intervals: []bench.Interval{
					{StartSeconds: 0, Workflows: 100, StepsPerSecond: 1000, Queue: &bench.QueueStats{LiveRows: 10, DeadRows: 5, Bytes: 81920}},
					{StartSeconds: 60, Workflows: 95, StepsPerSecond: 950},
				},
			},
		},
	}
}

func TestReportWriteTable(t *testing.T) {
	t.Parallel()

	rep := sampleReport()
	bench.ApplyCeiling(rep)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteTable(&buf))
	out := buf.String()

	require.Contains(t, out, "0123456789ab (modified)")
	require.Contains(t, out, "2 CPUs")
	require.Contains(t, out, "shared_buffers=128MB synchronous_commit=on")
	require.Contains(t, out, "ceiling: pgbench (PostgreSQL) 15.20, 8 clients, 5s per script")
	require.Regexp(t, `CEILING\s+MEASURED WITH\s+STEPS/S`, out)
	require.Regexp(t, `step-tx\s+pgbench\s+3,000\s+3,000\s+2.60 ms\s+one transaction per step`, out)
	require.Regexp(t, `notify\s+pgx\s+p50 0.50 ms, p99 1.00 ms`, out)
	require.Regexp(t, `steps10\s+steps/s\s+1,500 steps/s\s+0.50× step-tx \(3,000\)`, out)
	require.Regexp(t, `steps10\s+steps/s\s+1,500 steps/s\s+0.06× batch10 \(25,000\)`, out)
	require.Equal(t, 2, bytes.Count(buf.Bytes(), []byte("1,500 steps/s")),
		"the row against a ceiling the run did not measure is left out")
	require.Regexp(t, `steps10\s+step time p50\s+0.250 ms`, out)
	require.Regexp(t, `wake\s+idle send→resumed p50\s+2.00 ms\s+4.00× notify-p50 \(0.500\)`, out)
	require.Regexp(t, `1m0s\s+95\s+950`, out)
	require.Contains(t, out, "80 KiB")
	require.Regexp(t, `Checkpoint\s+1000\s+1.00\s+0.500\s+0.50`, out)
	require.Contains(t, out, "note: steps10: a note")
}

func TestReportWriteTableWithoutCeiling(t *testing.T) {
	t.Parallel()

	rep := sampleReport()
	rep.Ceiling = nil
	bench.ApplyCeiling(rep)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteTable(&buf))
	require.NotContains(t, buf.String(), "ceiling:")
	require.NotContains(t, buf.String(), "×  step-tx")
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte("1,500 steps/s")), "one row per figure")
}

func TestReportWriteTableSkippedCeiling(t *testing.T) {
	t.Parallel()

	rep := sampleReport()
	rep.Ceiling = &bench.Ceiling{Clients: 8, DurationSeconds: 5, Skipped: "pgbench (pgbench) is not on PATH"}
	var buf bytes.Buffer
	require.NoError(t, rep.WriteTable(&buf))
	require.Contains(t, buf.String(), "ceiling skipped: pgbench (pgbench) is not on PATH")
}

// TestReportSQLiteCeiling checks that an SQLite ceiling says what measured
// it, in the table and in Markdown.
func TestReportSQLiteCeiling(t *testing.T) {
	t.Parallel()

	rep := sampleReport()
	rep.Database.Backend = "sqlite"
	rep.Ceiling = &bench.Ceiling{
		Backend: "sqlite", Tool: "SQLite 3.50.0 through database/sql (modernc.org/sqlite), not pgbench", Clients: 8, DurationSeconds: 5,
		Settings: map[string]string{"journal_mode": "wal", "synchronous": "NORMAL (1)"},
		Scripts: []bench.CeilingScript{
			{Name: bench.CeilingStepTx, Description: "one transaction per step", Via: "database/sql (SQLite)", TPS: 3000, StepsPerTx: 1, StepsPerSecond: 3000, LatencyMs: 2.6},
			{Name: bench.CeilingBatch10, Description: "10 rows per commit", Via: "database/sql (SQLite)", TPS: 2500, StepsPerTx: 10, StepsPerSecond: 25000, LatencyMs: 3.1},
		},
	}
	bench.ApplyCeiling(rep)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteTable(&buf))
	out := buf.String()
	require.Contains(t, out, "ceiling: SQLite 3.50.0 through database/sql (modernc.org/sqlite), not pgbench, 8 client goroutines sharing one write connection")
	require.Contains(t, out, "ceiling connection: journal_mode=wal, synchronous=NORMAL (1)")
	require.Regexp(t, `step-tx\s+database/sql \(SQLite\)\s+3,000\s+3,000\s+2.60 ms`, out)
	require.Regexp(t, `steps10\s+steps/s\s+1,500 steps/s\s+0.50× step-tx \(3,000\)`, out)
	require.NotContains(t, out, "notify")

	buf.Reset()
	require.NoError(t, rep.WriteMarkdown(&buf))
	require.Contains(t, buf.String(), "| step-tx | database/sql (SQLite) | 3,000 | 3,000 | 2.60 ms | one transaction per step |")
	require.Contains(t, buf.String(), "Ceiling connection: `journal_mode=wal, synchronous=NORMAL (1)`")
}

func TestReportJSON(t *testing.T) {
	t.Parallel()

	rep := sampleReport()
	bench.ApplyCeiling(rep)
	path := filepath.Join(t.TempDir(), "out.json")
	require.NoError(t, rep.WriteJSONFile(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)

	var back bench.Report
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, rep, &back, "the JSON report reads back whole")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	results := raw["results"].([]any)
	m := results[0].(map[string]any)["metrics"].([]any)[0].(map[string]any)
	require.Equal(t, "step-tx", m["ceiling"])
	require.InDelta(t, 0.5, m["ratio"], 1e-9)
	require.Equal(t, "on", raw["database"].(map[string]any)["settings"].(map[string]any)["synchronous_commit"])
	require.InDelta(t, 0.5, raw["ceiling"].(map[string]any)["notify"].(map[string]any)["p50_ms"], 1e-9)
}

func TestReportWriteMarkdown(t *testing.T) {
	t.Parallel()

	rep := sampleReport()
	bench.ApplyCeiling(rep)
	var buf bytes.Buffer
	require.NoError(t, rep.WriteMarkdown(&buf))
	out := buf.String()
	require.Contains(t, out, "commit `0123456789abcdef0123 (with uncommitted changes)`")
	require.Contains(t, out, "`synchronous_commit=on`")
	require.Contains(t, out, "| step-tx | pgbench | 3,000 | 3,000 | 2.60 ms | one transaction per step |")
	require.Contains(t, out, "| steps10 | steps/s | 1,500 steps/s | 0.50× step-tx (3,000) |")
	require.Contains(t, out, "| wake | idle send→resumed p50 | 2.00 ms | 4.00× notify-p50 (0.500) |")
	require.Contains(t, out, "| 1m0s | 95 | 950 | - | - | - |")
	require.Contains(t, out, "| Checkpoint | 1000 | 1.00 | 0.500 | 0.50 |")
}
