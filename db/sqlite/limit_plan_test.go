package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimitQueriesUseIndexes runs EXPLAIN QUERY PLAN on every limit query
// (admission, release, waiting, queue limits) and on the claim, as sqlc
// generated them, and fails on a full scan of the tasks, the instances or
// the limit tables: with limits on, admission and claims stay
// index-backed whatever the tables hold.
func TestLimitQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, Migrate(ctx, s))

	query := regexp.MustCompile("(?s)const (\\w+) = `(.*?)`")
	scan := regexp.MustCompile(`(?m)\bSCAN (workflow_task|workflow_instance|workflow_limit_member|workflow_limit)\b(.*)$`)
	param := regexp.MustCompile(`\?(\d+)`)
	checked := 0
	for _, file := range []string{"limit.sql.go", "task.sql.go"} {
		src, err := os.ReadFile(filepath.Join("internal", "litesqlc", file))
		require.NoError(t, err)
		for _, m := range query.FindAllStringSubmatch(string(src), -1) {
			name, sql := m[1], m[2]
			if file == "task.sql.go" && name != "taskClaim" {
				continue
			}
			n := 0
			for _, p := range param.FindAllStringSubmatch(sql, -1) {
				v, _ := strconv.Atoi(p[1])
				n = max(n, v)
			}
			rows, err := s.write.QueryContext(ctx, "EXPLAIN QUERY PLAN "+sql, make([]any, n)...)
			require.NoError(t, err, name)
			var plan []string
			for rows.Next() {
				var id, parent, notUsed int
				var detail string
				require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
				plan = append(plan, detail)
			}
			require.NoError(t, rows.Err())
			require.NoError(t, rows.Close())
			text := strings.Join(plan, "\n")
			for _, sm := range scan.FindAllStringSubmatch(text, -1) {
				require.Contains(t, sm[2], "USING", "%s scans %s without an index:\n%s", name, sm[1], text)
			}
			checked++
		}
	}
	require.GreaterOrEqual(t, checked, 15, "every limit query and the claim")
}
