package postgres_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// generatedQuery returns the SQL sqlc generated for the query constant name.
func generatedQuery(t *testing.T, dir, name string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql.go"))
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)const " + name + " = `(.*?)`")
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		if m := re.FindSubmatch(src); m != nil {
			return string(m[1])
		}
	}
	require.FailNow(t, "no generated query "+name)
	return ""
}

// TestPagesAndClaimsUseTheirIndexes pins that history pages, hook claims and
// pruning are index range scans in the order they return, not scans of a
// table that grows forever. Tables of a test are tiny, so sequential scans
// and sorts are switched off to make the planner show which index it would
// use.
func TestPagesAndClaimsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgtest.NewPool(t).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET enable_seqscan = off; SET enable_sort = off")
	require.NoError(t, err)

	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		query string
		args  []any
		// indexes are those the query may use: on empty tables the planner
		// cannot tell apart two that both serve it.
		indexes []string
		sorted  bool // the statement sorts its own few result rows
	}{
		{"stepList", []any{"w", "i", int32(1), int64(0), int32(50)}, []string{"workflow_step_run_id_idx"}, false},
		{"stepList", []any{"w", "i", int32(1), int64(7), nil}, []string{"workflow_step_run_id_idx"}, false},
		{"eventList", []any{"w", "i", int64(0), int32(50)}, []string{"workflow_event_instance_id_idx"}, false},
		{"eventListRun", []any{"w", "i", int32(1), int64(0), int32(50)}, []string{"workflow_event_instance_idx", "workflow_event_instance_id_idx"}, false},
		{"outboxClaim", []any{now, int32(50), now.Add(time.Minute)}, []string{"workflow_hook_outbox_claim_idx"}, true},
		{"outboxPrune", []any{now, int32(1000)}, []string{"workflow_hook_outbox_delivered_idx"}, false},
	} {
		sql := generatedQuery(t, filepath.Join("internal", "pgsqlc"), tc.query)
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, tc.args...)
		require.NoError(t, err, tc.query)
		var lines []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			lines = append(lines, line)
		}
		require.NoError(t, rows.Err())
		plan := strings.Join(lines, "\n")
		require.True(t, slices.ContainsFunc(tc.indexes, func(index string) bool {
			return strings.Contains(plan, " using "+index+" on ")
		}), "%s uses none of %v:\n%s", tc.query, tc.indexes, plan)
		require.NotContains(t, plan, "Seq Scan", "%s:\n%s", tc.query, plan)
		if !tc.sorted {
			require.NotContains(t, plan, "Sort", "%s:\n%s", tc.query, plan)
		}
	}
}
