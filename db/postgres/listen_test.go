package postgres_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

func TestWakeListenWakesAndReconnects(t *testing.T) {
	t.Parallel()
	// A store opened from a URL with the pool's own settings, as the hosts
	// open theirs: the listener's connection must not pass them to the
	// server. Through PgBouncer (DURAFLOW_TEST_PGBOUNCER=1) the listener's
	// own URL has them.
	schema := pgtest.NewSchema(t)
	const poolParams = "&pool_max_conns=3&pool_min_conns=1"
	config, err := pgxpool.ParseConfig(schema.URL + poolParams)
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(t.Context(), config)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	channel := schema.WakeChannel
	opts := []postgres.Option{postgres.WithWakeChannel(channel), postgres.WithListenReconnectDelay(10*time.Millisecond, time.Second)}
	if schema.ListenURL != "" {
		opts = append(opts, postgres.WithListenURL(schema.ListenURL+poolParams))
	}
	store := postgres.New(pool, opts...)

	woken := make(chan string, 16)
	ctx, cancel := context.WithCancel(context.Background())
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
		case <-time.After(10 * time.Second):
			t.Fatal("no wake-up")
			return ""
		}
	}
	require.Equal(t, "", next(), "listening wakes everything once")

	create := func(name, id string) {
		t.Helper()
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: id, Params: json.RawMessage("null")})
		require.NoError(t, err)
	}
	create("billing", "a")
	require.Equal(t, "billing", next(), "the notification names the workflow")

	// Drop the listener's connection from the server side.
	conn, err := pgx.Connect(ctx, pgtest.DatabaseURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tag, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`,
		"LISTEN "+pgx.Identifier{channel}.Sanitize())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	require.Equal(t, "", next(), "after the reconnection the runners are woken to catch up")
	create("orders", "b")
	require.Equal(t, "orders", next(), "notifications arrive again")
}

func TestWakeListenNeedsWakeFunc(t *testing.T) {
	t.Parallel()
	store := pgtest.NewStore(t)
	require.Error(t, store.WakeListen(t.Context(), &db.WakeListenParams{}))
	require.Error(t, store.WakeListen(t.Context(), nil))
}

func TestWithListenURLRefusesABadURL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := pgtest.NewSchema(t)
	_, err := postgres.Open(ctx, schema.URL, postgres.WithListenURL("postgres://host:notaport/db"))
	require.ErrorContains(t, err, "parsing the listen URL")

	store := postgres.New(schema.Store.Pool(), postgres.WithListenURL("postgres://host:notaport/db"))
	err = store.WakeListen(ctx, &db.WakeListenParams{
		WakeFunc: func(string) { t.Error("woken") },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.ErrorContains(t, err, "parsing the listen URL", "WakeListen returns at once")

	// An empty URL keeps the pool's configuration.
	store, err = postgres.Open(ctx, schema.URL, postgres.WithListenURL(""))
	require.NoError(t, err)
	require.NoError(t, store.Close())
}
