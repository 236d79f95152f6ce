package flow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// invoke runs a handler once, as the compiled flow does, with the context
// given as JSON and an optional input selector.
func invoke(t *testing.T, h flow.Handler, config, context string, input *flow.Selector) (any, error) {
	t.Helper()
	require.NoError(t, h.Validate(json.RawMessage(config)), "config %s", config)
	return invokeUnchecked(t, h, config, context, input)
}

// invokeUnchecked runs a handler without validating its config first.
func invokeUnchecked(t *testing.T, h flow.Handler, config, contextJSON string, input *flow.Selector) (any, error) {
	t.Helper()
	var state map[string]any
	dec := json.NewDecoder(strings.NewReader(contextJSON))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&state))
	in, _, err := input.Select(state)
	require.NoError(t, err)
	ctx := wfcore.ContextWithStepInfo(context.Background(), workflow.StepInfo{Step: "s#1", Attempt: 1})
	return h.Run(ctx, &flow.Invocation{FlowID: "f", FlowVersion: "1.0.0", StepID: "s", Visit: 1,
		Config: json.RawMessage(config), Input: in, Context: state})
}

// asJSON encodes a handler result as the runner records it.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// requireFailure asserts a non-retryable (or retryable) step error with a name.
func requireFailure(t *testing.T, err error, name string, retryable bool, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.Equal(t, name, workflow.ErrorName(err), append([]any{"error %v"}, err)...)
	require.Equal(t, !retryable, workflow.IsNonRetryable(err), "retryable? error %v", err)
}

func builtins(t *testing.T, opts ...flow.HandlersOption) *flow.Handlers {
	t.Helper()
	hs, err := flow.NewHandlers(opts...)
	require.NoError(t, err)
	return hs
}

func handler(t *testing.T, typ string) flow.Handler {
	t.Helper()
	h, ok := builtins(t).Lookup(typ)
	require.True(t, ok, typ)
	return h
}

func sel(t *testing.T, js string) *flow.Selector {
	t.Helper()
	var s flow.Selector
	require.NoError(t, json.Unmarshal([]byte(js), &s), js)
	return &s
}
