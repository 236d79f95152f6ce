package flow_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// keyedFlow waits for a "go" event; its concurrency key is the params'
// customer, at most one at a time.
func keyedFlow(id, limits string) []byte {
	return fmt.Appendf(nil, `{
  "id": %q, "version": "1.0.0", "initialStepId": "wait", %s
  "steps": {
    "wait": {"id": "wait", "type": "wait-for-event", "config": {"type": "go", "timeout": "1 hour"}}
  }
}`, id, limits)
}

// TestFlowLimits checks a flow's concurrency key: one instance per
// customer runs, the next waits (and says so), another customer runs; a
// key the selector cannot find, or that is not a string, refuses the
// create and writes nothing.
func TestFlowLimits(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		p.apply(keyedFlow("charge", `"concurrency": {"key": {"path": "customer.id"}, "max": 1}, "maxRunning": 10,`))
		p.create("charge", "a1", `{"customer": {"id": "a"}}`)
		p.create("charge", "a2", `{"customer": {"id": "a"}}`)
		p.create("charge", "b1", `{"customer": {"id": "b"}}`)
		p.h.RunUntilIdle()
		p.h.RequireStatus("charge", "a1", dftype.StatusWaiting)
		p.h.RequireStatus("charge", "b1", dftype.StatusWaiting)
		a2 := p.h.RequireStatus("charge", "a2", dftype.StatusQueued)
		require.Equal(t, &dftype.WaitingFor{Kind: "concurrency", Scope: "key", Name: "a", Max: 1}, a2.WaitingFor)

		for id, params := range map[string]string{"missing": `{}`, "number": `{"customer": {"id": 7}}`, "null": `null`} {
			_, err := p.client.Create(p.ctx(), "charge", dftype.CreateRequest{ID: id, Params: json.RawMessage(params)})
			require.ErrorIs(t, err, workflow.ErrConcurrencyKey, id)
			_, err = p.client.Get(p.ctx(), "charge", id)
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "a refused create writes nothing")
		}
		p.h.SendEvent("charge", "a1", "go", nil)
		p.h.RunUntilIdle()
		p.h.RequireStatus("charge", "a2", dftype.StatusWaiting)
	})
}

// TestFlowLimitsValidation checks that limits that are not positive and a
// concurrency without a key are problems of the definition.
func TestFlowLimitsValidation(t *testing.T) {
	t.Parallel()
	for name, limits := range map[string]string{
		"maxRunning":             `"maxRunning": 0,`,
		"concurrency.max":        `"concurrency": {"key": {"path": "c"}, "max": 0},`,
		"concurrency.key":        `"concurrency": {"max": 1},`,
		"rateLimit.limit":        `"rateLimit": {"limit": -1, "period": "1 minute"},`,
		"rateLimit.period":       `"rateLimit": {"limit": 5, "period": 0},`,
		"concurrency.rate.limit": `"concurrency": {"key": {"path": "c"}, "max": 1, "rate": {"limit": 0, "period": "1s"}},`,
	} {
		var def flow.Definition
		require.NoError(t, json.Unmarshal(keyedFlow("f", limits), &def), name)
		_, err := flow.Validate(&def, nil)
		var ve *flow.ValidationError
		require.True(t, errors.As(err, &ve), "%s: %v", name, err)
		require.Equal(t, name, ve.Problems[0].Path, "%s: %v", name, ve.Problems)
	}
}
