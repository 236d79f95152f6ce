package flow_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

// TestSandboxBombs evaluates expressions built to exhaust memory or time and
// shows that each is refused with the sandbox's limit error within the time
// limit, without allocating much more than the value limit.
//
// It is not parallel on purpose: it measures the bytes the process
// allocates, which other tests running at the same time would add to.
func TestSandboxBombs(t *testing.T) {
	const timeout = time.Second
	h, err := flow.NewTransformHandler(&flow.TransformHandlerConfig{Timeout: timeout})
	require.NoError(t, err)

	concat := "let r = 1..90000; concat(" + strings.TrimSuffix(strings.Repeat("r, ", 60), ", ") + ")"
	for _, tt := range []struct{ name, src string }{
		{"NestedToJSON", `toJSON(reduce(1..8000, [#acc], 0))`},
		{"NestedToJSONShared", `let a = reduce(1..2000, [#acc], 0); toJSON([a, a, a, a, a])`},
		{"ToJSONIndentation", `let a = reduce(1..900, [#acc], 0); toJSON(map(1..100, a))`},
		{"ToJSONOfToJSON", `reduce(1..40, toJSON([#acc, #acc]), "<&>")`},
		{"RepeatOfRepeat", `repeat(repeat("ab", 1000), 1000)`},
		{"HugeRange", `1..1000000000`},
		{"HugeRangeSum", `sum(1..1000000000)`},
		{"NestedMapOverRanges", `map(1..100000, map(1..100000, #))`},
		{"NestedCountOverRanges", `count(1..100000, count(1..100000, # > 0) > 0)`},
		{"Concat", concat},
		{"ConcatDoubling", `reduce(1..64, concat(#acc, #acc), [1])`},
		{"StringDoubling", `reduce(1..64, #acc + #acc, "xx")`},

		{"Replace", `replace(repeat("a", 100000), "a", repeat("b", 1000))`},
		{"Join", `join(map(1..100000, repeat("z", 100)), "")`},
		{"JoinGlue", `join(map(1..100000, ""), repeat("z", 100))`},
		{"SplitEveryRune", `split(repeat("a", 1000000), "")`},
		{"SplitAfterEveryRune", `splitAfter(repeat("a", 1000000), "")`},
		{"FromJSONArray", `fromJSON("[" + repeat("0,", 500000) + "0]")`},
		{"FromJSONDeep", `fromJSON(repeat("[", 100000) + repeat("]", 100000))`},
		{"Flatten", `flatten(reduce(1..100000, [#acc, #acc], 0))`},
		{"UpperHuge", `upper(repeat("ȿ", 500000))`},
		{"ToPairs", `toPairs(reduce(1..10, ({a: #acc, b: #acc, c: #acc, d: #acc, e: #acc}), {}))`},
		{"Regexp", `repeat("a", 500000) matches ("^(" + repeat("(a|b)?", 900) + ")+$")`},
		{"RegexpBigPattern", `repeat("a", 200000) matches "((a|aa|aaa|b)*(b|c)){9}$"`},
		{"RegexpTextDoubling", `reduce(1..30, #acc + #acc, "a") matches "(a|aa)+$"`},
		{"StringOf", `string(reduce(1..100000, [#acc], 0))`},
		{"Sort", `sort(concat(1..100000, 1..100000))`},
		{"DeepNesting", `reduce(1..1000000, [#acc], 0)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := h.Eval(context.Background(), tt.src, map[string]any{})
			elapsed := time.Since(start)
			runtime.ReadMemStats(&after)
			t.Logf("%s: %v in %s", tt.src, err, elapsed)
			requireFailure(t, err, flow.ErrorNameExpression, false, tt.src)
			require.Regexp(t, "expression stopped|memory budget exceeded", err.Error())
			// The limits are checked between operations, so a little past the
			// timeout at worst; slack for the race detector on a busy machine.
			require.Less(t, elapsed, 3*timeout, "refused within the time limit")
			allocated := after.TotalAlloc - before.TotalAlloc
			require.Less(t, allocated, uint64(64<<20), fmt.Sprintf("allocated %d MB", allocated>>20))
		})
	}
}

// TestSandboxFunctions shows the functions the sandbox adds or replaces at
// work in expressions.
func TestSandboxFunctions(t *testing.T) {
	t.Parallel()
	h, err := flow.NewTransformHandler(nil)
	require.NoError(t, err)
	env := map[string]any{"id": "../../admin?x=1#", "name": "a b/c", "s": "order-42"}
	for src, want := range map[string]string{
		`urlEncode(id)`:     `"..%2F..%2Fadmin%3Fx%3D1%23"`,
		`urlPathEscape(id)`: `"..%2F..%2Fadmin%3Fx=1%23"`,
		`"https://x.test/q?name=" + urlEncode(name)`: `"https://x.test/q?name=a+b%2Fc"`,
		`s matches "^order-[0-9]+$"`:                 `true`,
		`not (s matches "^x")`:                       `true`,
		`toJSON({b: [1], a: "<"})`:                   `"{\n  \"a\": \"\\u003c\",\n  \"b\": [\n    1\n  ]\n}"`,
		`fromJSON("[1, {\"a\": null}]")`:             `[1, {"a": null}]`,
		`split("a,b", ",")`:                          `["a", "b"]`,
		`concat([1], [2, 3])`:                        `[1, 2, 3]`,
	} {
		raw, err := h.Eval(context.Background(), src, env)
		require.NoError(t, err, src)
		require.JSONEq(t, want, string(raw), src)
	}
}
