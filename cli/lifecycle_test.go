package cli_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/examples/demo"
)

type lifecycleJSON struct {
	ID           int64
	Type         string
	WorkflowName string
	InstanceID   string
	StepKey      string
	WorkerID     string
}

// jsonLines decodes one JSON object per line.
func jsonLines(t *testing.T, out string) []lifecycleJSON {
	t.Helper()
	var events []lifecycleJSON
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e lifecycleJSON
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		events = append(events, e)
	}
	return events
}

func TestEventsListAndFollow(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t)})
	c := s.client(t)
	c.run(cli.ExitOK, "instances", "create", "hello", "ada", "--params", `{"name":"Ada"}`)

	r := c.run(cli.ExitOK, "events", "list", "--json", "--workflow", "hello", "--instance", "ada")
	var types []string
	for _, e := range jsonLines(t, r.stdout) {
		require.Equal(t, "ada", e.InstanceID)
		types = append(types, e.Type)
	}
	require.Equal(t, "instance.created", types[0])
	require.Equal(t, "instance.completed", types[len(types)-1])
	require.Contains(t, types, "step.completed")

	// Plain "events" lists too, with the same flags; the table form.
	r = c.run(cli.ExitOK, "events", "--type", "instance.completed")
	require.Regexp(t, `^\d+ +\S+  instance\.completed +hello/ada  run 1\n$`, r.stdout)

	// The server's runner registered as a worker: its event names the
	// worker, and --worker keeps its events.
	r = c.run(cli.ExitOK, "events", "--type", "worker.online")
	m := regexp.MustCompile(`^\d+ +\S+  worker\.online +worker (\S+)\n$`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	r = c.run(cli.ExitOK, "events", "--worker", m[1], "--json")
	events := jsonLines(t, r.stdout)
	require.Len(t, events, 1)
	require.Equal(t, "worker.online", events[0].Type)
	require.Equal(t, m[1], events[0].WorkerID)
	require.Empty(t, events[0].InstanceID)

	// Bad input.
	r = c.run(cli.ExitUsage, "events", "list", "--since", "yesterday")
	require.Contains(t, r.stderr, "--since")
	r = c.run(cli.ExitInvalid, "events", "list", "--type", "instance.exploded")
	require.Contains(t, r.stderr, "unknown lifecycle event type")
	c.run(cli.ExitInvalid, "events", "list", "--instance", "ada")
	c.run(cli.ExitUsage, "events", "list", "--follow", "--until", "1h")
	c.run(cli.ExitNotFound, "events", "send", "approval", "nobody", "x") // send is still there

	// --follow lists, then streams new events until interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := newLines(), newLines()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"events", "list", "--follow", "--json", "--workflow", "hello", "--type", "instance.completed"},
			cli.WithWorkflows(demo.Register), cli.WithOutput(out, errOut), cli.WithLookupEnv(envMap(c.env)))
	}()
	out.waitLine(t, 10*time.Second, func(l string) bool { return strings.Contains(l, `"instanceId":"ada"`) })
	c.run(cli.ExitOK, "instances", "create", "hello", "grace", "--params", `{"name":"Grace"}`)
	out.waitLine(t, 10*time.Second, func(l string) bool { return strings.Contains(l, `"instanceId":"grace"`) })
	cancel()
	select {
	case code := <-done:
		require.Equal(t, cli.ExitOK, code, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("--follow did not stop when interrupted")
	}
	require.Len(t, jsonLines(t, out.String()), 2, "each completion once")
}
