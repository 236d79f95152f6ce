package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// stepsParams is the input of the steps workflow: how many Do steps it
// takes, and after how many it sleeps once (0: never), so that the rest
// run in a later pass that replays the first ones.
type stepsParams struct {
	Steps, SleepAfter int
}

// stepsWorkflow takes Steps Do steps and returns how many it took.
var stepsWorkflow = func(ctx context.Context, ev workflow.Event[stepsParams], step workflow.Step) (int, error) {
	for i := range ev.Payload.Steps {
		if i > 0 && i == ev.Payload.SleepAfter {
			if err := step.Sleep("pause", time.Minute); err != nil {
				return 0, err
			}
		}
		if _, err := workflow.Do(step, fmt.Sprintf("s-%d", i), func(ctx context.Context) (int, error) { return i, nil }); err != nil {
			return 0, err
		}
	}
	return ev.Payload.Steps, nil
}

// runSteps creates an instance of the workflow with p, runs it until idle
// and returns it.
func runSteps(t *testing.T, h *testharness.Harness, workflowName, id string, p stepsParams) *dftype.InstanceInfo {
	t.Helper()
	params, err := json.Marshal(p)
	require.NoError(t, err)
	_, err = h.Client.Create(h.Context(), workflowName, dftype.CreateRequest{ID: id, Params: params})
	require.NoError(t, err)
	h.RunUntilIdle()
	return h.Status(workflowName, id)
}

// requireTooManySteps requires that the instance errored at the step past
// limit.
func requireTooManySteps(t *testing.T, info *dftype.InstanceInfo, limit int) {
	t.Helper()
	require.Equal(t, dftype.StatusErrored, info.Status)
	require.NotNil(t, info.Error)
	require.Contains(t, info.Error.Message, fmt.Sprintf("the limit is %d Do, WaitForEvent and Invoke steps per run (step \"s-%d\")", limit, limit))
}

// TestEngineLimitsStepsPerRun: the runner holds a run to its host's
// EngineLimits.MaxStepsPerRun, raised past the default or lowered, and to
// a workflow's own WithMaxStepsPerRun, which wins either way; steps
// replayed in a later pass count as in the first.
func TestEngineLimitsStepsPerRun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("RaisedPastTheDefault", func(t *testing.T) {
			t.Parallel()
			limit := workflow.MaxStepsPerRun + 6
			h := testharness.New(t, testharness.WithBackend(b), testharness.WithEngineLimits(workflow.EngineLimits{MaxStepsPerRun: limit}))
			workflow.MustRegister(h.Registry, "steps", stepsWorkflow)
			info := runSteps(t, h, "steps", "at-limit", stepsParams{Steps: limit})
			require.Equal(t, dftype.StatusComplete, info.Status, "%+v", info.Error)
			require.JSONEq(t, fmt.Sprint(limit), string(info.Output))
			requireTooManySteps(t, runSteps(t, h, "steps", "past-limit", stepsParams{Steps: limit + 1}), limit)
		})
		t.Run("Lowered", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b), testharness.WithEngineLimits(workflow.EngineLimits{MaxStepsPerRun: 5}))
			workflow.MustRegister(h.Registry, "steps", stepsWorkflow)
			require.Equal(t, dftype.StatusComplete, runSteps(t, h, "steps", "five", stepsParams{Steps: 5}).Status)
			requireTooManySteps(t, runSteps(t, h, "steps", "six", stepsParams{Steps: 6}), 5)
			// Three steps, a sleep, then the pass after it replays the
			// three and stops at the sixth.
			requireTooManySteps(t, runSteps(t, h, "steps", "replayed", stepsParams{Steps: 6, SleepAfter: 3}), 5)
		})
		t.Run("WorkflowsOwn", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b), testharness.WithEngineLimits(workflow.EngineLimits{MaxStepsPerRun: 5}))
			workflow.MustRegister(h.Registry, "higher", stepsWorkflow, workflow.WithMaxStepsPerRun(8))
			workflow.MustRegister(h.Registry, "lower", stepsWorkflow, workflow.WithMaxStepsPerRun(2))
			workflow.MustRegister(h.Registry, "host", stepsWorkflow)
			require.Equal(t, dftype.StatusComplete, runSteps(t, h, "higher", "eight", stepsParams{Steps: 8}).Status)
			requireTooManySteps(t, runSteps(t, h, "higher", "nine", stepsParams{Steps: 9}), 8)
			requireTooManySteps(t, runSteps(t, h, "lower", "three", stepsParams{Steps: 3}), 2)
			requireTooManySteps(t, runSteps(t, h, "host", "six", stepsParams{Steps: 6}), 5)
		})
	})
}

// bigParams is the input of the payload workflow: the sizes of its step
// result and of its output, in bytes.
type bigParams struct{ Result, Output int }

// payloadWorkflow returns a step result and an output of the sizes its
// params ask for (each a JSON string of that many bytes, quotes
// included).
var payloadWorkflow = func(ctx context.Context, ev workflow.Event[bigParams], step workflow.Step) (string, error) {
	if _, err := workflow.Do(step, "big", func(ctx context.Context) (string, error) {
		return strings.Repeat("r", ev.Payload.Result-2), nil
	}); err != nil {
		return "", err
	}
	return strings.Repeat("o", ev.Payload.Output-2), nil
}

