package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

// startWorker runs `duraflow worker` on db in the background with a fast
// worker heartbeat and returns its exit code channel and its cancel.
func startWorker(t *testing.T, db string) (<-chan int, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stderr := newLines()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--db", db, "--log-format", "json", "--poll-interval", "50ms",
			"--worker-heartbeat", "100ms", "--shutdown-timeout", "20s"},
			cli.WithWorkflows(registerDemo), cli.WithOutput(&strings.Builder{}, stderr), cli.WithLookupEnv(noEnv))
	}()
	stderr.waitLine(t, 10*time.Second, func(l string) bool { _, ok := logLine(l, "started"); return ok })
	return done, cancel
}

type workerJSON struct {
	ID               string
	Status           string
	Hostname         string
	PID              int
	Queues           []string
	Workflows        []string
	MaxConcurrency   int
	DrainRequestedAt *time.Time
	DeregisteredAt   *time.Time
}

func TestWorkersCommands(t *testing.T) {
	t.Parallel()
	db := sqliteDB(t)
	s := startServer(t, []string{"serve", "--db", db, "--runner=false"})
	c := s.client(t)

	var empty struct{ Workers []workerJSON }
	c.json(&empty, "workers", "list")
	require.Empty(t, empty.Workers, "serve --runner=false registers no worker")

	done, _ := startWorker(t, db)
	var page struct {
		Workers    []workerJSON
		NextCursor string `json:"cursor"`
	}
	c.json(&page, "workers", "list", "--status", "online", "--queue", "default")
	require.Len(t, page.Workers, 1)
	w := page.Workers[0]
	require.Equal(t, "online", w.Status)
	require.Equal(t, []string{"default"}, w.Queues)
	require.Contains(t, w.Workflows, "flaky")
	require.Positive(t, w.PID)

	r := c.run(cli.ExitOK, "workers", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, `^ID\s+STATUS\s+HOST\s+PID\s+QUEUES\s+ACTIVE\s+COMPLETED\s+FAILED\s+LAST HEARTBEAT$`, lines[0])
	require.Regexp(t, `^`+w.ID+`\s+online\s+\S+\s+\d+\s+default\s+0/64\s+0\s+0\s+\S+Z$`, lines[1])
	c.json(&page, "workers", "list", "--queue", "emails")
	require.Empty(t, page.Workers)

	r = c.run(cli.ExitOK, "workers", "get", w.ID)
	require.Regexp(t, `(?m)^Status:\s+online$`, r.stdout)
	require.Regexp(t, `(?m)^Queues:\s+default$`, r.stdout)

	// Bad input: a code and an exit status, nothing written.
	c.run(cli.ExitNotFound, "workers", "get", "nobody")
	c.run(cli.ExitNotFound, "workers", "drain", "nobody")
	c.run(cli.ExitInvalid, "workers", "list", "--status", "sleeping")

	// A drain while a step runs: the step finishes, the worker deregisters
	// and exits 0.
	c.run(cli.ExitOK, "instances", "create", "flaky", "d1", "--params", `{"work":"300 milliseconds"}`, "--wait", "0")
	c.waitStatus("flaky", "d1", "running")
	r = c.run(cli.ExitOK, "workers", "drain", w.ID)
	require.Regexp(t, `(?m)^Status:\s+draining$`, r.stdout)
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code, "a drained worker exits 0")
	case <-time.After(20 * time.Second):
		t.Fatal("the drained worker did not exit")
	}
	c.waitStatus("flaky", "d1", "complete")
	var got workerJSON
	c.json(&got, "workers", "get", w.ID)
	require.Equal(t, "offline", got.Status)
	require.NotNil(t, got.DeregisteredAt)
	require.NotNil(t, got.DrainRequestedAt)
	r = c.run(cli.ExitConflict, "workers", "drain", w.ID)
	require.Contains(t, r.stderr, "WORKER_OFFLINE")

	// SIGTERM (a cancelled context) drains as well: the worker shows the
	// drain and deregisters.
	done, cancel := startWorker(t, db)
	cancel()
	require.Equal(t, cli.ExitOK, <-done)
	c.json(&page, "workers", "list", "--status", "offline")
	// A second runner of this process has an id of its own (a restart of
	// the process would register the first id again).
	require.Len(t, page.Workers, 2)
	second := page.Workers[0]
	if second.ID == w.ID {
		second = page.Workers[1]
	}
	require.NotEqual(t, w.ID, second.ID)
	require.NotNil(t, second.DrainRequestedAt, "SIGTERM marks the worker draining")
	require.NotNil(t, second.DeregisteredAt)
}
