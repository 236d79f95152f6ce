package pgbouncertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/internal/pgbouncertest"
)

func TestBouncerPoolsInTransactionModeAndRestarts(t *testing.T) {
	t.Parallel()
	pgtest.NewPool(t, pgtest.WithoutMigrations()) // skips without Postgres
	b := pgbouncertest.Start(t, pgtest.DatabaseURL(), pgbouncertest.WithPoolSize(1))
	url, err := b.URL(pgtest.DatabaseURL(), "default_query_exec_mode=cache_describe")
	require.NoError(t, err)

	connect := func() *pgx.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		return conn
	}
	backend := func(conn *pgx.Conn) int {
		t.Helper()
		var pid int
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid))
		return pid
	}
	// Two clients, one server connection: each transaction borrows it.
	a, c := connect(), connect()
	require.Equal(t, backend(a), backend(c), "transaction pooling: both clients ran on the one server connection")

	require.NoError(t, b.Restart(100*time.Millisecond))
	require.Error(t, a.Ping(t.Context()), "a restart cuts the clients")
	require.Positive(t, backend(connect()), "the same address after a restart")
}
