package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/examples/demo"
)

// TestDevBannerUsesName: a binary built with WithName calls itself by that
// name in dev's banner, not "Duraflow".
func TestDevBannerUsesName(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)}, cli.WithName("acme"))
	s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
	out := s.stdout.String()
	require.Contains(t, out, "Acme dev server: "+s.url+"/api")
	require.NotContains(t, out, "Duraflow")
	require.Contains(t, out, `acme instances create hello --params '{"name":"Ada"}'`)
	require.NotContains(t, out, "go run ./cmd/duraflow", "the checkout hint is duraflow's own")
}

// TestDevBusyPortCreatesNothing: dev on a port in use fails before it
// creates or migrates the database.
func TestDevBusyPortCreatesNothing(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })

	devOn := func(t *testing.T, dbArgs ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args := append([]string{"dev", "--addr", busy.Addr().String(), "--metrics-addr", "", "--stub=false"}, dbArgs...)
		code := cli.Run(context.Background(), args, cli.WithWorkflows(demo.Register),
			cli.WithOutput(&stdout, &stderr), cli.WithLookupEnv(noEnv))
		require.Equal(t, cli.ExitError, code, stderr.String())
		require.Contains(t, stderr.String(), "listening on "+busy.Addr().String())
		require.Empty(t, stdout.String(), "no banner")
		return stderr.String()
	}

	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "duraflow.db")
		devOn(t, "--db", "sqlite:"+file)
		_, err := os.Stat(file)
		require.ErrorIs(t, err, os.ErrNotExist, "the database file was created")
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.NewPool(t, pgtest.WithoutMigrations(), pgtest.WithMaxConns(1))
		schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
		devOn(t, schemaArgs(t, schema)...)
		var tables int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables))
		require.Zero(t, tables, "nothing was migrated")
	})
}

// TestDevIndex: the URL dev prints answers the index, with the binary's
// version.
func TestDevIndex(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)}, cli.WithVersion("v1.2.3"))
	line := s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Duraflow dev server: ") })
	printed := strings.Fields(strings.TrimPrefix(line, "Duraflow dev server: "))[0]
	require.Equal(t, s.url+"/api", printed)
	resp, err := http.Get(printed)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var idx apiclient.APIIndex
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&idx))
	require.Equal(t, "v1.2.3", idx.Version)
	require.Equal(t, "/api/openapi.json", idx.OpenAPI)
	require.NotEmpty(t, idx.Routes)
	require.Equal(t, "/ui/", idx.Console, "the index links to the console dev serves")

	off := startServer(t, []string{"dev", "--db", sqliteDB(t), "--console=false", "--metrics-addr", ""})
	resp, err = http.Get(off.url + "/api")
	require.NoError(t, err)
	defer resp.Body.Close()
	idx = apiclient.APIIndex{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&idx))
	require.Empty(t, idx.Console, "no console, no link")
}
