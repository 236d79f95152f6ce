package dispatcher_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dispatcher"
)

func TestPGListenerWakesAndReconnects(t *testing.T) {
	t.Parallel()
	store := pgtest.NewStore(t)
	woken := make(chan string, 16)
	// The store's URL, pool settings and all, as the hosts pass it.
	l, err := dispatcher.NewPGListener(&dispatcher.PGListenerConfig{
		ConnString: pgtest.DatabaseURLWith("pool_max_conns=3", "pool_min_conns=1"),
		Channel:    store.WakeChannel(),
		WakeFunc:   func(name string) { woken <- name },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- l.Run(ctx) }()
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
	connected := func() {
		t.Helper()
		select {
		case <-l.Connected():
		case <-time.After(10 * time.Second):
			t.Fatal("the listener did not connect")
		}
	}
	connected()
	require.Equal(t, "", next(), "a (re)connection wakes everything once")

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
		"LISTEN "+pgx.Identifier{store.WakeChannel()}.Sanitize())
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	require.Equal(t, "", next(), "after the reconnection the runners are woken to catch up")
	connected()
	create("orders", "b")
	require.Equal(t, "orders", next(), "notifications arrive again")
}

func TestPGListenerConfig(t *testing.T) {
	t.Parallel()
	_, err := dispatcher.NewPGListener(&dispatcher.PGListenerConfig{ConnString: "postgres://x"})
	require.Error(t, err, "WakeFunc is required")
	_, err = dispatcher.NewPGListener(&dispatcher.PGListenerConfig{ConnString: "::bad::", WakeFunc: func(string) {}})
	require.Error(t, err)
}
