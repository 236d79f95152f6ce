package client_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestCreateRefusesParamsThatDoNotDecode: params that cannot decode into a
// registered workflow's params type are refused by every create (one, a
// batch, in a transaction) with ErrInvalidRequest and the decoder's
// message, and nothing is written; params that decode, and null, pass.
func TestCreateRefusesParamsThatDoNotDecode(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _, c, _, _ := setupTx(t, b)
		ctx := h.Context()
		const wantMsg = `decoding params of workflow "greet": json: cannot unmarshal string into Go value of type client_test.params`
		bad := json.RawMessage(`"Ada"`)

		_, err := c.Create(ctx, "greet", dftype.CreateRequest{ID: "g1", Params: bad})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		require.ErrorContains(t, err, wantMsg)

		_, err = c.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "g2", Params: json.RawMessage(`{"name":"Bo"}`)}, {ID: "g3", Params: bad}})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		require.ErrorContains(t, err, "instance 1: ")
		require.ErrorContains(t, err, wantMsg)

		tx := beginApp(t, h.Store)
		_, _, err = c.CreateTx(ctx, tx.tx, "greet", dftype.CreateRequest{ID: "g4", Params: json.RawMessage(`{"name":42}`)})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		require.ErrorContains(t, err, "cannot unmarshal number into Go struct field params.name of type string")
		require.NoError(t, tx.rollback())
		requireNothingWritten(t, h)

		for id, p := range map[string]string{"ok1": `{"name":"Ada"}`, "ok2": `null`, "ok3": ``, "ok4": `{"unknown":1}`} {
			_, err := c.Create(ctx, "greet", dftype.CreateRequest{ID: id, Params: json.RawMessage(p)})
			require.NoError(t, err, p)
		}
	})
}
