package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

func TestBench(t *testing.T) {
	t.Parallel()

	out := filepath.Join(t.TempDir(), "bench.json")
	md := filepath.Join(t.TempDir(), "bench.md")
	r := run(t, nil, "bench", "--db", "sqlite", "--workload", "empty,steps10", "-n", "5",
		"--concurrency", "2", "--batch", "5", "--json", out, "--markdown", md)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "database: sqlite")
	require.Regexp(t, `empty\s+workflows/s`, r.stdout)
	require.Regexp(t, `steps10\s+steps/s`, r.stdout)
	require.Contains(t, r.stderr, "bench: steps10: done in")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep struct {
		Results []struct{ Workload string }
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Results, 2)
	require.Equal(t, "steps10", rep.Results[1].Workload)

	b, err = os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(b), "| steps10 | steps/s |")
}

// TestBenchSQLiteCeiling checks that --ceiling on SQLite measures its
// ceiling and prints the ratios to it, in the table, the JSON and the
// Markdown. It asserts no timing.
func TestBenchSQLiteCeiling(t *testing.T) {
	t.Parallel()

	out := filepath.Join(t.TempDir(), "bench.json")
	md := filepath.Join(t.TempDir(), "bench.md")
	r := run(t, nil, "bench", "--db", "sqlite", "--workload", "steps10", "-n", "5", "--concurrency", "2",
		"--ceiling", "--ceiling-duration", "1s", "--ceiling-clients", "2", "--json", out, "--markdown", md, "-q")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "through database/sql (modernc.org/sqlite), not pgbench")
	require.Regexp(t, `step-tx\s+database/sql \(SQLite\)\s+[0-9,.]+\s`, r.stdout)
	require.Regexp(t, `steps10\s+steps/s\s+.*× step-tx`, r.stdout)
	require.Regexp(t, `steps10\s+steps/s\s+.*× batch10`, r.stdout)

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep struct {
		Ceiling struct {
			Backend string
			Scripts []struct {
				Name           string
				Via            string
				StepsPerSecond float64 `json:"steps_per_s"`
			}
		}
		Results []struct {
			Metrics []struct{ Ratio float64 }
		}
	}
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Equal(t, "sqlite", rep.Ceiling.Backend)
	require.Len(t, rep.Ceiling.Scripts, 3)
	for _, s := range rep.Ceiling.Scripts {
		require.Positive(t, s.StepsPerSecond, s.Name)
		require.Equal(t, "database/sql (SQLite)", s.Via)
	}
	require.Positive(t, rep.Results[0].Metrics[0].Ratio)

	b, err = os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(b), "| step-tx | database/sql (SQLite) |")
	require.Regexp(t, `\| steps10 \| steps/s \| .* \| [0-9.]+× step-tx`, string(b))
}

func TestBenchQuiet(t *testing.T) {
	t.Parallel()

	r := run(t, nil, "bench", "--db", "sqlite", "--workload", "create", "-n", "3", "--quiet")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Regexp(t, `create\s+single creates/s`, r.stdout)
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no database", []string{"bench"}, "database URL is required"},
		{"unknown workload", []string{"bench", "--db", "sqlite", "--workload", "fast"}, `unknown workload "fast"`},
		{"in-memory SQLite", []string{"bench", "--db", "sqlite::memory:"}, "in-memory"},
		{"bad concurrency", []string{"bench", "--db", "sqlite", "--concurrency", "-1"}, "concurrency"},
		{"bad duration", []string{"bench", "--db", "sqlite", "--duration", "soon"}, "--duration"},
		{"arguments", []string{"bench", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, nil, tt.args...)
			require.Equal(t, cli.ExitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, tt.want)
		})
	}
}

func TestBenchExistingFile(t *testing.T) {
	t.Parallel()

	path := filepath.Join(t.TempDir(), "used.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	r := run(t, nil, "bench", "--db", "sqlite:"+path, "--workload", "empty", "-n", "1")
	require.Equal(t, cli.ExitError, r.code)
	require.Contains(t, r.stderr, "exists")
}
