//go:build tsclient && unix

package main_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The check of the OpenAPI document with tools nobody here wrote (make
// openapi-client): the TypeScript project clients/typescript, whose
// pinned tools `npm ci` installs first.

// minNode is the oldest Node.js the tools run on (Redocly CLI 2.77 needs
// 20.19).
var minNode = [2]int{20, 19}

// clientToken is the secret of the dev server's one token, which has every
// scope and tick.
const clientToken = "ts-client-secret"

// TestTypeScriptClient starts two dev servers on loopback: one with every
// optional part (a token, the tick, a trigger; schedules and flows are
// always on in dev) and one with none (no tokens, on loopback only). From
// the document the first serves, it generates a TypeScript client
// (openapi-typescript), type-checks it with the session that uses it (tsc
// --strict), and runs that session (openapi-fetch) against the server.
// Then it lints both served documents with Redocly (recommended rules) and
// Spectral (spectral:oas): an error fails the test, warnings are listed.
//
// It skips where node or npm is missing or too old, except with CI=true.
func TestTypeScriptClient(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	require.NoError(t, err)
	requireNode(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "openapi-typescript")); err != nil {
		t.Fatalf("the tools of %s are not installed: run make openapi-client, which installs them with npm ci", dir)
	}

	_, full := startDev(t, "sqlite:"+filepath.Join(t.TempDir(), "full.db"),
		"--token", "admin:"+clientToken+":*,tick", "--tick", "--trigger", "/hooks/hello=hello",
		"--console=false", "--stub=false")
	_, open := startDev(t, "sqlite:"+filepath.Join(t.TempDir(), "open.db"), "--console=false", "--stub=false")

	generated := filepath.Join(dir, "generated")
	require.NoError(t, os.RemoveAll(generated))
	require.NoError(t, os.MkdirAll(generated, 0o755))
	saveDocument(t, full+"/api/openapi.json", clientToken, filepath.Join(generated, "openapi.json"))
	saveDocument(t, open+"/api/openapi.json", "", filepath.Join(generated, "openapi-open.json"))

	env := append(cleanEnv(),
		"DURAFLOW_URL="+full, "DURAFLOW_TOKEN="+clientToken,
		// No telemetry or update checks from the tools.
		"REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1",
	)
	for _, script := range []string{"generate", "typecheck", "build", "session", "lint"} {
		npmRun(t, dir, env, script)
	}
}

// requireNode skips the test where node or npm is missing or older than
// minNode, and fails it instead when CI=true.
func requireNode(t *testing.T) {
	t.Helper()
	stop := t.Skipf
	if os.Getenv("CI") == "true" {
		stop = t.Fatalf
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			stop("%s is not installed: the TypeScript client check needs Node.js %d.%d or later and npm", tool, minNode[0], minNode[1])
		}
	}
	out, err := exec.Command("node", "--version").Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.`).FindSubmatch(out)
	require.NotNil(t, m, "node --version: %q", out)
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	if major < minNode[0] || major == minNode[0] && minor < minNode[1] {
		stop("node is %s: the TypeScript client check needs Node.js %d.%d or later", out, minNode[0], minNode[1])
	}
}

// saveDocument writes the document served at url to path.
func saveDocument(t *testing.T, url, token, path string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.NoError(t, os.WriteFile(path, body, 0o644))
}

// npmRun runs one script of the project in dir and logs its output.
func npmRun(t *testing.T, dir string, env []string, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "run", "--silent", script)
	cmd.Dir, cmd.Env = dir, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("npm run %s (%s):\n%s", script, time.Since(start).Round(100*time.Millisecond), out)
	require.NoError(t, err, "npm run %s failed; its output is above", script)
}
