package cli

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestTickFiresDueSchedules checks that a tick fires the due schedules
// before it runs due work, so a host driven by ticks alone starts scheduled
// instances too.
func TestTickFiresDueSchedules(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	workflow.MustRegister(h.Registry, "report", func(context.Context, workflow.Event[struct{}], workflow.Step) (string, error) { return "ok", nil })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sched, err := schedule.New(&schedule.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: log})
	require.NoError(t, err)
	_, err = sched.Create(h.Context(), schedule.CreateRequest{ID: "s", WorkflowName: "report", Cron: "*/5 * * * *"})
	require.NoError(t, err)
	h.Advance(5 * time.Minute)

	host := &host{scheduler: sched, log: log}
	var ran []string
	tick := host.tickFunc(func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
		page, err := h.Client.List(ctx, client.ListParams{WorkflowName: "report"})
		require.NoError(t, err)
		for _, inst := range page.Instances {
			ran = append(ran, inst.ID)
		}
		return 42, nil
	})
	res, err := tick(h.Context(), 10, 0)
	require.NoError(t, err)
	require.Equal(t, 42, res)
	require.Len(t, ran, 1, "the instance was started before the runner's tick")
	require.True(t, strings.HasPrefix(ran[0], schedule.InstanceIDPrefix("s", testharness.DefaultStart.Add(5*time.Minute))+"-"), ran[0])
}
