package flow_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

// FuzzFlowDefinition feeds arbitrary bytes to the path a definition takes
// when it is applied (Parse, then Validate and Compile with the built-in
// handlers): it must never panic, and a definition that compiles must
// survive its own JSON encoding.
func FuzzFlowDefinition(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "flows", "*.json"))
	require.NoError(f, err)
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"id":"a","version":"1.0.0","initialStepId":"s","steps":{}}`,
		`{"id":"a","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"set","config":{"values":{"x":{"value":1}}},"transitions":{"onSuccess":"s"}}}}`,
		`{"id":"a","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"transform","config":{"expression":"1..1000000000"}}}}`,
		`{"id":"a","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"http","config":{"url":"http://[::ffff:127.0.0.1]/"}}}}`,
		`{"id":"a","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"exec","config":{"command":"/bin/../bin/sh","args":["-c","id"]}}}}`,
		`{"id":"a","version":"01.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"delay","config":{"duration":"1e300 weeks"}}}}`,
		`{"id":"a","version":"1.0.0","initialStepId":"s","steps":{"s":{"id":"s","type":"branch","config":{"conditions":[{"left":{"path":"a..b"},"op":"in","right":{"template":"${"},"next":"s"}]}}}}`,
		`{"id":"a","version":"1.0.0","initialStepId":"s","output":"x.0.y","steps":{"s":{"id":"s","type":"wait-for-event","config":{"type":"../x","timeout":"-1 second"},"retries":{"limit":-1,"delay":"x","backoff":"cubic"}}}}`,
	} {
		f.Add([]byte(s))
	}
	hs, err := flow.NewHandlers()
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := flow.Parse(data)
		if err != nil {
			return
		}
		_, _ = flow.Validate(def, hs)
		compiled, err := flow.Compile(def, hs)
		if err != nil {
			return
		}
		raw, err := json.Marshal(compiled.Definition())
		require.NoError(t, err)
		again, err := flow.Parse(raw)
		require.NoError(t, err, "%s", raw)
		_, err = flow.Compile(again, hs)
		require.NoError(t, err, "%s", raw)
	})
}

// FuzzExpression evaluates arbitrary expressions through the transform
// handler's public entry point, under small limits: an evaluation must never
// panic, must end within a bounded time whatever it does, and a value it
// returns must be JSON.
func FuzzExpression(f *testing.F) {
	for _, s := range []string{
		`1 + 2`, `{total: sum(map(items, #.qty * #.price)), n: len(items)}`, `name + "!"`,
		`1..1000000000`, `len(1..100000)`, `repeat("x", 1000000)`, `repeat(repeat("ab", 1000), 1000)`,
		`reduce(1..100000, # + #acc, 0)`, `map(1..1000, map(1..1000, #))`, `join(map(1..100000, "abc"), ",")`,
		`replace(repeat("a", 5000), "a", repeat("b", 5000))`, `"a" matches "(a+)+$"`,
		`repeat("a", 60000) matches "(a|aa)+b"`, `toJSON(items)`, `fromJSON("[[[[[[[[[[1]]]]]]]]]]")`,
		`let x = "ab"; let y = x + x; let z = y + y; z + z`, `items[0].qty / 0`, `1 / 0`, `nil.x`,
		`split(repeat("a,", 10000), ",")`, `sortBy(1..10000, -#)`, `env`, `$env`, `now()`, `date("2026-01-01")`,
		`upper(name) + lower(name) + trim(name)`, `string(9007199254740993)`, `int("9999999999999999999999")`,
		`{"a": {"b": {"c": {"d": [1,[2,[3,[4]]]]}}}}`, `first(items)?.qty ?? 0`, `count(items, #.qty > 1)`,
	} {
		f.Add(s)
	}
	h, err := flow.NewTransformHandler(&flow.TransformHandlerConfig{
		MaxOperations: 20_000, MaxValueBytes: 64 << 10, Timeout: 200 * time.Millisecond,
	})
	require.NoError(f, err)
	env := map[string]any{
		"name":  "Ada",
		"items": []any{map[string]any{"qty": json.Number("2"), "price": json.Number("1250")}, map[string]any{"qty": json.Number("10"), "price": json.Number("120")}},
		"deep":  map[string]any{"a": []any{[]any{[]any{"x"}}}},
	}
	f.Fuzz(func(t *testing.T, expression string) {
		start := time.Now()
		out, err := h.Eval(context.Background(), expression, env)
		// The limit is 200 ms; the bound leaves room for the race detector
		// and a loaded machine, while a sandbox escape takes far longer.
		require.Less(t, time.Since(start), 5*time.Second, "expression %q ran past its limit", expression)
		if err == nil {
			require.True(t, json.Valid(out), "expression %q returned %q", expression, out)
		}
	})
}
