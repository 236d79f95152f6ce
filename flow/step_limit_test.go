package flow_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// spinFlow loops between a set and a branch step until its run's step
// limit stops it.
var spinFlow = []byte(`{
  "id": "spin", "version": "1.0.0", "initialStepId": "spin",
  "steps": {
    "spin": {"id": "spin", "type": "set", "config": {"values": {"x": {"value": 1}}}, "transitions": {"onSuccess": "again"}},
    "again": {"id": "again", "type": "branch", "config": {"conditions": [{"left": {"path": "x"}, "op": "exists", "next": "spin"}]}}
  }}`)

// TestFlowStepLimit: the flow registry bounds the step visits of a flow's
// run at Config.MaxStepsPerRun, which a host sets from its EngineLimits,
// and registers its flows with it so that the runner lets their steps
// reach it past its own bound.
func TestFlowStepLimit(t *testing.T) {
	t.Parallel()

	t.Run("FromTheHostsEngineLimits", func(t *testing.T) {
		t.Parallel()
		reg := workflow.NewRegistry()
		host, err := duraflow.New(testharness.SQLiteMemory.NewStore(t), &duraflow.Config{
			Registry: reg, RunMode: duraflow.RunOnDemand, DisableScheduler: true, PollOnly: true,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Flows:  &flow.Config{}, EngineLimits: workflow.EngineLimits{MaxStepsPerRun: 7},
		})
		require.NoError(t, err)
		ctx := t.Context()
		_, err = host.Flows().Apply(ctx, spinFlow)
		require.NoError(t, err)
		_, err = host.Client().Create(ctx, "spin", dftype.CreateRequest{ID: "s"})
		require.NoError(t, err)
		for range 3 {
			_, err = host.Runner().RunDue(ctx, 10)
			require.NoError(t, err)
		}
		info, err := host.Client().Get(ctx, "spin", "s")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusErrored, info.Status)
		require.Equal(t, flow.ErrorNameTooManySteps, info.Error.Name)
		require.Contains(t, info.Error.Message, "after 7 step visits")
	})

	t.Run("PastTheRunnersBound", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("1030 checkpoints")
		}
		// The harness's runner keeps the default bound (1024); the
		// registry's own lets the flow's steps go past it.
		limit := workflow.MaxStepsPerRun + 6
		p := newProcessWith(t, testharness.New(t), func(c *flow.Config) { c.MaxStepsPerRun = limit })
		p.apply(spinFlow)
		p.create("spin", "s", `{}`)
		p.h.RunUntilIdle()
		info := p.h.RequireStatus("spin", "s", dftype.StatusErrored)
		require.Equal(t, flow.ErrorNameTooManySteps, info.Error.Name)
		require.Contains(t, info.Error.Message, fmt.Sprintf("after %d step visits", limit))
	})

	t.Run("OutOfRange", func(t *testing.T) {
		t.Parallel()
		h := testharness.New(t)
		_, err := flow.New(&flow.Config{Store: h.Store, Registry: h.Registry, MaxStepsPerRun: workflow.MaxStepsPerRunLimit + 1})
		require.ErrorContains(t, err, "flow: MaxStepsPerRun 100001 must be between 1 and 100000")
	})
}
