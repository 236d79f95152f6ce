package workflow_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/workflow"
)

// TestValidatePayloadPortable shows the values json.Valid takes that some
// backend cannot store or Go cannot decode: each is ErrInvalidRequest, and
// the values next to them that every backend stores are taken.
func TestValidatePayloadPortable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, payload string
		ok            bool
	}{
		{"plain", `{"a":[1,-2.5,3e10,"x\n\"y\\u0000"],"b":null}`, true},
		{"escaped backslash before u0000 text", `"\\u0000"`, true},
		{"surrogate pair", `"\ud83d\ude00"`, true},
		{"utf8", `"héllo 😀"`, true},
		{"largest float", `1.7976931348623157e308`, true},
		{"long integer", `123456789012345678901234567890`, true},
		{"tiny", `1e-9999`, true},
		{"exponent with leading zeros", `[1e00005,2E-000001,0e0000]`, true},
		{"zero with a huge exponent", `0e99999`, false},
		{"zeros", `0.000000000000000000000000001`, true},
		{"nul escape", `{"a":"x\u0000"}`, false},
		{"nul escape in key", `{"\u0000":1}`, false},
		{"lone low surrogate", `"\udc00"`, false},
		{"lone high surrogate", `"\ud83dx"`, false},
		{"high then high", `"\ud83d\ud83d"`, false},
		{"invalid utf8", "\"\xff\xfe\"", false},
		{"invalid utf8 in key", "{\"\xc3\":1}", false},
		{"huge exponent", `[1e999999]`, false},
		{"overflow", `1.8e308`, false},
		{"overflow by digits", `2` + string(make309Zeros()), false},
		{"negative overflow", `-1e309`, false},
		{"tiny past numeric", `1e-10000`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := workflow.ValidatePayload("params", []byte(tc.payload))
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			require.Contains(t, err.Error(), "params holds")
		})
	}
}

func make309Zeros() []byte {
	b := make([]byte, 309)
	for i := range b {
		b[i] = '0'
	}
	return b
}

// TestMarshalPayloadStringWithNUL shows that a Go string holding a NUL,
// which encoding/json writes as \u0000, is refused as Postgres refuses it.
func TestMarshalPayloadStringWithNUL(t *testing.T) {
	t.Parallel()
	_, err := workflow.MarshalPayload("result of step \"s\"", map[string]string{"a": "x\x00y"})
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	b, err := workflow.MarshalPayload("result", json.RawMessage(`{"a":"x"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"x"}`, string(b))
}
