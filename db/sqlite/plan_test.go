package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// generatedQuery returns the SQL sqlc generated for the query constant name.
func generatedQuery(t *testing.T, name string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("internal", "litesqlc", "*.sql.go"))
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

// queryPlan returns the EXPLAIN QUERY PLAN of the generated query name
// with args, a line per step.
func queryPlan(t *testing.T, s *Store, name string, args ...any) string {
	t.Helper()
	rows, err := s.write.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+generatedQuery(t, name), args...)
	require.NoError(t, err, name)
	var lines []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
		lines = append(lines, detail)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	return strings.Join(lines, "\n")
}

// TestPagesAndClaimsUseTheirIndexes pins that history pages, hook claims and
// pruning search their index in the order they return (no temporary b-tree
// to sort, no scan of a table that grows forever).
func TestPagesAndClaimsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t, ":memory:")
	for _, tc := range []struct {
		query string
		args  []any
		index string
	}{
		{"stepList", []any{"w", "i", 1, 0, nil, 50}, "workflow_step_run_id_idx"},
		{"eventList", []any{"w", "i", 0, 50}, "workflow_event_instance_id_idx"},
		{"eventListRun", []any{"w", "i", 1, 0, 50}, "workflow_event_instance_idx"},
		{"outboxClaim", []any{0, 0, 0, 50}, "workflow_hook_outbox_claim_idx"},
		{"outboxPrune", []any{0, 1000}, "workflow_hook_outbox_delivered_idx"},
	} {
		plan := queryPlan(t, s, tc.query, tc.args...)
		require.Regexp(t, `SEARCH \w+ USING (COVERING )?INDEX `+tc.index+` \(`, plan, "%s:\n%s", tc.query, plan)
		require.NotContains(t, plan, "TEMP B-TREE", "%s:\n%s", tc.query, plan)
		// The step list's statuses filter scans its JSON array, of a few
		// elements; nothing else is scanned.
		require.NotRegexp(t, `(?m)^SCAN (?:[^j]|j[^s])`, plan, "%s:\n%s", tc.query, plan)
	}
}

// TestClaimPlanIsOrderedIndexScans pins the plan of TaskClaim: each branch
// walks its partial index in claim order (pending tasks by instance
// priority, kind, run_at and id; expired leases by expiry) and stops at its
// LIMIT, with no temporary b-tree over the task table's rows and no scan of
// the table; only the few rows of the two branches are sorted, and the
// instances are found by primary key.
func TestClaimPlanIsOrderedIndexScans(t *testing.T) {
	t.Parallel()
	s := openTest(t, ":memory:")
	sql := generatedQuery(t, "taskClaim")
	rows, err := s.write.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+sql,
		"me", 0, `["w"]`, `["default"]`, 0, 0, 16)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
		lines = append(lines, detail)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	plan := strings.Join(lines, "\n")
	require.Regexp(t, `(SCAN|SEARCH) t USING INDEX workflow_task_pending_idx`, plan)
	require.Regexp(t, `(SCAN|SEARCH) t USING INDEX workflow_task_processing_idx`, plan)
	require.Regexp(t, `SEARCH i (EXISTS )?USING INDEX sqlite_autoindex_workflow_instance_1 \(workflow_name=\? AND instance_id=\?\)`, plan)
	require.NotRegexp(t, `(?m)^SCAN (t|workflow_task|i|workflow_instance)$`, plan)
	// The one sort is of the union's few rows (at most two LIMITs of them).
	require.Equal(t, 1, strings.Count(plan, "USE TEMP B-TREE FOR ORDER BY"), plan)
}

// TestBoundedListsUseTheirIndexes pins the plans of the lists with a byte
// budget: the page's keys and sizes come from a search of the list's index
// (octet_length reads no value), and its rows by primary key; only the
// page's own rows are sorted again, and no table is scanned.
func TestBoundedListsUseTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openTest(t, ":memory:")
	for _, tc := range []struct {
		query string
		args  []any
		index string
	}{
		{"instanceListBounded", []any{0, 1 << 20, nil, nil, nil, 1 << 62, "", "", 50}, "workflow_instance_updated_idx"},
		{"instanceListWorkflowBounded", []any{0, 1 << 20, "w", nil, nil, nil, 1 << 62, "", "", 50}, "workflow_instance_name_updated_idx"},
		{"stepListBounded", []any{1 << 20, "w", "i", 1, 0, `["waiting"]`, 50}, "workflow_step_run_id_idx"},
		{"eventListBounded", []any{1 << 20, "w", "i", 1, 0, 50}, "workflow_event_instance"},
	} {
		plan := queryPlan(t, s, tc.query, tc.args...)
		require.Regexp(t, `SEARCH \w+ USING (COVERING )?INDEX `+tc.index+`\w* \(`, plan, "%s:\n%s", tc.query, plan)
		require.Regexp(t, `SEARCH \w+ USING (INTEGER PRIMARY KEY|INDEX sqlite_autoindex_\w+) \(`, plan, "%s:\n%s", tc.query, plan)
		require.NotRegexp(t, `(?m)^SCAN workflow_`, plan, "%s:\n%s", tc.query, plan)
	}
}
