package postgres_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/internal/pgbouncertest"
)

// The conformance suite runs through PgBouncer in package
// internal/pgbouncertest's tests (TestStore there), a test binary of its
// own beside this package's.

func TestMigratePgBouncer(t *testing.T) {
	t.Parallel()

	t.Run("ConcurrentStartsThroughThePooler", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		b := pgbouncertest.Start(t, pgtest.DatabaseURL())
		pool := pgtest.NewPool(t, pgtest.WithPgBouncer(b.Addr()), pgtest.WithoutMigrations())

		var g errgroup.Group
		for range 3 {
			g.Go(func() error { return postgres.Migrate(ctx, pool) })
		}
		require.NoError(t, g.Wait())
		status, err := postgres.MigrateStatus(ctx, pool)
		require.NoError(t, err)
		require.NotEmpty(t, status)
		for _, st := range status {
			require.True(t, st.Applied, st.Name)
		}
		require.NoError(t, postgres.Migrate(ctx, pool), "nothing left to apply, and the lock was released")
	})

	t.Run("TheLockHoldsAcrossTransactions", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		// Server connections are lent most recently used first: a client
		// whose transaction follows a statement of the lock's gets the
		// lock's server connection when the lock does not keep it.
		b := pgbouncertest.Start(t, pgtest.DatabaseURL(), pgbouncertest.WithPoolSize(2))
		pool := pgtest.NewPool(t, pgtest.WithPgBouncer(b.Addr()), pgtest.WithoutMigrations())
		locker, id := postgres.MigrationLocker(pool, currentSchema(t, pool))

		try := func() bool {
			t.Helper()
			var got bool
			require.NoError(t, pool.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", id).Scan(&got))
			return got
		}
		require.NoError(t, locker.Lock(ctx, nil))
		require.False(t, try(), "another client of the pooler took the lock while a migrator held it")
		require.False(t, try(), "another client of the pooler took the lock while a migrator held it")
		require.NoError(t, locker.Unlock(ctx, nil))
		require.True(t, try(), "the lock is free once released")
	})
}

// TestMigrateRefusesADroppedSearchPath: a pooler configured to drop the
// search_path startup parameter (ignore_startup_parameters) leaves the
// role's schema current; Migrate says so rather than migrate another
// schema than the URL names.
func TestMigrateRefusesADroppedSearchPath(t *testing.T) {
	t.Parallel()
	b := pgbouncertest.Start(t, pgtest.DatabaseURL(), pgbouncertest.WithIgnoreStartupParameters("search_path"))
	schema := pgtest.NewSchema(t, pgtest.WithPgBouncer(b.Addr()), pgtest.WithoutMigrations())
	other := pgtest.NewSchema(t, pgtest.WithoutMigrations()) // a schema that exists
	store, err := postgres.Open(t.Context(), schema.URL+"&search_path="+currentSchema(t, other.Store.Pool()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	err = postgres.Migrate(t.Context(), store.Pool())
	require.ErrorContains(t, err, "was not applied: the current schema is "+strconv.Quote(currentSchema(t, schema.Store.Pool())))
	_, err = postgres.MigrateStatus(t.Context(), store.Pool())
	require.ErrorContains(t, err, "was not applied")

	// The role's schema, without a search_path in the URL, migrates.
	require.NoError(t, postgres.Migrate(t.Context(), schema.Store.Pool()))
}

// TestPgBouncerStatementCache shows what pgx's default query exec mode
// meets behind PgBouncer in transaction mode, and the error that says what
// to change: a named prepared statement lives on one server connection,
// which other clients borrow.
func TestPgBouncerStatementCache(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := pgbouncertest.Start(t, pgtest.DatabaseURL())
	schema := pgtest.NewSchema(t, pgtest.WithPgBouncer(b.Addr()))
	require.Contains(t, schema.URL, "default_query_exec_mode=cache_describe")
	cached := strings.Replace(schema.URL, "default_query_exec_mode=cache_describe", "default_query_exec_mode=cache_statement", 1)
	open := func() *postgres.Store {
		t.Helper()
		s, err := postgres.Open(ctx, cached)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	first, second := open(), open()
	ref := db.InstanceRef{WorkflowName: "w", ID: "a"}

	// The first client prepares the statement on the server connection it
	// borrows; the second, whose own cache is empty, prepares it again on
	// the same (most recently used) server connection, which has it.
	_, err := first.InstanceGet(ctx, ref)
	require.ErrorIs(t, err, db.ErrNotFound)
	_, err = second.InstanceGet(ctx, ref)
	require.Error(t, err)
	require.NotErrorIs(t, err, db.ErrNotFound)
	require.ErrorContains(t, err, "add default_query_exec_mode=cache_describe to the database URL")

	// cache_describe prepares nothing that outlives a transaction.
	_, err = schema.Store.InstanceGet(ctx, ref)
	require.ErrorIs(t, err, db.ErrNotFound)
}

// TestWakeListenURL checks that a store whose pool goes through PgBouncer
// LISTENs on the direct connection WithListenURL names, and hears the
// notifications of the transactions its pool commits through the pooler.
func TestWakeListenURL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	b := pgbouncertest.Start(t, pgtest.DatabaseURL())
	schema := pgtest.NewSchema(t, pgtest.WithPgBouncer(b.Addr()))
	require.NotEmpty(t, schema.ListenURL)
	const app = "duraflow-listen-url-test"
	store := postgres.New(schema.Store.Pool(), postgres.WithWakeChannel(schema.WakeChannel),
		postgres.WithListenURL(schema.ListenURL+"&application_name="+app+"&pool_max_conns=1"),
		postgres.WithListenReconnectDelay(10*time.Millisecond, time.Second))

	woken := make(chan string, 16)
	done := make(chan error)
	go func() {
		done <- store.WakeListen(ctx, &db.WakeListenParams{
			WakeFunc: func(name string) { woken <- name },
			Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	next := func() string {
		t.Helper()
		select {
		case name := <-woken:
			return name
		case <-time.After(notifyTimeout):
			t.Fatal("no wake-up")
			return ""
		}
	}
	require.Equal(t, "", next(), "listening wakes everything once")

	// The listener's connection is the direct one: the listen URL's user
	// and application name, not the schema's role through the pooler.
	admin, err := pgx.Connect(ctx, pgtest.DatabaseURL())
	require.NoError(t, err)
	defer admin.Close(context.Background())
	var user string
	require.NoError(t, admin.QueryRow(ctx, `SELECT usename FROM pg_stat_activity WHERE application_name = $1 AND query = $2`,
		app, "LISTEN "+pgx.Identifier{schema.WakeChannel}.Sanitize()).Scan(&user))
	direct, err := pgx.ParseConfig(schema.ListenURL)
	require.NoError(t, err)
	pooled, err := pgx.ParseConfig(schema.URL)
	require.NoError(t, err)
	require.NotEqual(t, pooled.User, direct.User, "the pool logs in as the schema's role")
	require.Equal(t, direct.User, user)

	for _, name := range []string{"billing", "orders"} {
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: "a", Params: json.RawMessage("null")})
		require.NoError(t, err)
		require.Equal(t, name, next(), "a commit through the pooler wakes the direct listener")
	}
}
