package workflow

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nested returns n arrays nested in one another around inner.
func nested(n int, inner string) []byte {
	return []byte(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
}

// referenceDepth is the nesting depth of valid JSON found by decoding it.
func referenceDepth(t testing.TB, b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '[', '{':
				depth++
				deepest = max(deepest, depth)
			default:
				depth--
			}
		}
	}
}

func TestPayloadDepth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json  string
		depth int
	}{
		{`1`, 0},
		{`"[[[{{{"`, 0},
		{`[]`, 1},
		{`{}`, 1},
		{`{"a":[1,{"b":[]}]}`, 4},
		{`["\"[[", "\\", "\\\"{{", [ ]]`, 2},
		{`["\\\\"]`, 1},
		{`[[],[[]],[]]`, 3},
		{`{"k\"}":{"\u005b":[]}}`, 3},
	} {
		require.Equal(t, tc.depth, PayloadDepth([]byte(tc.json)), tc.json)
		require.Equal(t, tc.depth, referenceDepth(t, []byte(tc.json)), tc.json)
	}
	require.Equal(t, 10001, PayloadDepth(nested(10001, "")))
}

func TestValidatePayloadDepth(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidatePayload("params", nested(MaxPayloadDepth, "1")))
	require.NoError(t, ValidatePayload("params", []byte(`{"a":`+string(nested(MaxPayloadDepth-1, `"[[[[[["`))+`}`)))

	// Past the limit, up to past Go's and SQLite's own limits: the same
	// sentinel, never "invalid JSON" or a store error.
	for _, n := range []int{MaxPayloadDepth + 1, 1000, 1001, 9999, 10001, 100000} {
		err := ValidatePayload("params", nested(n, ""))
		require.ErrorIs(t, err, ErrPayloadTooDeep, "depth %d", n)
		require.NotErrorIs(t, err, ErrInvalidRequest)
		require.Contains(t, err.Error(), "params nests arrays and objects deeper than 256 levels")
	}
	_, err := MarshalPayload("result of step \"fetch\"", json.RawMessage(nested(1000, "")))
	require.ErrorIs(t, err, ErrPayloadTooDeep)
	var v any = 1
	for range MaxPayloadDepth + 1 {
		v = []any{v}
	}
	_, err = MarshalPayload("workflow output", v)
	require.ErrorIs(t, err, ErrPayloadTooDeep)

	// Still invalid JSON within the limit.
	require.ErrorIs(t, ValidatePayload("params", []byte(`[[1]`)), ErrInvalidRequest)
}

func FuzzPayloadDepth(f *testing.F) {
	for _, s := range []string{`1`, `[]`, `{"a":[1,{"b":"]]"}]}`, `["\\\"[", {"\\":[[]]}]`, `"\u005b"`, string(nested(300, `{}`))} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := PayloadDepth(b) // must not panic on any input
		if !json.Valid(b) {
			return
		}
		require.Equal(t, referenceDepth(t, b), got, "%q", b)
		depth, _ := portable(b) // ValidatePayload's one pass over valid JSON
		require.Equal(t, got, depth, "portable's depth of %q", b)
	})
}

func BenchmarkPayloadDepth(b *testing.B) {
	// A payload near the size limit: objects of strings with escapes, numbers and arrays.
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i := 0; buf.Len() < MaxPayloadBytes-200; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"id":12345,"name":"a \"quoted\" name with \\ and [brackets]","tags":["x","y",{"z":[1,2,3]}],"text":"lorem ipsum dolor sit amet, consectetur adipiscing elit"}`)
	}
	buf.WriteByte(']')
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if PayloadDepth(data) != 5 {
			b.Fatal("wrong depth")
		}
	}
}
