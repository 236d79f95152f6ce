package flow_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

func execHandler(t *testing.T) *flow.ExecHandler {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := func(name, mode string, allowArgs bool) flow.ExecCommand {
		return flow.ExecCommand{Name: name, Path: self, Args: []string{"fixed"}, AllowArgs: allowArgs,
			Env: []string{"FLOW_EXEC_HELPER=" + mode, "GREETING=hi"}}
	}
	h, err := flow.NewExecHandler(&flow.ExecHandlerConfig{
		Commands: []flow.ExecCommand{
			cmd("echo", "echo", true), cmd("echo-fixed", "echo", false), cmd("fail", "fail", false),
			cmd("hang", "hang", false), cmd("garbage", "garbage", false), cmd("big", "big", false), cmd("empty", "empty", false),
		},
		MaxOutputBytes: 2000,
		WaitDelay:      time.Second,
	})
	require.NoError(t, err)
	return h
}

func TestExecHandler(t *testing.T) {
	t.Parallel()
	h := execHandler(t)

	t.Run("JSONInAndOut", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"command": "echo", "args": ["--id", "${order.id}"]}`, `{"order": {"id": 7, "items": [1, 2]}}`, sel(t, `{"path": "order"}`))
		require.NoError(t, err)
		var got struct {
			Stdin json.RawMessage
			Args  []string
			Env   []string
		}
		require.NoError(t, json.Unmarshal([]byte(asJSON(t, out)), &got))
		require.JSONEq(t, `{"id": 7, "items": [1, 2]}`, string(got.Stdin))
		require.Equal(t, []string{"fixed", "--id", "7"}, got.Args, "fixed args first, then the flow's, with no shell")
		require.ElementsMatch(t, []string{"FLOW_EXEC_HELPER=echo", "GREETING=hi"}, got.Env, "only the configured environment")
	})

	t.Run("ArgsAreNotInterpretedByAShell", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"command": "echo", "args": ["${x}"]}`, `{"x": "a; rm -rf / && $(id)"}`, nil)
		require.NoError(t, err)
		require.Contains(t, asJSON(t, out), `"args":["fixed","a; rm -rf / \u0026\u0026 $(id)"]`)
	})

	t.Run("EmptyOutputIsNull", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"command": "empty"}`, `{}`, nil)
		require.NoError(t, err)
		require.Nil(t, out)
	})

	t.Run("NonZeroExitIsRetryable", func(t *testing.T) {
		t.Parallel()
		_, err := invoke(t, h, `{"command": "fail"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameExec, true)
		require.ErrorContains(t, err, `command "fail": exit status 3: stderr: something went wrong: disk full`)
	})

	t.Run("TimeoutKillsIt", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		_, err := invoke(t, h, `{"command": "hang", "timeout": "200 milliseconds"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameExec, true)
		require.ErrorContains(t, err, "did not finish within 200 milliseconds and was killed")
		require.Less(t, time.Since(start), 10*time.Second)
	})

	t.Run("EndOfTheAttemptKillsIt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := h.Run(ctx, &flow.Invocation{StepID: "s", Config: json.RawMessage(`{"command": "hang"}`), Context: map[string]any{}})
		require.ErrorIs(t, err, context.Canceled, "the runner sees the attempt's own cancellation")
		require.Less(t, time.Since(start), 10*time.Second)
	})

	t.Run("BadOutput", func(t *testing.T) {
		t.Parallel()
		_, err := invoke(t, h, `{"command": "garbage"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameExecOutput, false)
		require.ErrorContains(t, err, "something other than one JSON value")
		_, err = invoke(t, h, `{"command": "big"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameExecOutput, false)
		require.ErrorContains(t, err, "more than 2000 bytes")
	})

	t.Run("OnlyAllowListedCommands", func(t *testing.T) {
		t.Parallel()
		err := h.Validate(json.RawMessage(`{"command": "sh"}`))
		require.ErrorContains(t, err, `command "sh" is not allow-listed on this host (allowed: big, echo, echo-fixed, empty, fail, garbage, hang)`)
		_, err = invokeUnchecked(t, h, `{"command": "/bin/sh"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameInvalidConfig, false)

		err = h.Validate(json.RawMessage(`{"command": "echo-fixed", "args": ["x"]}`))
		require.ErrorContains(t, err, `args: command "echo-fixed" takes no arguments from flows`)
		_, err = invokeUnchecked(t, h, `{"command": "echo-fixed", "args": ["x"]}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameInvalidConfig, false)

		// By default nothing can run.
		def := handler(t, flow.TypeExec)
		require.ErrorContains(t, def.Validate(json.RawMessage(`{"command": "echo"}`)), "(allowed: none)")
	})

	t.Run("Config", func(t *testing.T) {
		t.Parallel()
		_, err := flow.NewExecHandler(&flow.ExecHandlerConfig{Commands: []flow.ExecCommand{{Name: "x", Path: "bin/x"}}})
		require.ErrorContains(t, err, "is not absolute")
		_, err = flow.NewExecHandler(&flow.ExecHandlerConfig{Commands: []flow.ExecCommand{{Path: "/bin/true"}}})
		require.ErrorContains(t, err, "no name")
		_, err = flow.NewExecHandler(&flow.ExecHandlerConfig{Commands: []flow.ExecCommand{{Name: "a", Path: "/bin/true"}, {Name: "a", Path: "/bin/false"}}})
		require.ErrorContains(t, err, "listed twice")
	})

}
