package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/internal/pgcluster"
)

func TestInterpretError(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("querying: %w", &pgconn.PgError{Severity: "FATAL", Code: code})
	}
	for _, tc := range []struct {
		name string
		err  error
		want error // the sentinel, nil for none
	}{
		{"admin shutdown", pg("57P01"), db.ErrUnavailable},
		{"crash shutdown", pg("57P02"), db.ErrUnavailable},
		{"cannot connect now", pg("57P03"), db.ErrUnavailable},
		{"too many connections", pg("53300"), db.ErrUnavailable},
		{"connection failure", pg("08006"), db.ErrUnavailable},
		{"connection does not exist", pg("08003"), db.ErrUnavailable},
		{"unexpected EOF", fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), db.ErrUnavailable},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, db.ErrUnavailable},
		{"closed connection", fmt.Errorf("sending: %w", pgconn.ErrConnClosed), db.ErrUnavailable},
		{"unique violation", pg("23505"), db.ErrAlreadyExists},
		{"invalid text", pg("22021"), db.ErrInvalidData},
		{"serialization failure", pg("40001"), nil},
		{"query canceled", pg("57014"), nil},
		{"authentication failed", pg("28P01"), nil},
		{"the caller's context ended", fmt.Errorf("failed to receive message: %w", context.Canceled), nil},
		{"the caller's deadline passed", fmt.Errorf("timeout: %w", context.DeadlineExceeded), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := postgres.InterpretError(tc.err)
			for _, sentinel := range []error{db.ErrUnavailable, db.ErrAlreadyExists, db.ErrInvalidData} {
				require.Equal(t, sentinel == tc.want, errors.Is(got, sentinel), "%v: is %v", got, sentinel)
			}
		})
	}
}

// TestUnavailableWhenNothingListens opens a store on a port nobody listens
// on: every call, and Ping, fails with db.ErrUnavailable.
func TestUnavailableWhenNothingListens(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	store, err := postgres.Open(t.Context(), "postgres://postgres@"+addr+"/postgres?sslmode=disable&connect_timeout=5")
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })

	err = store.Ping(t.Context())
	require.ErrorIs(t, err, db.ErrUnavailable)
	_, err = store.InstanceGet(t.Context(), db.InstanceRef{WorkflowName: "w", ID: "i"})
	require.ErrorIs(t, err, db.ErrUnavailable)
	require.NotErrorIs(t, err, db.ErrNotFound)
}

// TestUnavailableAcrossRestarts stops a private server in fast mode (its
// sessions end with admin_shutdown) and in immediate mode (they are cut):
// the calls made while it is down fail with db.ErrUnavailable, calls on
// the connections the stop broke too, and the store answers again once
// the server is back, without being reopened.
func TestUnavailableAcrossRestarts(t *testing.T) {
	t.Parallel()
	cluster := pgcluster.Start(t)
	ctx := t.Context()
	store, err := postgres.Open(ctx, cluster.URL()+"&pool_max_conns=4")
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	require.NoError(t, postgres.Migrate(ctx, store.Pool()))

	get := func() error {
		_, err := store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "i"})
		if errors.Is(err, db.ErrNotFound) {
			return nil // the database answered
		}
		return err
	}
	// answersAgain calls until the database answers; every failure on the
	// way must be an outage, not an error of another kind.
	answersAgain := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := get()
			if err == nil {
				return
			}
			require.ErrorIs(t, err, db.ErrUnavailable, "%s: a failure while the server comes back", what)
			require.True(t, time.Now().Before(deadline), "%s: the store does not answer again: %v", what, err)
		}
	}
	for _, stop := range []struct {
		name string
		stop func() error
	}{{"fast", cluster.StopFast}, {"immediate", cluster.Stop}} {
		require.NoError(t, get(), "%s: the database answers before the stop", stop.name)
		require.NoError(t, stop.stop())
		for range 3 {
			err := get()
			require.ErrorIs(t, err, db.ErrUnavailable, "%s: a call while the server is down", stop.name)
		}
		require.ErrorIs(t, store.Ping(ctx), db.ErrUnavailable, stop.name)
		require.NoError(t, cluster.Start())
		answersAgain(stop.name)
	}
}
