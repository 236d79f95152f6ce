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
		{"stepList", []any{"w", "i", int32(1), int64(0), nil, int32(50)}, []string{"workflow_step_run_id_idx"}, false},
		{"stepList", []any{"w", "i", int32(1), int64(7), []string{"waiting"}, nil}, []string{"workflow_step_run_id_idx"}, false},
		{"stepListBounded", []any{int64(1 << 22), "w", "i", int32(1), int64(0), nil, int32(50)}, []string{"workflow_step_run_id_idx"}, false},
		{"eventListBounded", []any{int64(1 << 22), "w", "i", int32(1), int64(0), int32(50)}, []string{"workflow_event_instance_idx", "workflow_event_instance_id_idx"}, false},
		// The bounded instance list reads its page in index order, then
		// sorts the page's own rows again (an incremental sort).
		{"instanceListBounded", []any{false, int64(1 << 22), "w", nil, nil, nil, nil, nil, nil, int32(51)}, []string{"workflow_instance_name_updated_idx", "workflow_instance_name_status_updated_idx", "workflow_instance_updated_idx"}, true},
		{"instanceListBounded", []any{true, int64(1 << 22), nil, []string{"queued"}, "default", nil, now, "w", "i", int32(51)}, []string{"workflow_instance_updated_idx"}, true},
		{"eventList", []any{"w", "i", int64(0), int32(50)}, []string{"workflow_event_instance_id_idx"}, false},
		{"eventListRun", []any{"w", "i", int32(1), int64(0), int32(50)}, []string{"workflow_event_instance_idx", "workflow_event_instance_id_idx"}, false},
		{"outboxClaim", []any{now, int32(50), now.Add(time.Minute)}, []string{"workflow_hook_outbox_claim_idx"}, true},
		{"outboxPrune", []any{now, int32(1000)}, []string{"workflow_hook_outbox_delivered_idx"}, false},
		{"lifecycleListInstance", []any{"i", int64(0), "w", "", []string{}, true, nil, nil, int32(50)}, []string{"lifecycle_event_instance_idx"}, false},
		{"lifecycleListInstance", []any{"i", int64(7), "w", "", []string{"step.started"}, true, now, nil, int32(50)}, []string{"lifecycle_event_instance_idx"}, false},
		{"lifecycleListInstanceNewest", []any{"i", int64(1 << 62), int64(0), "w", "", []string{}, true, nil, nil, int32(50)}, []string{"lifecycle_event_instance_idx"}, false},
		{"lifecyclePrune", []any{int32(4000), now, int32(1000)}, []string{"lifecycle_event_pkey"}, false},
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
// the result), nothing scans the task table by bitmap or sequentially (a
// bitmap scan never marks dead index entries, so every claim would revisit
// every dead task until vacuum), and the instances are found by primary key.
func requireClaimPlan(t *testing.T, plan, what string) {
	t.Helper()
	for _, w := range []string{
		"Index Scan using workflow_task_pending_idx on workflow_task",
		"Index Scan using workflow_task_processing_idx on workflow_task",
		"Index Scan using workflow_instance_pkey on workflow_instance",
		"Limit",
		"LockRows",
	} {
		require.Contains(t, plan, w, "%s:\n%s", what, plan)
	}
	for _, bad := range []string{"Bitmap", "Seq Scan", "workflow_instance_name_", "workflow_instance_updated_idx"} {
		require.NotContains(t, plan, bad, "%s:\n%s", what, plan)
	}
	require.Equal(t, 2, strings.Count(plan, "Sort Key:"), "%s:\n%s", what, plan)
}

