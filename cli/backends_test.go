package cli_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// forEachBackend runs test once on a fresh SQLite file and once on a fresh
// Postgres schema (skipped when Postgres is down, unless
// DURAFLOW_REQUIRE_POSTGRES=1), each given the database flags of dev,
// serve and worker (--db, and on Postgres a --wake-channel of its own).
func forEachBackend(t *testing.T, test func(t *testing.T, dbArgs []string)) {
	t.Helper()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		test(t, []string{"--db", sqliteDB(t)})
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		test(t, postgresDB(t))
	})
}

// postgresDB returns the database flags of a fresh Postgres schema,
// dropped when the test ends: --db with the schema as search_path, and a
// --wake-channel named after it.
func postgresDB(t *testing.T, opts ...pgtest.Option) []string {
	t.Helper()
	pool := pgtest.NewPool(t, append([]pgtest.Option{pgtest.WithMaxConns(1)}, opts...)...)
	schema := pool.Config().ConnConfig.RuntimeParams["search_path"]
	require.NotEmpty(t, schema)
	return schemaArgs(t, schema)
}

// schemaArgs returns the database flags of a Postgres schema: --db with it
// as search_path, and a --wake-channel named after it.
func schemaArgs(t *testing.T, schema string) []string {
	t.Helper()
	u, err := url.Parse(pgtest.DatabaseURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return []string{"--db", u.String(), "--wake-channel", schema}
}
