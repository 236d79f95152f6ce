package doclinks_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

// TestReadmePromises checks what README.md promises a new user against the
// repository: the Go version it asks for is the go directive of go.mod,
// the install line names the command's package, and the license it names is
// the LICENSE file. What its quickstart shows the command print is checked
// against a dev server by internal/clitranscript's TestReadmeQuickstart.
func TestReadmePromises(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	mf, err := modfile.ParseLax("go.mod", gomod, nil)
	require.NoError(t, err)
	require.NotNil(t, mf.Go)

	m := regexp.MustCompile(`All you need is Go (1\.\d+)`).FindSubmatch(readme)
	require.NotNil(t, m, "README says which Go it needs")
	promised := string(m[1])
	require.Contains(t, []string{promised, promised + ".0"}, mf.Go.Version,
		"README promises Go %s; go.mod's go directive %s would make an older %s refuse the module", promised, mf.Go.Version, promised)
	require.Contains(t, string(readme), "(the `go` directive of go.mod is "+mf.Go.Version+")")

	require.Contains(t, string(readme), "go install "+mf.Module.Mod.Path+"/cmd/duraflow@latest")
	_, err = os.Stat(filepath.Join(root, "cmd", "duraflow", "main.go"))
	require.NoError(t, err)

	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(strings.TrimSpace(string(license)), "Apache License\n                           Version 2.0, January 2004"))
	require.Contains(t, string(license), "Copyright 2026 The Duraflow Authors")
	require.Contains(t, string(readme), "Apache License 2.0 ([LICENSE](LICENSE))")
}
