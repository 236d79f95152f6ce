package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/sqlite"
)

// TestSQLiteCeiling runs the SQLite ceiling for a moment on a fresh store
// file: every shape commits, the connection runs with the store's pragmas,
// a report carries ratios to it, and the sibling file is gone afterwards.
// It asserts no timing.
func TestSQLiteCeiling(t *testing.T) {
	t.Parallel()

	ctx := t.Context()
	file := filepath.Join(t.TempDir(), "bench.db")
	s, err := sqlite.Open(ctx, file)
	require.NoError(t, err)
	require.NoError(t, sqlite.Migrate(ctx, s))
	require.NoError(t, s.Close())

	cfg := (&Config{DatabaseURL: "sqlite", CeilingDuration: 100 * time.Millisecond, CeilingClients: 3}).WithDefaults()
	c := &Ceiling{Backend: "sqlite", Clients: cfg.CeilingClients, DurationSeconds: cfg.CeilingDuration.Seconds()}
	require.NoError(t, runSQLiteCeiling(ctx, cfg, file, c))

	require.Contains(t, c.Tool, "database/sql")
	require.Equal(t, "wal", c.Settings["journal_mode"])
	require.Equal(t, "NORMAL (1)", c.Settings["synchronous"])
	require.Equal(t, "10000", c.Settings["busy_timeout"])
	require.Equal(t, "1", c.Settings["foreign_keys"])
	require.Len(t, c.Scripts, len(ceilingScripts))
	for i, sc := range c.Scripts {
		require.Equal(t, ceilingScripts[i].name, sc.Name)
		require.Positive(t, sc.TPS, sc.Name)
		require.Positive(t, sc.StepsPerSecond, sc.Name)
		require.Positive(t, sc.LatencyMs, sc.Name)
		require.InDelta(t, sc.TPS*float64(ceilingScripts[i].steps), sc.StepsPerSecond, 1e-6, sc.Name)
		require.Contains(t, sc.SQL, "ceiling_step", sc.Name)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_, err := os.Stat(sqliteCeilingPath(file) + suffix)
		require.ErrorIs(t, err, os.ErrNotExist, "the ceiling's file%s is removed", suffix)
	}

	rep := &Report{Ceiling: c, Results: []*Result{{
		Workload: WorkloadSteps10,
		Metrics: []Metric{
			{Name: "steps/s", Value: 100, Unit: "steps/s", Ceiling: CeilingStepTx},
			{Name: "steps/s", Value: 100, Unit: "steps/s", Ceiling: CeilingBatch10},
			{Name: "single creates/s", Value: 100, Unit: "creates/s", Ceiling: CeilingCheckpoint},
		},
	}}}
	rep.applyCeiling()
	for _, m := range rep.Results[0].Metrics {
		require.Positive(t, m.CeilingValue, m.Ceiling)
		require.Positive(t, m.Ratio, m.Ceiling)
	}
}

// TestSQLiteCeilingScripts checks that every shape parses and uses only the
// parameters the ceiling binds or an earlier RETURNING sets, and that the
// schema copy finds the engine's tables.
func TestSQLiteCeilingScripts(t *testing.T) {
	t.Parallel()

	for _, s := range ceilingScripts {
		file := sqliteCeilingFiles[s.name]
		require.NotEmpty(t, file, s.name)
		text, err := sqliteCeilingScripts.ReadFile("sqliteceiling/" + file)
		require.NoError(t, err)
		stmts, err := parseSQLiteScript(string(text))
		require.NoError(t, err, file)
		set := []string{"now", "key", "iid", "result"}
		for _, st := range stmts {
			for _, p := range st.params {
				require.True(t, slices.Contains(set, p), "%s uses :%s, which it does not set", file, p)
			}
			if st.returns {
				set = append(set, "tid", "iid")
			}
		}
	}
	_, err := parseSQLiteScript("SELECT 1")
	require.ErrorContains(t, err, "does not end")

	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "bench.db")
	s, err := sqlite.Open(ctx, file)
	require.NoError(t, err)
	require.NoError(t, sqlite.Migrate(ctx, s))
	require.NoError(t, s.Close())
	schema, err := engineSchema(ctx, file)
	require.NoError(t, err)
	joined := ""
	for _, st := range schema {
		joined += st + "\n"
	}
	require.Contains(t, joined, "CREATE TABLE ceiling_instance")
	require.Contains(t, joined, "CREATE TABLE ceiling_step")
	require.Contains(t, joined, "CREATE TABLE ceiling_task")
	require.Contains(t, joined, "ceiling_task_pending_idx")
	require.Contains(t, joined, "REFERENCES ceiling_instance")
	require.NotRegexp(t, `workflow_(instance|step|task)`, joined)
	require.Contains(t, joined, "metadata TEXT", "columns added by later migrations are copied")
}
