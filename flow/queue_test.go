package flow_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// withQueue sets the "queue" of a flow definition.
func withQueue(t *testing.T, def []byte, queue string) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(def, &m))
	m["queue"] = queue
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

func TestFlowQueueIsValidated(t *testing.T) {
	t.Parallel()
	def, err := flow.Parse(withQueue(t, quickFlow("q", "1.0.0"), "no spaces"))
	require.NoError(t, err)
	_, err = flow.Validate(def, nil)
	var ve *flow.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	require.Len(t, ve.Problems, 1)
	require.Equal(t, "queue", ve.Problems[0].Path)

	def, err = flow.Parse(withQueue(t, quickFlow("q", "1.0.0"), "payments"))
	require.NoError(t, err)
	_, err = flow.Validate(def, nil)
	require.NoError(t, err)
	require.Equal(t, "payments", def.Queue)
}

// TestFlowInstancesRunOnTheirVersionsQueue: an instance runs on the queue of
// the flow version it is pinned to, unless its create names another, and
// only a runner of that queue runs it.
func TestFlowInstancesRunOnTheirVersionsQueue(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		c, err := client.New(&client.Config{
			Store: p.h.Store, Registry: p.h.Registry, Clock: p.h.Clock,
			MetadataFunc: p.flows.Metadata, QueueFunc: p.flows.Queue,
		})
		require.NoError(t, err)
		ctx := p.ctx()

		p.apply(withQueue(t, quickFlow("f", "1.0.0"), "flows-a"))
		v1, err := c.Create(ctx, "f", dftype.CreateRequest{ID: "one"})
		require.NoError(t, err)
		require.Equal(t, "flows-a", v1.Queue)

		p.apply(quickFlow("f", "2.0.0")) // no queue: the default one
		v2, err := c.Create(ctx, "f", dftype.CreateRequest{ID: "two"})
		require.NoError(t, err)
		require.Equal(t, workflow.DefaultQueue, v2.Queue)

		// A create that pins version 1 gets its queue; one that names a
		// queue gets that.
		pinned, err := flow.WithPin(nil, flow.Pin{ID: "f", Version: "1.0.0"})
		require.NoError(t, err)
		batch, err := c.CreateBatch(ctx, "f", []dftype.CreateRequest{
			{ID: "three", Metadata: pinned}, {ID: "four", Queue: "elsewhere"},
		})
		require.NoError(t, err)
		require.Equal(t, []string{"flows-a", "elsewhere"}, []string{batch[0].Queue, batch[1].Queue})

		def, err := runner.New(&runner.Config{Store: p.h.Store, Registry: p.h.Registry, Clock: p.h.Clock})
		require.NoError(t, err)
		n, err := def.RunDue(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		p.h.RequireStatus("f", "two", dftype.StatusComplete)
		p.h.RequireStatus("f", "one", dftype.StatusQueued)
		r, err := runner.New(&runner.Config{Store: p.h.Store, Registry: p.h.Registry, Clock: p.h.Clock, Queues: []string{"flows-a"}})
		require.NoError(t, err)
		n, err = r.RunDue(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		p.h.RequireStatus("f", "one", dftype.StatusComplete)
		p.h.RequireStatus("f", "three", dftype.StatusComplete)
		p.h.RequireStatus("f", "four", dftype.StatusQueued)
	})
}