// TestEngineLimitsPayloads: the runner stores step results and outputs up
// to its EngineLimits.MaxPayloadBytes, past the default when it is raised,
// and fails a step or the run past it when it is lowered; the client takes
// params and events up to it.
func TestEngineLimitsPayloads(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("RaisedPastTheDefault", func(t *testing.T) {
			t.Parallel()
			limit := 2 << 20
			h := testharness.New(t, testharness.WithBackend(b), testharness.WithEngineLimits(workflow.EngineLimits{MaxPayloadBytes: limit}))
			workflow.MustRegister(h.Registry, "payload", payloadWorkflow)
			size := workflow.MaxPayloadBytes + 1000
			params, err := json.Marshal(bigParams{Result: size, Output: size})
			require.NoError(t, err)
			_, err = h.Client.Create(h.Context(), "payload", dftype.CreateRequest{ID: "big", Params: params})
			require.NoError(t, err)
			h.RunUntilIdle()
			info := h.RequireStatus("payload", "big", dftype.StatusComplete)
			require.Len(t, info.Output, size)
			hist := h.History("payload", "big")
			require.Len(t, hist.Steps, 1)
			require.Len(t, hist.Steps[0].Result, size)

			_, err = h.Client.Create(h.Context(), "payload", dftype.CreateRequest{ID: "big-params",
				Params: json.RawMessage(`{"Result":3,"Output":3,"pad":"` + strings.Repeat("p", size) + `"}`)})
			require.NoError(t, err, "params past the default, within the raised limit")
			_, err = h.Client.Create(h.Context(), "payload", dftype.CreateRequest{ID: "too-big",
				Params: json.RawMessage(`{"pad":"` + strings.Repeat("p", limit) + `"}`)})
			require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
		})
		t.Run("Lowered", func(t *testing.T) {
			t.Parallel()
			limit := 4 << 10
			h := testharness.New(t, testharness.WithBackend(b), testharness.WithEngineLimits(workflow.EngineLimits{MaxPayloadBytes: limit}))
			workflow.MustRegister(h.Registry, "payload", payloadWorkflow)
			for _, tc := range []struct {
				id   string
				p    bigParams
				want string
			}{
				{"result", bigParams{Result: limit + 1, Output: 3}, fmt.Sprintf(`result of step "big" is %d bytes, the limit is %d`, limit+1, limit)},
				{"output", bigParams{Result: 3, Output: limit + 1}, fmt.Sprintf("workflow output is %d bytes, the limit is %d", limit+1, limit)},
			} {
				params, err := json.Marshal(tc.p)
				require.NoError(t, err)
				_, err = h.Client.Create(h.Context(), "payload", dftype.CreateRequest{ID: tc.id, Params: params})
				require.NoError(t, err)
				h.RunUntilIdle()
				info := h.RequireStatus("payload", tc.id, dftype.StatusErrored)
				require.Contains(t, info.Error.Message, tc.want)
			}
			params, err := json.Marshal(bigParams{Result: limit, Output: limit})
			require.NoError(t, err)
			_, err = h.Client.Create(h.Context(), "payload", dftype.CreateRequest{ID: "at-limit", Params: params})
			require.NoError(t, err)
			h.RunUntilIdle()
			h.RequireStatus("payload", "at-limit", dftype.StatusComplete)

			_, err = h.Client.Create(h.Context(), "payload", dftype.CreateRequest{ID: "big-params",
				Params: json.RawMessage(`{"pad":"` + strings.Repeat("p", limit) + `"}`)})
			require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
			err = h.Client.SendEvent(h.Context(), "payload", "at-limit", "e", json.RawMessage(`"`+strings.Repeat("e", limit)+`"`))
			require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
		})
	})
}

// TestEngineLimitsDefaults: a zero EngineLimits is the engine's default
// limits, and the runner refuses settings outside their ranges.
func TestEngineLimitsDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, workflow.EngineLimits{MaxPayloadBytes: 1 << 20, MaxStepsPerRun: 1024, MaxBatchSize: 100}, workflow.DefaultEngineLimits())
	require.Equal(t, workflow.DefaultEngineLimits(), workflow.EngineLimits{}.WithDefaults())
	store := sqlitetest.NewStore(t)
	for _, tc := range []struct {
		limits workflow.EngineLimits
		msg    string
	}{
		{workflow.EngineLimits{MaxStepsPerRun: -1}, "runner: Config.EngineLimits.MaxStepsPerRun -1 must be between 1 and 100000"},
		{workflow.EngineLimits{MaxStepsPerRun: 100_001}, "runner: Config.EngineLimits.MaxStepsPerRun 100001 must be between 1 and 100000"},
		{workflow.EngineLimits{MaxPayloadBytes: 1023}, "runner: Config.EngineLimits.MaxPayloadBytes 1023 must be between 1024 and 67108864"},
		{workflow.EngineLimits{MaxBatchSize: 1001}, "runner: Config.EngineLimits.MaxBatchSize 1001 must be between 1 and 1000"},
	} {
		_, err := runner.New(&runner.Config{Store: store, Registry: workflow.NewRegistry(), EngineLimits: tc.limits})
		require.EqualError(t, err, tc.msg)
	}
	r, err := runner.New(&runner.Config{Store: store, Registry: workflow.NewRegistry(),
		EngineLimits: workflow.EngineLimits{MaxStepsPerRun: 100_000, MaxPayloadBytes: 64 << 20, MaxBatchSize: 1000}})
	require.NoError(t, err, "the ends of the ranges are taken")
	require.NotNil(t, r)
}
