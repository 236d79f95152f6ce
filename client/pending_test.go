package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestGetShowsPendingSteps: Get of a waiting or paused instance says what
// it waits on, from its step rows: an event and its timeout, a sleep's
// wake time, a step's next attempt with its error, a child; parallel
// waits are all listed, and a terminal instance has none.
func TestGetShowsPendingSteps(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		ctx := h.Context()
		workflow.MustRegister(h.Registry, "event", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.WaitForEvent[string](step, "wait for approval", workflow.WaitOptions{Type: "approval", Timeout: time.Hour})
		})
		workflow.MustRegister(h.Registry, "sleep", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return "", step.Sleep("nap", 2*time.Hour)
		})
		workflow.MustRegister(h.Registry, "retry", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "call", func(context.Context) (string, error) {
				return "", errors.New("connection refused")
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: 4, Delay: time.Minute, Backoff: workflow.BackoffConstant}))
		})
		workflow.MustRegister(h.Registry, "child", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.WaitForEvent[string](step, "hold", workflow.WaitOptions{Type: "go"})
		})
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, _ workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Invoke[string](step, "kid", workflow.InvokeOptions{Workflow: "child", ID: "k1"})
		})
		for _, name := range []string{"event", "sleep", "retry", "parent"} {
			_, err := h.Client.Create(ctx, name, dftype.CreateRequest{ID: "i1"})
			require.NoError(t, err)
		}
		start := h.Now()
		// Run what is due without moving the clock (RunUntilIdle would
		// jump to the sleep and the retries).
		for h.RunDue() > 0 {
		}

		get := func(name string) *dftype.InstanceInfo {
			t.Helper()
			info, err := h.Client.Get(ctx, name, "i1")
			require.NoError(t, err)
			return info
		}
		at := func(d time.Duration) *time.Time { t := start.Add(d); return &t }

		info := get("event")
		require.Equal(t, dftype.StatusWaiting, info.Status)
		require.Len(t, info.Pending, 1)
		p := info.Pending[0]
		require.Equal(t, dftype.PendingStep{Step: "wait for approval", Kind: dftype.PendingEvent, EventType: "approval", Until: p.Until}, *p)
		require.WithinDuration(t, *at(time.Hour), *p.Until, time.Second)

		p = get("sleep").Pending[0]
		require.Equal(t, dftype.PendingSleep, p.Kind)
		require.Equal(t, "nap", p.Step)
		require.WithinDuration(t, *at(2 * time.Hour), *p.Until, time.Second)

		p = get("retry").Pending[0]
		require.Equal(t, dftype.PendingRetry, p.Kind)
		require.Equal(t, "call", p.Step)
		require.Equal(t, 2, p.Attempt)
		require.Equal(t, 5, p.MaxAttempts)
		require.Equal(t, &dftype.ErrorInfo{Name: "Error", Message: "connection refused"}, p.Error)
		require.WithinDuration(t, *at(time.Minute), *p.Until, 13*time.Second, "a minute, ±20% jitter")

		info = get("parent")
		require.Len(t, info.Pending, 1)
		p = info.Pending[0]
		require.Equal(t, dftype.PendingChild, p.Kind)
		require.Equal(t, "kid", p.Step)
		require.NotNil(t, p.Child)
		require.Equal(t, "child", p.Child.WorkflowName)
		require.Equal(t, "k1", p.Child.ID)
		require.Equal(t, dftype.StatusWaiting, p.Child.Status)

		// Paused, it still says what it waits on.
		_, err := h.Client.Pause(ctx, "event", "i1")
		require.NoError(t, err)
		info = get("event")
		require.Equal(t, dftype.StatusPaused, info.Status)
		require.Len(t, info.Pending, 1)

		// Terminal: nothing pending.
		_, err = h.Client.Terminate(ctx, "sleep", "i1")
		require.NoError(t, err)
		require.Empty(t, get("sleep").Pending)

		// Lists leave it out.
		list, err := h.Client.List(ctx, client.ListParams{WorkflowName: "retry"})
		require.NoError(t, err)
		require.Len(t, list.Instances, 1)
		require.Empty(t, list.Instances[0].Pending)
	})
}
