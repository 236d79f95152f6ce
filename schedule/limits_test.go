package schedule_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestFireAdmitsUnderLimits checks that a schedule's instances of a
// limited workflow are admitted as created ones are: with a max running of
// 1 and an instance that waits for an event, the next firing's instance
// waits for the slot, and runs once the first ends.
func TestFireAdmitsUnderLimits(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithStart(start))
		workflow.MustRegister(h.Registry, "gated", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
			_, err := step.WaitForEvent("gate", workflow.WaitOptions{Type: "go"})
			return "done", err
		}, workflow.WithMaxRunning(1))
		s, err := schedule.New(&schedule.Config{
			Store: h.Store, Registry: h.Registry, Clock: h.Clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LimitsFunc: h.Client.LimitSpecs,
		})
		require.NoError(t, err)
		ctx := h.Context()
		_, err = s.Create(ctx, schedule.CreateRequest{ID: "g", WorkflowName: "gated", Cron: "*/5 * * * *"})
		require.NoError(t, err)

		h.Advance(5 * time.Minute)
		res, err := s.FireDue(ctx)
		require.NoError(t, err)
		require.Len(t, res.Started, 1)
		first := res.Started[0].InstanceID
		h.RunDue()
		h.Advance(5 * time.Minute)
		res, err = s.FireDue(ctx)
		require.NoError(t, err)
		require.Len(t, res.Started, 1)
		second := res.Started[0].InstanceID
		h.RunDue()

		h.RequireStatus("gated", first, dftype.StatusWaiting)
		waiting := h.RequireStatus("gated", second, dftype.StatusQueued)
		require.NotNil(t, waiting.WaitingFor, "the scheduled instance waits for the slot")
		h.SendEvent("gated", first, "go", nil)
		h.RunDue()
		h.RunDue()
		h.RequireStatus("gated", first, dftype.StatusComplete)
		h.RequireStatus("gated", second, dftype.StatusWaiting)
	})
}

// TestFireSetsTheWorkflowsDeadline checks that a schedule's instances get
// their workflow's deadline (workflow.WithDeadline), limited or not, as
// created ones do.
func TestFireSetsTheWorkflowsDeadline(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithStart(start))
		wait := func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
			_, err := step.WaitForEvent("gate", workflow.WaitOptions{Type: "go"})
			return "done", err
		}
		workflow.MustRegister(h.Registry, "timed", wait, workflow.WithDeadline(time.Hour))
		workflow.MustRegister(h.Registry, "timedLimited", wait, workflow.WithDeadline(time.Hour), workflow.WithMaxRunning(5))
		s, err := schedule.New(&schedule.Config{
			Store: h.Store, Registry: h.Registry, Clock: h.Clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), LimitsFunc: h.Client.LimitSpecs,
		})
		require.NoError(t, err)
		ctx := h.Context()
		for _, name := range []string{"timed", "timedLimited"} {
			_, err = s.Create(ctx, schedule.CreateRequest{ID: name, WorkflowName: name, Cron: "*/5 * * * *"})
			require.NoError(t, err)
		}
		h.Advance(5 * time.Minute)
		res, err := s.FireDue(ctx)
		require.NoError(t, err)
		require.Len(t, res.Started, 2)
		for _, st := range res.Started {
			name := st.WorkflowName
			inst, err := h.Client.Get(ctx, name, st.InstanceID)
			require.NoError(t, err)
			require.NotNil(t, inst.DeadlineAt, name)
			require.True(t, inst.DeadlineAt.Equal(inst.CreatedAt.Add(time.Hour)), "%s: deadline %s, created %s", name, inst.DeadlineAt, inst.CreatedAt)
		}
	})
}
