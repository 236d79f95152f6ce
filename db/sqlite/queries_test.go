package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedQueriesBindEveryParameter guards against sqlc leaving a named
// parameter in the SQL it generates for SQLite (it does, for example, in the
// DO UPDATE clause of an upsert and left of IN). SQLite would bind such a
// leftover to NULL without complaint.
func TestGeneratedQueriesBindEveryParameter(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("internal", "litesqlc", "*.sql.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	query := regexp.MustCompile("(?s)const \\w+ = `(.*?)`")
	comment := regexp.MustCompile(`(?m)^\s*--.*$`)
	leftover := regexp.MustCompile(`[@:$]\w|sqlc\.`)
	for _, file := range files {
		src, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, m := range query.FindAllStringSubmatch(string(src), -1) {
			sql := comment.ReplaceAllString(m[1], "")
			require.Falsef(t, leftover.MatchString(sql), "%s: unbound parameter in\n%s", file, m[1])
		}
	}
}
