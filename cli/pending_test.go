package cli_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/workflow"
)

// registerInvoker registers "invoker", which starts the demo approval as
// its child "<id>-kid" and waits for it.
func registerInvoker(reg *workflow.Registry) error {
	_, err := workflow.Register(reg, "invoker", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (any, error) {
		return workflow.Invoke[any](step, "approve it", workflow.InvokeOptions{
			Workflow: "approval", ID: ev.InstanceID + "-kid", Params: map[string]any{"amount": 5, "timeout": "1 hour"},
		})
	})
	return err
}

// TestInstancesGetShowsWhatItWaitsFor: instances get shows the pending
// step of a waiting instance (the event type and its deadline, the sleep's
// wake time, the next attempt and its error, the child), the flow version
// an instance of a flow is pinned to, and the parent of a child.
func TestInstancesGetShowsWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, dbArgs []string) {
		s := startServer(t, append([]string{"dev", "--flows", exampleFlowsDir(t)}, dbArgs...), cli.WithWorkflows(registerInvoker))
		c := s.client(t)
		const ts = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`

		c.run(cli.ExitOK, "instances", "create", "approval", "a1", "--params", `{"amount":120,"timeout":"1 hour"}`)
		r := c.run(cli.ExitOK, "instances", "get", "approval", "a1")
		require.Regexp(t, `(?m)^Pending:\s+step "wait for approval" waits for an event of type approval, until `+ts+`$`, r.stdout)
		var info struct {
			Pending []struct {
				Step, Kind, EventType string
				Until                 *time.Time
			}
		}
		c.json(&info, "instances", "get", "approval", "a1")
		require.Len(t, info.Pending, 1)
		require.Equal(t, "event", info.Pending[0].Kind)
		require.Equal(t, "approval", info.Pending[0].EventType)
		require.WithinDuration(t, time.Now().Add(time.Hour), *info.Pending[0].Until, time.Minute)

		c.run(cli.ExitOK, "instances", "create", "sleeper", "s1", "--params", `{"duration":"1 hour"}`)
		r = c.run(cli.ExitOK, "instances", "get", "sleeper", "s1")
		require.Regexp(t, `(?m)^Pending:\s+step "\S+" sleeps until `+ts+`$`, r.stdout)

		c.run(cli.ExitOK, "instances", "create", "flaky", "f1", "--params", `{"failures":9}`, "--wait", "0")
		c.waitStatus("flaky", "f1", "waiting")
		r = c.run(cli.ExitOK, "instances", "get", "flaky", "f1")
		require.Regexp(t, `(?m)^Pending:\s+step "call" retries: attempt \d of 6 at `+ts+regexp.QuoteMeta(` (last error Error: attempt `)+`\d`+regexp.QuoteMeta(` fails on purpose (failures: 9))`)+`$`, r.stdout)

		c.run(cli.ExitOK, "instances", "create", "invoker", "p1")
		c.waitStatus("approval", "p1-kid", "waiting")
		c.waitStatus("invoker", "p1", "waiting")
		r = c.run(cli.ExitOK, "instances", "get", "invoker", "p1")
		require.Regexp(t, `(?m)^Pending:\s+step "approve it" waits for its child approval/p1-kid \(waiting\), until `+ts+`$`, r.stdout)
		r = c.run(cli.ExitOK, "instances", "get", "approval", "p1-kid")
		require.Regexp(t, `(?m)^Parent:\s+invoker/p1 run 1 step "approve it"`, r.stdout)

		c.run(cli.ExitOK, "instances", "create", "expense-approval", "e1", "--params", `{"expenseId":"E-2","amount":420,"submitter":"Grace"}`)
		c.waitStatus("expense-approval", "e1", "waiting")
		r = c.run(cli.ExitOK, "instances", "get", "expense-approval", "e1")
		require.Regexp(t, `(?m)^Flow version:\s+expense-approval 1\.0\.0$`, r.stdout)
		require.Regexp(t, `(?m)^Pending:\s+.*waits for an event of type approval`, r.stdout)

		// A complete instance waits for nothing.
		c.run(cli.ExitOK, "instances", "execute", "hello", "h1", "--params", `{"name":"Ada"}`)
		r = c.run(cli.ExitOK, "instances", "get", "hello", "h1")
		require.NotContains(t, r.stdout, "Pending:")
	})
}