// TestClaimPlanIsOrderedIndexScans pins the plan of TaskClaim as the store
// runs it (a prepared statement behind PlanSettings) on fresh tables
// that were never analyzed, and on a table holding thousands of dead tasks
// next to due ones, analyzed or not: both the custom plans of its first
// executions and the generic plan Postgres caches after them, which may
// have been made while the tables were empty. Each EXPLAIN ANALYZE runs in
// a transaction that is rolled back.
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
	explain := func(what string) {
		t.Helper()
		for _, generic := range []bool{false, true} {
			tx, err := conn.Begin(ctx)
			require.NoError(t, err)
			for _, sql := range postgres.PlanSettings {
				_, err := tx.Exec(ctx, sql)
				require.NoError(t, err)
			}
			if generic {
				_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
				require.NoError(t, err)
			}
			plan := explainLines(t, conn, "ANALYZE, BUFFERS, COSTS OFF, TIMING OFF",
				fmt.Sprintf("EXECUTE claim ('%s', '{w,other}', '{default,q2}', false, 16, 'me', '%s', true)",
					now.Format(time.RFC3339), now.Add(time.Minute).Format(time.RFC3339)))
			// A disabled plan node that cannot be avoided would add its
			// disabling cost to the plan, which would then cross
			// jit_above_cost (100000 by default) and be JIT-compiled.
			costed := explainLines(t, conn, "FORMAT JSON",
				fmt.Sprintf("EXECUTE claim ('%s', '{w,other}', '{default,q2}', false, 16, 'me', '%s', true)",
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
			requireClaimPlan(t, plan, fmt.Sprintf("%s (generic plan: %v)", what, generic))
		}
	}
	explain("fresh tables")

	// Thousands of tasks come and go (dead rows and dead index entries, with
	// no vacuum), and some stay due: pending ones of several ages and
	// processing ones whose leases expired or not.
	for _, sql := range []string{
		`INSERT INTO workflow_instance (workflow_name, instance_id, status, params, run_number, created_at, updated_at)
		SELECT 'w', 'i' || g, 'queued', '{}', 1, $1, $1 FROM generate_series(1, 6000) g`,
		// Priorities and queues of several values: the claim orders by
		// priority and filters by queue on the same index walk.
		`INSERT INTO workflow_task (workflow_name, instance_id, run_number, kind, priority, run_at, status, version,
			queue, instance_priority)
		SELECT 'w', 'i' || g, 1, 'run', 1, $1::timestamptz - g * interval '1 second', 'pending', 0,
			(ARRAY['default', 'q2', 'q3'])[g % 3 + 1], (g % 7 - 3) * 100
		FROM generate_series(1, 6000) g`,
		`UPDATE workflow_task SET status = 'processing', locked_until = $1::timestamptz + (id % 3 - 1) * interval '1 minute'
		WHERE id % 2 = 0`,
		`DELETE FROM workflow_task WHERE id % 10 < 8 AND $1::timestamptz IS NOT NULL`,
	} {
		_, err = conn.Exec(ctx, sql, now)
		require.NoError(t, err)
	}
	explain("dead tasks, never analyzed")
	_, err = conn.Exec(ctx, "ANALYZE workflow_task; ANALYZE workflow_instance")
	require.NoError(t, err)
	explain("dead tasks, analyzed")
}

// TestPlanSettingsStayInTheirBatch pins what the claim relies on: in a
// pgx batch (one implicit transaction), settings made local by
// PlanSettings hold for the statements after them, and are gone once
// the batch ends, for the next statement on the same connection.
func TestPlanSettingsStayInTheirBatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgtest.NewPool(t, pgtest.WithMaxConns(1)).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	b := &pgx.Batch{}
	for _, sql := range postgres.PlanSettings {
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

// TestInstanceLookupsUseThePrimaryKeyWithoutStatistics pins that a lookup of
// one instance by (workflow_name, instance_id) can only be served by the
// primary key, even by a plan made while the tables were empty and never
// analyzed: the generic plan a prepared statement caches after five runs,
// and the plan of the foreign-key check that every step, task and event
// insert runs against workflow_instance. The list indexes also begin with
// or hold workflow_name; were they usable, such a plan could walk all of a
// workflow's entries for each lookup until statistics changed. The lists
// themselves must still use them.
func TestInstanceLookupsUseThePrimaryKeyWithoutStatistics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgtest.NewPool(t, pgtest.WithMaxConns(1)).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)

	dir := filepath.Join("internal", "pgsqlc")
	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	lookups := []struct {
		name string
		sql  string
		args string
	}{
		{"instanceGet", generatedQuery(t, dir, "instanceGet"), "('w', 'i', '')"},
		{"instanceGetForUpdate", generatedQuery(t, dir, "instanceGetForUpdate"), "('w', 'i', 'ns')"},
		{"stepListCurrentRun", generatedQuery(t, dir, "stepListCurrentRun"), "('w', 'i')"},
		{"checkpointFence", generatedQuery(t, dir, "checkpointFence"), "(1, 1, 'w', 'i', 1)"},
		{"taskClaim", generatedQuery(t, dir, "taskClaim"),
			fmt.Sprintf("('%s', '{w}', '{default}', false, 16, 'me', '%s', true)", now.Format(time.RFC3339), now.Add(time.Minute).Format(time.RFC3339))},
		// The statement a foreign-key check of workflow_instance runs.
		{"foreignKeyCheck", `SELECT 1 FROM ONLY workflow_instance x WHERE workflow_name = $1 AND instance_id = $2 FOR KEY SHARE OF x`, "('w', 'i')"},
	}
	for i, l := range lookups {
		_, err := conn.Exec(ctx, fmt.Sprintf("PREPARE lookup%d AS %s", i, l.sql))
		require.NoError(t, err, l.name)
		plan := explainLines(t, conn, "COSTS OFF", fmt.Sprintf("EXECUTE lookup%d %s", i, l.args))
		require.Contains(t, plan, "using workflow_instance_pkey on workflow_instance", "%s:\n%s", l.name, plan)
		for _, list := range []string{"workflow_instance_name_status_updated_idx", "workflow_instance_name_updated_idx", "workflow_instance_updated_idx"} {
			require.NotContains(t, plan, list, "%s:\n%s", l.name, plan)
		}
	}

	// On empty tables the planner cannot tell the list indexes apart; that
	// a list can use one of them, rather than the primary key and a sort,
	// is what the partial predicate must not lose.
	_, err = conn.Exec(ctx, "SET plan_cache_mode = auto; SET enable_seqscan = off; SET enable_sort = off")
	require.NoError(t, err)
	list := generatedQuery(t, dir, "instanceList")
	cursor := now.Format(time.RFC3339)
	for _, args := range [][]any{
		{"w", []string{"running"}, nil, nil, nil, nil, nil, int32(50)},
		{"w", nil, "ns", nil, cursor, "w", "i", int32(50)},
		{nil, nil, nil, "q", nil, nil, nil, int32(50)},
	} {
		plan := explainLines(t, conn, "COSTS OFF", list, args...)
		require.True(t, slices.ContainsFunc([]string{
			"workflow_instance_name_status_updated_idx", "workflow_instance_name_updated_idx", "workflow_instance_updated_idx",
		}, func(index string) bool {
			return strings.Contains(plan, " using "+index+" on ")
		}), "%v uses no list index:\n%s", args, plan)
		require.NotContains(t, plan, "workflow_instance_pkey", "%v:\n%s", args, plan)
	}
}

