package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

func TestQueueCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	c := s.client(t)

	r := c.run(cli.ExitNotFound, "queues", "get", "payments")
	require.Contains(t, r.stderr, "QUEUE_NOT_FOUND")
	c.run(cli.ExitInvalid, "queues", "set", "payments", "--max-running", "0")
	c.run(cli.ExitInvalid, "queues", "set", "payments", "--max-running", "-2")
	c.run(cli.ExitInvalid, "queues", "set", "payments", "--rate", "0/1m")
	c.run(cli.ExitInvalid, "queues", "set", "payments", "--rate", "ten")
	c.run(cli.ExitNotFound, "queues", "get", "payments")

	r = c.run(cli.ExitOK, "queues", "set", "payments", "--max-running", "5", "--rate", "100/1m")
	require.Regexp(t, `(?m)^Name:\s+payments$`, r.stdout)
	require.Regexp(t, `(?m)^Max running:\s+5$`, r.stdout)
	require.Regexp(t, `(?m)^Rate:\s+100 per 1 minute$`, r.stdout)

	var q map[string]any
	c.json(&q, "queues", "get", "payments")
	require.Equal(t, "payments", q["name"])
	require.Equal(t, float64(5), q["maxRunning"])
	require.Equal(t, map[string]any{"limit": float64(100), "period": "1 minute"}, q["rate"])

	r = c.run(cli.ExitOK, "queues", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, `^NAME\s+MAX RUNNING\s+RATE\s+RUNNING\s+UPDATED$`, lines[0])
	require.Regexp(t, `^payments\s+5\s+100 per 1 minute\s+0\s+\S+$`, lines[1])

	// Setting again replaces: no --rate clears the rate.
	var cleared map[string]any
	c.json(&cleared, "queues", "set", "payments", "--max-running", "1")
	require.Nil(t, cleared["rate"])
	require.Equal(t, float64(1), cleared["maxRunning"])
}
