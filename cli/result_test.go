package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/workflow"
)

// registerBoom registers "boom", whose run fails at once.
func registerBoom(reg *workflow.Registry) error {
	_, err := workflow.Register(reg, "boom", func(context.Context, workflow.Event[any], workflow.Step) (any, error) {
		return nil, workflow.NonRetryable(errors.New("boom on purpose"))
	})
	return err
}

// TestInstancesResultAndExecute: result and execute wait until the instance
// ends, print its output, and exit by how it ended (0, 8 errored, 9
// terminated, 10 the wait ran out); create exits 8 or 9 when the instance
// it waited for ended so.
func TestInstancesResultAndExecute(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, dbArgs []string) {
		s := startServer(t, append([]string{"dev"}, dbArgs...), cli.WithWorkflows(registerBoom))
		c := s.client(t)

		// execute: create and wait, the output on standard output.
		r := c.run(cli.ExitOK, "instances", "execute", "hello", "h1", "--params", `{"name":"Ada"}`)
		require.Equal(t, `{"greeting":"Hello, Ada!"}`+"\n", r.stdout)
		var inst struct {
			ID      string
			Details struct {
				Status string
				Output json.RawMessage
				Error  *struct{ Name, Message string }
			}
		}
		c.json(&inst, "instances", "execute", "hello", "--params", `{"name":"Grace"}`)
		require.Equal(t, "complete", inst.Details.Status)
		require.JSONEq(t, `{"greeting":"Hello, Grace!"}`, string(inst.Details.Output))

		// An errored instance exits 8 with its error on standard error.
		r = c.run(cli.ExitInstanceErrored, "instances", "execute", "boom", "b1")
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "boom/b1 errored: ")
		require.Contains(t, r.stderr, "boom on purpose")
		r = c.run(cli.ExitInstanceErrored, "instances", "execute", "boom", "b2", "--json")
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &inst))
		require.Equal(t, "errored", inst.Details.Status)
		require.Contains(t, inst.Details.Error.Message, "boom on purpose")
		r = c.run(cli.ExitInstanceErrored, "instances", "result", "boom", "b1")
		require.Contains(t, r.stderr, "boom on purpose")
		// create shows it, and exits 8 too when it saw it end.
		r = c.run(cli.ExitInstanceErrored, "instances", "create", "boom", "b3", "--wait", "10s")
		require.Regexp(t, `(?m)^Status:\s+errored$`, r.stdout)
		// --wait 0 does not wait, so it says nothing of the outcome.
		c.run(cli.ExitOK, "instances", "create", "boom", "b4", "--wait", "0")

		// A waiting instance: create exits 0 (it did not end); result waits
		// for it, or gives up at --wait with 10.
		r = c.run(cli.ExitOK, "instances", "create", "approval", "a1", "--params", `{"amount":120,"timeout":"1 hour"}`)
		require.Regexp(t, `(?m)^Status:\s+waiting$`, r.stdout)
		r = c.run(cli.ExitWaitTimeout, "instances", "result", "approval", "a1", "--wait", "300ms")
		require.Contains(t, r.stderr, "approval/a1 is still waiting after --wait 300ms")
		done := make(chan result, 1)
		go func() { done <- run(t, c.env, "instances", "result", "approval", "a1") }()
		c.run(cli.ExitOK, "events", "send", "approval", "a1", "approval", "--payload", `{"approved":true}`)
		r = <-done
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Equal(t, `{"approved":true,"amount":120}`+"\n", r.stdout)

		// A terminated instance exits 9.
		c.run(cli.ExitOK, "instances", "create", "approval", "a2", "--params", `{"amount":1,"timeout":"1 hour"}`)
		c.run(cli.ExitOK, "instances", "terminate", "approval", "a2")
		r = c.run(cli.ExitInstanceTerminated, "instances", "result", "approval", "a2")
		require.Contains(t, r.stderr, "approval/a2 was terminated")

		// Unknown instances and workflows keep their codes.
		c.run(cli.ExitNotFound, "instances", "result", "approval", "nope")
		c.run(cli.ExitNotFound, "instances", "execute", "nope")
	})
}

// TestCreateRefusesParamsThatDoNotDecode: params the workflow cannot
// decode are refused when the instance is created (exit 5, the decoder's
// message), not discovered when it runs.
func TestCreateRefusesParamsThatDoNotDecode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, dbArgs []string) {
		s := startServer(t, append([]string{"dev"}, dbArgs...))
		c := s.client(t)
		for _, cmd := range []string{"create", "execute"} {
			r := c.run(cli.ExitInvalid, "instances", cmd, "hello", "h-"+cmd, "--params", `"Ada"`)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, `INVALID_REQUEST (HTTP 400)`)
			require.Contains(t, r.stderr, `decoding params of workflow "hello": json: cannot unmarshal string into Go value of type demo.HelloParams`)
			c.run(cli.ExitNotFound, "instances", "get", "hello", "h-"+cmd)
		}
	})
}
