//go:build chaos && linux

package chaos_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/duraflow/duraflow/internal/pgcluster"
)

// terminateListener terminates the LISTEN connection of the worker with the
// pid (found by its application_name) and reports whether there was one.
func terminateListener(ctx context.Context, conn *pgx.Conn, pid int) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query ILIKE 'LISTEN%'`, listenerAppName+strconv.Itoa(pid)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("terminating the listener of worker %d: %w", pid, err)
	}
	return n > 0, nil
}

// listening reports whether the worker with the pid has a LISTEN connection.
func listening(ctx context.Context, conn *pgx.Conn, pid int) (bool, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND query ILIKE 'LISTEN%'`, listenerAppName+strconv.Itoa(pid)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("looking for the listener of worker %d: %w", pid, err)
	}
	return n > 0, nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string { return pgcluster.Tail(s, n) }
