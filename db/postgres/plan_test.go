package postgres_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres"
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

// explainLines runs EXPLAIN options of sql on conn and returns the plan.
func explainLines(t *testing.T, conn *pgxpool.Conn, options, sql string, args ...any) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), "EXPLAIN ("+options+") "+sql, args...)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	return strings.Join(lines, "\n")
}

// requireClaimPlan fails unless plan claims by ordered plain index scans:
// each branch walks its partial index and stops at its LIMIT without sorting
// the due tasks (the only sorts are of the few claimed rows: the union and
// the result), and nothing scans the task table by bitmap or sequentially (a
// bitmap scan never marks dead index entries, so every claim would revisit
// every dead task until vacuum). With populated tables the instances must be
// found by primary key too; on empty ones every index of workflow_instance
// costs the same.
func requireClaimPlan(t *testing.T, plan, what string, populated bool) {
	t.Helper()
	want := []string{
		"Index Scan using workflow_task_pending_idx on workflow_task",
		"Index Scan using workflow_task_processing_idx on workflow_task",
		"Limit",
		"LockRows",
	}
	if populated {
		want = append(want, "Index Scan using workflow_instance_pkey on workflow_instance")
	}
	for _, w := range want {
		require.Contains(t, plan, w, "%s:\n%s", what, plan)
	}
	for _, bad := range []string{"Bitmap", "Seq Scan"} {
		require.NotContains(t, plan, bad, "%s:\n%s", what, plan)
	}
	require.Equal(t, 2, strings.Count(plan, "Sort Key:"), "%s:\n%s", what, plan)
	if populated {
		require.NotContains(t, plan, "workflow_instance_name_", "%s:\n%s", what, plan)
	}
}

// TestClaimPlanIsOrderedIndexScans pins the plan of TaskClaim as the store
// runs it (a prepared statement behind ClaimPlanSettings, which plans it
// afresh at every execution) on fresh tables that were never analyzed, and
// on a table holding thousands of dead tasks next to due ones, analyzed or
// not. It also pins the task scans of the generic plan, should Postgres
// ever use one. Each EXPLAIN ANALYZE runs in a transaction that is rolled
// back.
func TestClaimPlanIsOrderedIndexScans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgtest.NewPool(t, pgtest.WithMaxConns(2)).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	claim := generatedQuery(t, filepath.Join("internal", "pgsqlc"), "taskClaim")
	_, err = conn.Exec(ctx, "PREPARE claim AS "+claim)
	require.NoError(t, err)
	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	explain := func(what string, populated bool) {
		t.Helper()
		for _, generic := range []bool{false, true} {
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			for _, sql := range postgres.ClaimPlanSettings {
				_, err := tx.Exec(ctx, sql)
				require.NoError(t, err)
			}
			if generic {
				_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
				require.NoError(t, err)
			}
			plan := explainLines(t, conn, "ANALYZE, BUFFERS, COSTS OFF, TIMING OFF",
				fmt.Sprintf("EXECUTE claim ('%s', '{w,other}', 16, 'me', '%s')",
					now.Format(time.RFC3339), now.Add(time.Minute).Format(time.RFC3339)))
			// A disabled plan node that cannot be avoided would add its
			// disabling cost to the plan, which would then cross
			// jit_above_cost (100000 by default) and be JIT-compiled.
			costed := explainLines(t, conn, "FORMAT JSON",
				fmt.Sprintf("EXECUTE claim ('%s', '{w,other}', 16, 'me', '%s')",
					now.Format(time.RFC3339), now.Add(time.Minute).Format(time.RFC3339)))
			require.NoError(t, tx.Rollback(ctx))
			var top []struct {
				Plan struct {
					TotalCost float64 `json:"Total Cost"`
				} `json:"Plan"`
			}
			require.NoError(t, json.Unmarshal([]byte(costed), &top))
			require.Len(t, top, 1)
			require.Less(t, top[0].Plan.TotalCost, 100000.0, "%s: the claim costs like a disabled plan:\n%s", what, costed)
			require.NotContains(t, plan, "JIT", "%s:\n%s", what, plan)
			requireClaimPlan(t, plan, fmt.Sprintf("%s (generic plan: %v)", what, generic), populated && !generic)
		}
	}
	explain("fresh tables", false)

	// Thousands of tasks come and go (dead rows and dead index entries, with
	// no vacuum), and some stay due: pending ones of several ages and
	// processing ones whose leases expired or not.
	for _, sql := range []string{
		`INSERT INTO workflow_instance (workflow_name, instance_id, status, params, run_number, created_at, updated_at)
		SELECT 'w', 'i' || g, 'queued', '{}', 1, $1, $1 FROM generate_series(1, 6000) g`,
		`INSERT INTO workflow_task (workflow_name, instance_id, run_number, kind, priority, run_at, status, version)
		SELECT 'w', 'i' || g, 1, 'run', 1, $1::timestamptz - g * interval '1 second', 'pending', 0
		FROM generate_series(1, 6000) g`,
		`UPDATE workflow_task SET status = 'processing', locked_until = $1::timestamptz + (id % 3 - 1) * interval '1 minute'
		WHERE id % 2 = 0`,
		`DELETE FROM workflow_task WHERE id % 10 < 8 AND $1::timestamptz IS NOT NULL`,
	} {
		_, err = conn.Exec(ctx, sql, now)
		require.NoError(t, err)
	}
	explain("dead tasks, never analyzed", true)
	_, err = conn.Exec(ctx, "ANALYZE workflow_task; ANALYZE workflow_instance")
	require.NoError(t, err)
	explain("dead tasks, analyzed", true)
}

// TestClaimPlanSettingsStayInTheirBatch pins what the claim relies on: in a
// pgx batch (one implicit transaction), settings made local by
// ClaimPlanSettings hold for the statements after them, and are gone once
// the batch ends, for the next statement on the same connection.
func TestClaimPlanSettingsStayInTheirBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgtest.NewPool(t, pgtest.WithMaxConns(1)).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	b := &pgx.Batch{}
	for _, sql := range postgres.ClaimPlanSettings {
		b.Queue(sql)
	}
	var inBatch [2]string
	b.Queue("SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan')").
		QueryRow(func(row pgx.Row) error { return row.Scan(&inBatch[0], &inBatch[1]) })
	require.NoError(t, conn.SendBatch(ctx, b).Close())
	require.Equal(t, [2]string{"off", "off"}, inBatch)

	var after [2]string
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT current_setting('enable_seqscan'), current_setting('enable_bitmapscan')").Scan(&after[0], &after[1]))
	require.Equal(t, [2]string{"on", "on"}, after)
}
