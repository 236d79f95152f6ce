package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// TestEngineLimitsRefusedOutOfRange: dev, serve and worker refuse an
// engine limit outside its range at start (exit 2), naming the flag, the
// value and the range, from a flag or its variable.
func TestEngineLimitsRefusedOutOfRange(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		env  map[string]string
		msg  string
	}{
		{"StepsZero", []string{"worker", "--max-steps-per-run", "0"}, nil, "--max-steps-per-run 0 must be between 1 and 100000"},
		{"StepsPastTheRange", []string{"serve", "--addr", "127.0.0.1:0", "--max-steps-per-run", "100001"}, nil, "--max-steps-per-run 100001 must be between 1 and 100000"},
		{"StepsFromEnvironment", []string{"worker"}, map[string]string{"DURAFLOW_MAX_STEPS_PER_RUN": "-5"}, "--max-steps-per-run -5 must be between 1 and 100000"},
		{"PayloadTooSmall", []string{"dev", "--addr", "127.0.0.1:0", "--max-payload-bytes", "100"}, nil, "--max-payload-bytes 100 must be between 1024 and 67108864"},
		{"PayloadPastTheRange", []string{"worker"}, map[string]string{"DURAFLOW_MAX_PAYLOAD_BYTES": "67108865"}, "--max-payload-bytes 67108865 must be between 1024 and 67108864"},
		{"BatchPastTheRange", []string{"serve", "--addr", "127.0.0.1:0", "--max-batch-size", "1001"}, nil, "--max-batch-size 1001 must be between 1 and 1000"},
		{"BodyPastTheRaisedPayload", []string{"serve", "--addr", "127.0.0.1:0", "--max-payload-bytes", "2097152", "--max-body-bytes", "2162689"}, nil, "--max-body-bytes 2162689 must be between 1 and 2162688"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DURAFLOW_DATABASE_URL": sqliteDB(t)}
			for k, v := range tc.env {
				env[k] = v
			}
			r := run(t, env, tc.args...)
			require.Equal(t, cli.ExitUsage, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}
}

// loopParams is the input of the loop workflow: how many steps to take.
type loopParams struct{ Steps int }

// registerLoop registers "loop", which takes Steps Do steps, and
// "loop-own", the same registered with a bound of its own of 8.
func registerLoop(reg *workflow.Registry) error {
	loop := func(ctx context.Context, ev workflow.Event[loopParams], step workflow.Step) (int, error) {
		for i := range ev.Payload.Steps {
			if _, err := workflow.Do(step, fmt.Sprintf("s-%d", i), func(ctx context.Context) (int, error) { return i, nil }); err != nil {
				return 0, err
			}
		}
		return ev.Payload.Steps, nil
	}
	if _, err := workflow.Register(reg, "loop", loop); err != nil {
		return err
	}
	_, err := workflow.Register(reg, "loop-own", loop, workflow.WithMaxStepsPerRun(8))
	return err
}

// TestEngineLimitsFromTheCommand: the engine limits of serve's flags and
// variables are its client's, runner's and API's: a payload past the
// default but within --max-payload-bytes is created, stored and run; a
// batch past the default but within --max-batch-size is created; a run
// stops at --max-steps-per-run steps, unless its workflow has a bound of
// its own.
func TestEngineLimitsFromTheCommand(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--max-payload-bytes", "2097152", "--max-batch-size", "150"},
		cli.WithWorkflows(registerLoop), cli.WithLookupEnv(envMap(map[string]string{"DURAFLOW_MAX_STEPS_PER_RUN": "5"})))
	api := apiclient.New(s.url, "", nil)
	ctx := context.Background()
	c := s.client(t)

	name := strings.Repeat("x", 3<<19) // 1.5 MiB: past the default limit
	_, err := api.Create(ctx, "hello", dftype.CreateRequest{ID: "big", Params: json.RawMessage(`{"name":"` + name + `"}`)})
	require.NoError(t, err)
	c.waitStatus("hello", "big", "complete")
	_, err = api.Create(ctx, "hello", dftype.CreateRequest{ID: "too-big", Params: json.RawMessage(`{"name":"` + strings.Repeat("x", 2<<20) + `"}`)})
	require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)

	batch := make([]dftype.CreateRequest, 150)
	for i := range batch {
		batch[i] = dftype.CreateRequest{ID: fmt.Sprintf("b-%d", i), Params: json.RawMessage(`{"name":"Ada"}`)}
	}
	created, err := api.CreateBatch(ctx, "hello", batch)
	require.NoError(t, err)
	require.Len(t, created, 150)
	_, err = api.CreateBatch(ctx, "hello", append(batch, dftype.CreateRequest{ID: "b-150"}))
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)

	_, err = api.Create(ctx, "loop", dftype.CreateRequest{ID: "five", Params: json.RawMessage(`{"Steps":5}`)})
	require.NoError(t, err)
	c.waitStatus("loop", "five", "complete")
	_, err = api.Create(ctx, "loop", dftype.CreateRequest{ID: "six", Params: json.RawMessage(`{"Steps":6}`)})
	require.NoError(t, err)
	info := c.waitStatus("loop", "six", "errored")
	require.Contains(t, fmt.Sprint(info["details"]), "the limit is 5 Do, WaitForEvent and Invoke steps per run")
	_, err = api.Create(ctx, "loop-own", dftype.CreateRequest{ID: "eight", Params: json.RawMessage(`{"Steps":8}`)})
	require.NoError(t, err)
	c.waitStatus("loop-own", "eight", "complete")
}

// TestEngineLimitsDefaults: without the flags, the engine's limits are
// their defaults, and --help says so with their ranges.
func TestEngineLimitsDefaults(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"dev", "serve", "worker"} {
		r := run(t, nil, cmd, "--help")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
		require.Regexp(t, `--max-payload-bytes int\s+.*\(1024 to 67108864\) \[\$DURAFLOW_MAX_PAYLOAD_BYTES\] \(default 1048576\)`, r.stdout, cmd)
		require.Regexp(t, `--max-steps-per-run int\s+.*\(1 to 100000\) \[\$DURAFLOW_MAX_STEPS_PER_RUN\] \(default 1024\)`, r.stdout, cmd)
		require.Regexp(t, `--max-batch-size int\s+.*\(1 to 1000\) \[\$DURAFLOW_MAX_BATCH_SIZE\] \(default 100\)`, r.stdout, cmd)
	}
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--runner=false"})
	api := apiclient.New(s.url, "", nil)
	_, err := api.Create(context.Background(), "hello", dftype.CreateRequest{ID: "big", Params: json.RawMessage(`{"name":"` + strings.Repeat("x", 1<<20) + `"}`)})
	require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
	require.ErrorContains(t, err, "the limit is 1048576")
}
