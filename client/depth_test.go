package client_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestPayloadDepth sends params, metadata and event payloads nested past
// workflow.MaxPayloadDepth (and past SQLite's and Go's own limits) through
// the client on both backends: each is refused with ErrPayloadTooDeep and
// nothing is written; at the limit they are taken.
func TestPayloadDepth(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _ := setup(t, b)
		ctx := h.Context()
		deep := func(n int) json.RawMessage {
			return json.RawMessage(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n))
		}
		for _, n := range []int{workflow.MaxPayloadDepth + 1, 1001, 10001} {
			_, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{Params: deep(n)})
			require.ErrorIs(t, err, workflow.ErrPayloadTooDeep, "params %d", n)
			_, err = h.Client.Create(ctx, "greet", dftype.CreateRequest{Metadata: deep(n)})
			require.ErrorIs(t, err, workflow.ErrPayloadTooDeep, "metadata %d", n)
			_, err = h.Client.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "ok"}, {Params: deep(n)}})
			require.ErrorIs(t, err, workflow.ErrPayloadTooDeep, "batch %d", n)
		}
		requireNothingWritten(t, h)

		info, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "g", Params: deep(workflow.MaxPayloadDepth)})
		require.NoError(t, err)
		got, err := h.Client.Get(ctx, "greet", info.ID)
		require.NoError(t, err)
		require.Equal(t, workflow.MaxPayloadDepth, workflow.PayloadDepth(got.Params))

		err = h.Client.SendEvent(ctx, "greet", "g", "ping", deep(workflow.MaxPayloadDepth+1))
		require.ErrorIs(t, err, workflow.ErrPayloadTooDeep)
		require.NoError(t, h.Client.SendEvent(ctx, "greet", "g", "ping", deep(workflow.MaxPayloadDepth)))
	})
}
