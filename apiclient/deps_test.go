package apiclient_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDependencies checks that a program calling the API links none of the
// server's dependencies: not the router, not the flow engine's expression
// library, not a database driver, not the server or the flow engine.
func TestDependencies(t *testing.T) {
	t.Parallel()

	out, err := exec.Command("go", "list", "-deps", "github.com/duraflow/duraflow/apiclient").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/duraflow/duraflow/apiclient")

	forbidden := []string{
		"github.com/labstack/echo",
		"github.com/expr-lang/expr",
		"github.com/jackc/pgx",
		"modernc.org/sqlite",
		"github.com/duraflow/duraflow/httpapi",
		"github.com/duraflow/duraflow/flow",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("apiclient depends on %s (through %s)", f, dep)
			}
		}
	}
}
