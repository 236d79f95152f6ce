package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestUnservedQueueIsVisible: a live instance on a queue no online worker
// serves says so in Get and List; once a worker that serves the queue is
// online (and the client's read of the workers is older than its TTL), it
// no longer does; terminal instances are never marked.
func TestUnservedQueueIsVisible(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "pay", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "ok", nil
		},
			workflow.WithQueue("payments"))
		c, err := client.New(&client.Config{Store: store, Registry: reg, Clock: clk})
		require.NoError(t, err)

		_, err = c.Create(ctx, "pay", dftype.CreateRequest{ID: "a"})
		require.NoError(t, err)
		_, err = c.Create(ctx, "pay", dftype.CreateRequest{ID: "b", Queue: "other"})
		require.NoError(t, err)
		_, err = c.Create(ctx, "pay", dftype.CreateRequest{ID: "done"})
		require.NoError(t, err)
		_, err = c.Terminate(ctx, "pay", "done")
		require.NoError(t, err)

		info, err := c.Get(ctx, "pay", "a")
		require.NoError(t, err)
		require.True(t, info.Unserved, "no worker is online")

		_, err = store.WorkerRegister(ctx, &db.WorkerRegisterParams{
			ID: "w1", Hostname: "h", PID: 1, Queues: []string{"payments"}, Workflows: []string{"pay"},
			MaxConcurrency: 1, Now: clk.Now(),
		})
		require.NoError(t, err)
		info, err = c.Get(ctx, "pay", "a")
		require.NoError(t, err)
		require.True(t, info.Unserved, "the client's read of the workers is younger than its TTL")

		clk.Add(client.ServedQueuesTTL)
		list, err := c.List(ctx, client.ListParams{WorkflowName: "pay"})
		require.NoError(t, err)
		unserved := map[string]bool{}
		for _, i := range list.Instances {
			unserved[i.ID] = i.Unserved
		}
		require.Equal(t, map[string]bool{"a": false, "b": true, "done": false}, unserved)

		// A worker that serves every queue serves them all.
		_, err = store.WorkerRegister(ctx, &db.WorkerRegisterParams{
			ID: "w2", Hostname: "h", PID: 2, Queues: []string{"*"}, Workflows: []string{"pay"},
			MaxConcurrency: 1, Now: clk.Now(),
		})
		require.NoError(t, err)
		clk.Add(client.ServedQueuesTTL)
		info, err = c.Get(ctx, "pay", "b")
		require.NoError(t, err)
		require.False(t, info.Unserved)
	})
}

// TestNamespaceViewMayNotActOnTheFleet: a queue's limits and a worker's
// drain act outside namespaces, so a namespace's view may not call them.
func TestNamespaceViewMayNotActOnTheFleet(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	view := h.Client.Namespace("acme")
	_, err := view.SetQueueLimits(h.Context(), "default", client.QueueLimits{MaxRunning: 1})
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	_, err = view.DrainWorker(h.Context(), "anyone")
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	_, err = h.Client.GetQueue(h.Context(), "default")
	require.ErrorIs(t, err, workflow.ErrQueueNotFound, "the refused set wrote nothing")
}
