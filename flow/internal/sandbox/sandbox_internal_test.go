package sandbox

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSandboxReplacementsMatchExpr shows that the size-checked built-ins
// give what expr's own give for values within the limits.
func TestSandboxReplacementsMatchExpr(t *testing.T) {
	t.Parallel()
	sb := New(context.Background(), Limits{Timeout: time.Second, MaxOperations: 1_000_000, MaxValueBytes: 1 << 20, MaxDepth: 256})

	t.Run("ToJSON", func(t *testing.T) {
		t.Parallel()
		for _, v := range []any{
			nil, true, 1, -2.5, 1e21, "<a & b>\u2028\"\\", []any{}, map[string]any{},
			[]any{1, []any{}, map[string]any{}, []any{[]any{"x"}}},
			map[string]any{"b": []any{1, 2}, "a": map[string]any{"z": nil, "y": "é"}, "": 0},
			[]int{1, 2, 3}, []string{"a"}, map[string]int{"k": 1}, []any(nil),
			time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC), 90 * time.Second,
			map[any][]any{"x": {1}},
		} {
			want, wantErr := json.MarshalIndent(v, "", "  ")
			got, err := sb.toJSON(v)
			if wantErr != nil {
				require.Error(t, err, "%#v", v)
				continue
			}
			require.NoError(t, err, "%#v", v)
			require.Equal(t, string(want), got, "%#v", v)
		}
	})

	t.Run("FromJSON", func(t *testing.T) {
		t.Parallel()
		for _, src := range []string{
			`null`, `true`, `1.5`, `"x\u00e9"`, `[]`, `{}`, `[1, [2, {"a": [null]}]]`, ` {"b": 1, "a": "2"} `,
		} {
			var want any
			require.NoError(t, json.Unmarshal([]byte(src), &want))
			got, err := sb.fromJSON(src)
			require.NoError(t, err, src)
			require.Equal(t, want, got, src)
		}
		for _, src := range []string{``, `[`, `[1,]`, `{"a"}`, `1 2`, `[1]]`} {
			_, err := sb.fromJSON(src)
			require.Error(t, err, src)
		}
	})

	t.Run("Split", func(t *testing.T) {
		t.Parallel()
		got, err := sb.split(false)("a,b,,c", ",")
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "", "c"}, got)
		got, err = sb.split(false)("a,b,c", ",", 2)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b,c"}, got)
		got, err = sb.split(true)("a,b", ",")
		require.NoError(t, err)
		require.Equal(t, []string{"a,", "b"}, got)
		got, err = sb.split(false)("héllo", "")
		require.NoError(t, err)
		require.Equal(t, []string{"h", "é", "l", "l", "o"}, got)
	})

	t.Run("Concat", func(t *testing.T) {
		t.Parallel()
		got, err := sb.concat([]any{1}, []int{2, 3}, []string{})
		require.NoError(t, err)
		require.Equal(t, []any{1, 2, 3}, got)
		_, err = sb.concat([]any{1}, 2)
		require.ErrorContains(t, err, "cannot concat")
	})

	t.Run("Matches", func(t *testing.T) {
		t.Parallel()
		got, err := sb.matches("order-42", `^order-\d+$`)
		require.NoError(t, err)
		require.Equal(t, true, got)
		_, err = sb.matches("x", `(`)
		require.ErrorContains(t, err, "matches:")
		got, err = sb.matches(nil, "x")
		require.NoError(t, err)
		require.Equal(t, false, got)
		_, err = sb.matches(1, "x")
		require.ErrorContains(t, err, "matches: needs two strings, not a number and a string")
	})
}
