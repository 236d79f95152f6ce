package dburl_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		url     string
		backend dburl.Backend
		dsn     string
	}{
		{"postgres://u@h:5432/d?sslmode=disable", dburl.Postgres, "postgres://u@h:5432/d?sslmode=disable"},
		{"postgresql://u@h/d", dburl.Postgres, "postgresql://u@h/d"},
		{"sqlite:data/duraflow.db", dburl.SQLite, "data/duraflow.db"},
		{"sqlite:///var/lib/duraflow.db", dburl.SQLite, "/var/lib/duraflow.db"},
		{"./duraflow.db", dburl.SQLite, "./duraflow.db"},
		{"/abs/duraflow.db", dburl.SQLite, "/abs/duraflow.db"},
		{"sqlite::memory:", dburl.SQLite, ":memory:"},
		{":memory:", dburl.SQLite, ":memory:"},
		{"file:x.db?_pragma=busy_timeout(1)", dburl.SQLite, "file:x.db?_pragma=busy_timeout(1)"},
	}
	for _, tc := range cases {
		b, dsn, err := dburl.Parse(tc.url)
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.backend, b, tc.url)
		require.Equal(t, tc.dsn, dsn, tc.url)
	}
	for _, bad := range []string{"", "  ", "mysql://x", "sqlite:"} {
		_, _, err := dburl.Parse(bad)
		require.Error(t, err, bad)
	}
}

func TestOpenMigratedAndStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	urls := map[string]string{
		"memory": "sqlite::memory:",
		"file":   "sqlite:" + filepath.Join(t.TempDir(), "d.db"),
		"bare":   filepath.Join(t.TempDir(), "bare.db"),
	}
	for name, url := range urls {
		s, err := dburl.OpenMigrated(ctx, url)
		require.NoError(t, err, name)
		requireMigrated(t, s)
		require.NoError(t, s.Close())
	}
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	pgtest.NewStore(t) // skips, with a message, when Postgres is unreachable
	s, err := dburl.Open(context.Background(), pgtest.DatabaseURL())
	require.NoError(t, err)
	defer s.Close()
	pg, ok := s.(*postgres.Store)
	require.True(t, ok, "a postgres:// URL opens the pgx backend, got %T", s)
	require.NoError(t, pg.Pool().Ping(context.Background()))
}

func requireMigrated(t *testing.T, s db.Store) {
	t.Helper()
	st, err := dburl.MigrateStatus(context.Background(), s)
	require.NoError(t, err)
	require.NotEmpty(t, st)
	for _, m := range st {
		require.True(t, m.Applied, m.Name)
	}
}
