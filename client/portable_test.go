package client_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestPayloadPortable sends params, metadata and event payloads that are
// valid JSON but that Postgres' jsonb refuses (or SQLite would keep and Go
// could not decode): both backends refuse them alike with ErrInvalidRequest,
// before anything is written.
func TestPayloadPortable(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _ := setup(t, b)
		ctx := h.Context()
		for _, p := range []string{`{"a":"\u0000"}`, `"\udc00"`, "\"\xff\"", `[1e999999]`, `1e-10000`} {
			_, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{Params: json.RawMessage(p)})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest, "params %q", p)
			_, err = h.Client.Create(ctx, "greet", dftype.CreateRequest{Metadata: json.RawMessage(`{"m":` + p + `}`)})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest, "metadata %q", p)
		}
		requireNothingWritten(t, h)

		info, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "g", Params: json.RawMessage(`{"a":"\ud83d\ude00 \\u0000"}`)})
		require.NoError(t, err)
		require.ErrorIs(t, h.Client.SendEvent(ctx, "greet", info.ID, "ping", json.RawMessage(`"\u0000"`)), workflow.ErrInvalidRequest)
	})
}
