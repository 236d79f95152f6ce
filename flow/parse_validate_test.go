package flow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

// problemPaths returns "path: message" of each problem.
func problemPaths(t *testing.T, err error) map[string]string {
	t.Helper()
	ve, ok := err.(*flow.ValidationError)
	require.True(t, ok, "%T: %v", err, err)
	out := map[string]string{}
	for _, p := range ve.Problems {
		out[p.Path] = p.Message
	}
	return out
}

// TestParseAndValidateReportsEveryProblem: unknown fields (every one of
// them) are reported together with what the definition means, not instead
// of it; a problem of meaning where the shape was wrong already is not
// repeated.
func TestParseAndValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	def := []byte(`{"id": "order", "version": 2, "initialStepId": "nowhere", "colour": "red",
	  "steps": {
	    "a": {"id": "a", "type": "set", "config": {"values": {}}, "retrys": 3, "transitions": {"onSuccess": "gone"}},
	    "b": {"id": "b", "type": "teleport"}}}`)

	// Parse alone stops at the shape.
	_, err := flow.Parse(def)
	shape := problemPaths(t, err)
	require.Len(t, shape, 3, "%v", shape)

	_, _, err = flow.ParseAndValidate(def, nil)
	all := problemPaths(t, err)
	require.Equal(t, `unknown field "colour"`, all["colour"])
	require.Equal(t, `unknown field "retrys"`, all["steps.a.retrys"])
	require.Contains(t, all["version"], "must be a string")
	require.NotContains(t, all["version"], "required", "the wrong type is reported once")
	require.Contains(t, all, "initialStepId", "%v", all)
	require.Contains(t, all, "steps.a.transitions.onSuccess", "%v", all)
	require.Contains(t, all, "steps.b.type", "%v", all)
	require.Contains(t, all, "steps.a.config.values", "%v", all)
	require.Len(t, all, 7, "%v", all)
	require.ErrorIs(t, err, flow.ErrInvalidDefinition)

	// A valid definition, and one whose only problems are of meaning, come
	// out as Parse and Validate have them.
	d, warnings, err := flow.ParseAndValidate([]byte(validFlow), nil)
	require.NoError(t, err)
	require.Equal(t, "order", d.ID)
	require.Empty(t, warnings)
	_, _, err = flow.ParseAndValidate([]byte(`{"id": "x", "version": "1.0.0", "initialStepId": "a", "steps": {}}`), nil)
	require.Contains(t, problemPaths(t, err), "steps")

	// Malformed JSON is one problem, as before.
	_, _, err = flow.ParseAndValidate([]byte(`{"id": `), nil)
	require.Len(t, problemPaths(t, err), 1)
}