// TestCheckpointBatchPlanIsPrimaryKeyLookups pins the plan of the group
// commit as the store runs it (a prepared statement behind PlanSettings):
// every instance and task of the batch is found by primary key, in a loop,
// never by scanning either table and joining by hash, whether it is locked,
// deleted or updated. The generic plan is
// made first on a small analyzed table, where a scan would be cheapest, and
// must stay a loop of lookups once the table has grown.
func TestCheckpointBatchPlanIsPrimaryKeyLookups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := pgtest.NewPool(t, pgtest.WithMaxConns(1)).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	populate := func(from, to int) {
		t.Helper()
		for _, sql := range []string{
			`INSERT INTO workflow_instance (workflow_name, instance_id, status, params, run_number, created_at, updated_at)
			SELECT 'w', 'i' || g, 'running', '{}', 1, $1, $1 FROM generate_series($2::int, $3::int) g`,
			`INSERT INTO workflow_task (workflow_name, instance_id, run_number, kind, priority, run_at, status, locked_until, version)
			SELECT 'w', 'i' || g, 1, 'run', 1, $1, 'processing', $1, 1 FROM generate_series($2::int, $3::int) g`,
		} {
			_, err := conn.Exec(ctx, sql, now, from, to)
			require.NoError(t, err)
		}
	}
	populate(1, 20)
	_, err = conn.Exec(ctx, "ANALYZE workflow_instance; ANALYZE workflow_task")
	require.NoError(t, err)

	batch := generatedQuery(t, filepath.Join("internal", "pgsqlc"), "checkpointBatch")
	_, err = conn.Exec(ctx, "PREPARE batch AS "+batch)
	require.NoError(t, err)
	// i3 continues, i7 completes: the batch writes steps, deletes a task
	// and ends an instance.
	args := fmt.Sprintf(`('{w,w}', '{i3,i7}', '{1,1}', '{3,7}', '{1,1}',
		'{continue,complete}', '{"","{}"}', '{"",""}', '{"",""}', '%s',
		'{w,w}', '{i3,i7}', '{1,1}', '{s1,s1}', '{do,do}', '{complete,complete}', '{1,1}', '{3,3}', '{0,0}',
		'{0001-01-01 00:00:00+00,0001-01-01 00:00:00+00}', '{0001-01-01 00:00:00+00,0001-01-01 00:00:00+00}',
		'{"",""}', '{1,2}', '{"",""}', '{"",""}',
		'{0001-01-01 00:00:00+00,0001-01-01 00:00:00+00}',
		'{step.completed,instance.completed}', '{w,w}', '{i3,i7}', '{1,1}', '{s1,""}', '{1,0}', '{"",""}',
		'{0001-01-01 00:00:00+00,0001-01-01 00:00:00+00}', '{0001-01-01 00:00:00+00,0001-01-01 00:00:00+00}')`, now.Format(time.RFC3339))
	explain := func(what, mode string) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback(ctx)) }()
		for _, sql := range postgres.PlanSettings {
			_, err := tx.Exec(ctx, sql)
			require.NoError(t, err)
		}
		_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode)
		require.NoError(t, err)
		plan := explainLines(t, conn, "ANALYZE, COSTS OFF, TIMING OFF", "EXECUTE batch "+args)
		for _, w := range []string{
			"Index Scan using workflow_instance_pkey on workflow_instance",
			"Index Scan using workflow_task_pkey on workflow_task",
			"Insert on workflow_step (actual rows=2 loops=1)",
			"Delete on workflow_task t_2 (actual rows=1 loops=1)",
			"Update on workflow_instance i_2 (actual rows=1 loops=1)",
			"Insert on lifecycle_event (actual rows=2 loops=1)",
		} {
			require.Contains(t, plan, w, "%s (%s):\n%s", what, mode, plan)
		}
		// Every table is reached by primary key, in a loop.
		for _, bad := range []string{"Seq Scan", "Bitmap", "Hash Join", "Merge Join"} {
			require.NotContains(t, plan, bad, "%s (%s):\n%s", what, mode, plan)
		}
	}
	explain("small analyzed tables", "force_custom_plan")
	explain("small analyzed tables", "force_generic_plan")
	populate(21, 6000)
	explain("grown tables, plan cached while small", "force_generic_plan")
}
