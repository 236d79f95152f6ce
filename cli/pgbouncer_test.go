package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/examples/demo"
	"github.com/duraflow/duraflow/internal/pgbouncertest"
)

// TestWorkersBehindPgBouncer runs serve and two workers whose --db goes
// through PgBouncer in transaction mode, the workers LISTENing on the
// direct --listen-db. Their poll interval is an hour, so an instance that
// waits for an event finishes in the test's time only when the event's
// notification reaches a worker; through the pooler it would not (a LISTEN
// there lasts one transaction).
func TestWorkersBehindPgBouncer(t *testing.T) {
	t.Parallel()
	b := pgbouncertest.Start(t, pgtest.DatabaseURL())
	schema := pgtest.NewSchema(t, pgtest.WithPgBouncer(b.Addr()), pgtest.WithMaxConns(1))
	common := []string{"--db", schema.URL, "--wake-channel", schema.WakeChannel}
	s := startServer(t, append([]string{"serve", "--runner=false"}, common...))
	for i := range 2 {
		m := startPooledWorker(t, fmt.Sprintf("worker %d", i+1), append([]string{"worker", "--listen-db", schema.ListenURL,
			"--poll-interval", "1h", "--concurrency", "2"}, common...)...)
		require.Equal(t, true, m["notify"])
	}
	c := s.client(t)

	// Round one may be started by a worker's first claims; in round two,
	// long after both listen, only notifications wake them.
	for round := range 2 {
		var ids []string
		for i := range 3 {
			id := fmt.Sprintf("r%d-%d", round, i)
			ids = append(ids, id)
			c.run(cli.ExitOK, "instances", "create", demo.ApprovalName, id, "--params", `{"amount":7}`, "--wait", "0")
		}
		for _, id := range ids {
			c.waitStatus(demo.ApprovalName, id, "waiting")
		}
		for _, id := range ids {
			c.run(cli.ExitOK, "events", "send", demo.ApprovalName, id, demo.ApprovalEvent, "--payload", `{"approved":true}`)
		}
		for _, id := range ids {
			info := c.waitStatus(demo.ApprovalName, id, "complete")
			require.Equal(t, map[string]any{"approved": true, "amount": float64(7)}, info["details"].(map[string]any)["output"])
		}
	}
}

// TestWorkersBehindPgBouncerPoll: without --listen-db, a worker behind
// PgBouncer in transaction mode hears no notification, and its polls find
// the work.
func TestWorkersBehindPgBouncerPoll(t *testing.T) {
	t.Parallel()
	b := pgbouncertest.Start(t, pgtest.DatabaseURL())
	schema := pgtest.NewSchema(t, pgtest.WithPgBouncer(b.Addr()), pgtest.WithMaxConns(1))
	common := []string{"--db", schema.URL, "--wake-channel", schema.WakeChannel}
	s := startServer(t, append([]string{"serve", "--runner=false"}, common...))
	startPooledWorker(t, "worker", append([]string{"worker", "--poll-interval", "100ms"}, common...)...)
	c := s.client(t)
	c.run(cli.ExitOK, "instances", "create", demo.ApprovalName, "a", "--params", `{"amount":7}`, "--wait", "0")
	c.waitStatus(demo.ApprovalName, "a", "waiting")
	c.run(cli.ExitOK, "events", "send", demo.ApprovalName, "a", demo.ApprovalEvent, "--payload", `{"approved":true}`)
	c.waitStatus(demo.ApprovalName, "a", "complete")
}

// TestListenURLRefusals: --listen-db is checked at start.
func TestListenURLRefusals(t *testing.T) {
	t.Parallel()
	type testCase struct {
		name string
		args []string
		env  map[string]string
		code int
		msg  string
	}
	check := func(t *testing.T, cases []testCase) {
		t.Helper()
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				r := run(t, tc.env, tc.args...)
				require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
				require.Contains(t, r.stderr, tc.msg)
				require.NotContains(t, r.stderr, "secret")
			})
		}
	}
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		db := sqliteDB(t)
		check(t, []testCase{
			{"OnSQLite", []string{"worker", "--db", db, "--listen-db", pgtest.DatabaseURL()}, nil, cli.ExitUsage, "--listen-db is for a Postgres --db"},
			{"NotPostgres", []string{"worker", "--db", db, "--listen-db", "sqlite:x.db"}, nil, cli.ExitUsage, "--listen-db: want a postgres:// URL"},
			{"FromEnvironment", []string{"worker", "--db", db}, map[string]string{"DURAFLOW_LISTEN_DATABASE_URL": "mysql://x"}, cli.ExitUsage, "--listen-db: unsupported database URL scheme"},
		})
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		dbArgs := postgresDB(t)
		other := strings.Replace(pgtest.DatabaseURL(), "/postgres?", "/template1?", 1)
		require.NotEqual(t, pgtest.DatabaseURL(), other, "the test database is postgres")
		check(t, []testCase{
			{"Unreachable", append([]string{"worker", "--listen-db", "postgres://postgres:secret@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, dbArgs...),
				nil, cli.ExitError, "--listen-db postgres://postgres:***@127.0.0.1:1/x"},
			{"AnotherDatabase", append([]string{"worker", "--listen-db", other}, dbArgs...), nil, cli.ExitError, "notifications do not cross databases"},
		})
	})
}

// startPooledWorker runs a worker command with the demo workflows in the
// background, waits until it has started and returns its "started" log
// line; it is cancelled (and must exit 0) when the test ends.
func startPooledWorker(t *testing.T, name string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := newLines()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, append(args, "--log-format", "json", "--log-level", "info"),
			cli.WithWorkflows(demo.Register), cli.WithOutput(&strings.Builder{}, stderr), cli.WithLookupEnv(noEnv))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			require.Equal(t, cli.ExitOK, code, "%s exits 0 when drained; stderr:\n%s", name, stderr.String())
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30 s", name)
		}
	})
	line := stderr.waitLine(t, 30*time.Second, func(l string) bool {
		_, ok := logLine(l, "started")
		return ok || strings.Contains(l, `"level":"ERROR"`)
	})
	m, ok := logLine(line, "started")
	require.True(t, ok, "%s: %s", name, line)
	return m
}
