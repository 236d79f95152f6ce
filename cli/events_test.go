package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

// TestEventsSendSaysDelivered: events send says whether a waiting step took
// the event or it was buffered, and warns on standard error when the
// instance waits for another type.
func TestEventsSendSaysDelivered(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, dbArgs []string) {
		s := startServer(t, append([]string{"dev"}, dbArgs...))
		c := s.client(t)
		c.run(cli.ExitOK, "instances", "create", "approval", "a1", "--params", `{"amount":120,"timeout":"1 hour"}`)

		r := c.run(cli.ExitOK, "events", "send", "approval", "a1", "approvl", "--payload", `{"approved":true}`)
		require.Equal(t, "sent approvl to approval/a1 (now waiting): buffered, no step waits for approvl now\n", r.stdout)
		require.Equal(t, "duraflow: warning: approval/a1 waits for an event of type approval, not approvl: the event is buffered until a step waits for approvl\n", r.stderr)

		var sent struct {
			Delivery string
			Step     string
			Status   struct{ Status string }
		}
		r = c.run(cli.ExitOK, "events", "send", "approval", "a1", "approval", "--payload", `{"approved":true}`, "--json")
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &sent), r.stdout)
		require.Equal(t, "delivered", sent.Delivery)
		require.Equal(t, "wait for approval", sent.Step)
		require.Empty(t, r.stderr)
		c.waitStatus("approval", "a1", "complete")

		// An instance that sleeps waits for no event: buffered, and no
		// warning.
		c.run(cli.ExitOK, "instances", "create", "sleeper", "s1", "--params", `{"duration":"1 hour"}`)
		r = c.run(cli.ExitOK, "events", "send", "sleeper", "s1", "approval")
		require.Equal(t, "sent approval to sleeper/s1 (now waiting): buffered, no step waits for approval now\n", r.stdout)
		require.Empty(t, r.stderr)

		// Delivered, as text.
		c.run(cli.ExitOK, "instances", "create", "approval", "a2", "--params", `{"amount":1,"timeout":"1 hour"}`)
		r = c.run(cli.ExitOK, "events", "send", "approval", "a2", "approval", "--payload", `{"approved":false}`)
		require.Regexp(t, `^sent approval to approval/a2 \(now \w+\): delivered to step "wait for approval"\n$`, r.stdout)
	})
}
