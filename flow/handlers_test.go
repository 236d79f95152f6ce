package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

const branchContext = `{"n": 5, "price": 19.99, "big": 9007199254740993, "name": "beta", "tags": ["a", "b"],
	"obj": {"k": [1, 2]}, "none": null, "flag": true, "list": [1, "two", {"three": 3}]}`

func TestBranchOperators(t *testing.T) {
	t.Parallel()
	h := handler(t, flow.TypeBranch)
	cases := []struct {
		name  string
		left  string
		op    string
		right string // "" for none
		want  bool
	}{
		{"EqNumber", `{"path": "n"}`, "eq", `{"value": 5}`, true},
		{"EqNumberByValue", `{"path": "n"}`, "eq", `{"value": 5.0}`, true},
		{"EqBigInteger", `{"path": "big"}`, "eq", `{"value": 9007199254740993}`, true},
		{"EqBigIntegerExact", `{"path": "big"}`, "eq", `{"value": 9007199254740992}`, false},
		{"EqString", `{"path": "name"}`, "eq", `{"value": "beta"}`, true},
		{"EqStringVsNumber", `{"path": "n"}`, "eq", `{"value": "5"}`, false},
		{"EqObjectDeep", `{"path": "obj"}`, "eq", `{"value": {"k": [1, 2.0]}}`, true},
		{"EqNull", `{"path": "none"}`, "eq", `{"value": null}`, true},
		{"EqMissingIsNull", `{"path": "missing"}`, "eq", `{"value": null}`, true},
		{"EqTwoPaths", `{"path": "tags.0"}`, "eq", `{"template": "a"}`, true},
		{"NeqNumber", `{"path": "n"}`, "neq", `{"value": 6}`, true},
		{"NeqSame", `{"path": "name"}`, "neq", `{"value": "beta"}`, false},
		{"GtNumber", `{"path": "n"}`, "gt", `{"value": 4}`, true},
		{"GtEqualNumber", `{"path": "n"}`, "gt", `{"value": 5}`, false},
		{"GtDecimal", `{"path": "price"}`, "gt", `{"value": 19.9}`, true},
		{"GtString", `{"path": "name"}`, "gt", `{"value": "alpha"}`, true},
		{"GtMixedTypes", `{"path": "name"}`, "gt", `{"value": 1}`, false},
		{"GtMissing", `{"path": "missing"}`, "gt", `{"value": 1}`, false},
		{"GteEqual", `{"path": "n"}`, "gte", `{"value": 5}`, true},
		{"GteLess", `{"path": "n"}`, "gte", `{"value": 6}`, false},
		{"LtNumber", `{"path": "n"}`, "lt", `{"value": 10}`, true},
		{"LtNumbersNotStrings", `{"value": 9}`, "lt", `{"value": 10}`, true},
		{"LtString", `{"path": "name"}`, "lt", `{"value": "gamma"}`, true},
		{"LtGreater", `{"path": "n"}`, "lt", `{"value": 1}`, false},
		{"LteEqual", `{"path": "price"}`, "lte", `{"value": 19.99}`, true},
		{"LteGreater", `{"path": "price"}`, "lte", `{"value": 19}`, false},
		{"ExistsValue", `{"path": "flag"}`, "exists", ``, true},
		{"ExistsFalse", `{"path": "obj.k.1"}`, "exists", ``, true},
		{"ExistsNull", `{"path": "none"}`, "exists", ``, false},
		{"ExistsMissing", `{"path": "missing.deep"}`, "exists", ``, false},
		{"NotExistsMissing", `{"key": "missing"}`, "notExists", ``, true},
		{"NotExistsNull", `{"path": "none"}`, "notExists", ``, true},
		{"NotExistsPresent", `{"path": "n"}`, "notExists", ``, false},
		{"InArray", `{"path": "name"}`, "in", `{"value": ["alpha", "beta"]}`, true},
		{"InArrayByValue", `{"path": "n"}`, "in", `{"value": [1, 5.0]}`, true},
		{"InArrayOfObjects", `{"value": {"three": 3}}`, "in", `{"path": "list"}`, true},
		{"NotInArray", `{"path": "name"}`, "in", `{"path": "tags"}`, false},
		{"InNotAnArray", `{"path": "name"}`, "in", `{"path": "name"}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cond := fmt.Sprintf(`{"left": %s, "op": %q, "next": "yes"}`, tc.left, tc.op)
			if tc.right != "" {
				cond = fmt.Sprintf(`{"left": %s, "op": %q, "right": %s, "next": "yes"}`, tc.left, tc.op, tc.right)
			}
			out, err := invoke(t, h, `{"conditions": [`+cond+`], "default": "no"}`, branchContext, nil)
			require.NoError(t, err)
			want := `{"next": "no", "default": true}`
			if tc.want {
				want = `{"next": "yes", "condition": 0}`
			}
			require.JSONEq(t, want, asJSON(t, out))
		})
	}

	t.Run("FirstMatchWins", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"conditions": [
			{"left": {"path": "n"}, "op": "lt", "right": {"value": 0}, "next": "negative"},
			{"left": {"path": "n"}, "op": "gt", "right": {"value": 1}, "next": "big"},
			{"left": {"path": "n"}, "op": "gt", "right": {"value": 2}, "next": "bigger"}]}`, branchContext, nil)
		require.NoError(t, err)
		require.JSONEq(t, `{"next": "big", "condition": 1}`, asJSON(t, out))
	})

	t.Run("NoMatchWithoutDefault", func(t *testing.T) {
		t.Parallel()
		_, err := invoke(t, h, `{"conditions": [{"left": {"path": "n"}, "op": "eq", "right": {"value": 0}, "next": "zero"}]}`, branchContext, nil)
		requireFailure(t, err, flow.ErrorNameNoMatch, false)
		require.ErrorContains(t, err, `no condition of branch step "s" matched and it has no default`)
	})

	t.Run("BadTemplateFails", func(t *testing.T) {
		t.Parallel()
		_, err := invoke(t, h, `{"conditions": [{"left": {"template": "${nope}"}, "op": "eq", "right": {"value": 0}, "next": "zero"}]}`, branchContext, nil)
		requireFailure(t, err, flow.ErrorNameInvalidInput, false)
		require.ErrorContains(t, err, "conditions[0]")
	})
}

func TestSetHandler(t *testing.T) {
	t.Parallel()
	h := handler(t, flow.TypeSet)
	out, err := invoke(t, h, `{"values": {
		"status": {"value": "paid"},
		"order.total": {"path": "quote.amount"},
		"greeting": {"template": "Hello, ${user.name}!"},
		"copy": {"key": "user"},
		"all": {"context": true},
		"missing": {"path": "nope"}}}`,
		`{"user": {"name": "Ada"}, "quote": {"amount": 12}}`, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"status": "paid", "order.total": 12, "greeting": "Hello, Ada!", "copy": {"name": "Ada"},
		"all": {"user": {"name": "Ada"}, "quote": {"amount": 12}}, "missing": null}`, asJSON(t, out))

	_, err = invoke(t, h, `{"values": {"x": {"template": "${nope}"}}}`, `{}`, nil)
	requireFailure(t, err, flow.ErrorNameInvalidInput, false)
}

func TestTransformPresets(t *testing.T) {
	t.Parallel()
	h := handler(t, flow.TypeTransform)
	ctx := `{"s": "  Hello World  ", "doc": "{\"a\": [1, 2.5], \"big\": 9007199254740993}", "obj": {"b": [true, null]}, "n": 3}`
	cases := []struct {
		preset, input, want string
	}{
		{"upper", `{"path": "s"}`, `"  HELLO WORLD  "`},
		{"lower", `{"path": "s"}`, `"  hello world  "`},
		{"trim", `{"path": "s"}`, `"Hello World"`},
		{"json.parse", `{"path": "doc"}`, `{"a": [1, 2.5], "big": 9007199254740993}`},
		{"json.stringify", `{"path": "obj"}`, `"{\"b\":[true,null]}"`},
		{"json.stringify", `{"path": "n"}`, `"3"`},
	}
	for _, tc := range cases {
		out, err := invoke(t, h, fmt.Sprintf(`{"preset": %q}`, tc.preset), ctx, sel(t, tc.input))
		require.NoError(t, err, tc.preset)
		require.JSONEq(t, tc.want, asJSON(t, out), tc.preset)
	}
	out, err := invoke(t, h, `{"preset": "json.parse"}`, ctx, sel(t, `{"path": "doc"}`))
	require.NoError(t, err)
	require.Equal(t, `{"a":[1,2.5],"big":9007199254740993}`, asJSON(t, out), "json.parse keeps every digit")

	for _, preset := range []string{"upper", "lower", "trim", "json.parse"} {
		_, err := invoke(t, h, fmt.Sprintf(`{"preset": %q}`, preset), ctx, sel(t, `{"path": "n"}`))
		requireFailure(t, err, flow.ErrorNameInvalidInput, false, preset)
		require.ErrorContains(t, err, "needs a string input, not a number")
	}
	_, err = invoke(t, h, `{"preset": "json.parse"}`, `{"s": "{nope"}`, sel(t, `{"path": "s"}`))
	requireFailure(t, err, flow.ErrorNameInvalidInput, false)
}

func TestTransformExpressions(t *testing.T) {
	t.Parallel()
	h := handler(t, flow.TypeTransform)
	ctx := `{"order": {"items": [{"sku": "a", "price": 2.5, "qty": 2}, {"sku": "b", "price": 10, "qty": 1}], "coupon": null},
		"user": {"name": "ada", "tags": ["x", "y"]}, "n": 41}`
	cases := []struct {
		expr, want string
	}{
		{`n + 1`, `42`},
		{`sum(map(order.items, #.price * #.qty))`, `15`},
		{`{total: sum(map(order.items, #.price * #.qty)), count: len(order.items)}`, `{"total": 15, "count": 2}`},
		{`map(filter(order.items, .qty > 1), .sku)`, `["a"]`},
		{`upper(user.name) + "!"`, `"ADA!"`},
		{`order.coupon ?? "none"`, `"none"`},
		{`n > 40 ? "big" : "small"`, `"big"`},
		{`join(user.tags, ",")`, `"x,y"`},
		{`replace("a-b-c", "-", "+")`, `"a+b+c"`},
		{`repeat("ab", 3)`, `"ababab"`},
		{`"x" in user.tags`, `true`},
		{`let t = n * 2; t - 40`, `42`},
		{`reduce(1..4, #acc + #, 0)`, `10`},
		{`toJSON({a: 1})`, `"{\n  \"a\": 1\n}"`},
		{`$env.n`, `41`},
	}
	for _, tc := range cases {
		out, err := invoke(t, h, fmt.Sprintf(`{"expression": %q}`, tc.expr), ctx, nil)
		require.NoError(t, err, tc.expr)
		require.JSONEq(t, tc.want, asJSON(t, out), tc.expr)
	}

	_, err := invoke(t, h, `{"expression": "user.name.first.x"}`, ctx, nil)
	requireFailure(t, err, flow.ErrorNameExpression, false)
	_, err = invoke(t, h, `{"expression": "1 / 0"}`, ctx, nil)
	requireFailure(t, err, flow.ErrorNameExpression, false)
	require.ErrorContains(t, err, "the expression's value is not JSON")
	_, err = invokeUnchecked(t, h, `{"expression": "nope()"}`, ctx, nil)
	requireFailure(t, err, flow.ErrorNameExpression, false)
	require.ErrorContains(t, err, "unknown function nope()")
}

// TestTransformSandbox shows that expressions cannot reach the host and that
// runaway expressions are stopped.
func TestTransformSandbox(t *testing.T) {
	t.Parallel()
	h := handler(t, flow.TypeTransform)

	t.Run("NoEnvironmentFilesOrNetwork", func(t *testing.T) {
		t.Parallel()
		secret := os.Getenv("PATH") // a variable every process has
		require.NotEmpty(t, secret)
		attempts := []string{
			`getenv("PATH")`, `env("PATH")`, `os.Getenv("PATH")`, `Getenv("PATH")`,
			`readFile("/etc/passwd")`, `open("/etc/passwd")`, `os.ReadFile("/etc/passwd")`, `ioutil.ReadFile("/etc/passwd")`,
			`http.Get("http://169.254.169.254/")`, `fetch("http://example.com")`, `net.Dial("tcp", "127.0.0.1:22")`,
			`exec("sh", "-c", "id")`, `system("id")`, `$env.os`, `$env["PATH"]`, `PATH`,
		}
		for _, src := range attempts {
			hs := h.(*flow.TransformHandler)
			raw, err := hs.Eval(context.Background(), src, map[string]any{"x": 1})
			if err == nil {
				// Whatever compiles reads the environment map only, which holds no such thing.
				require.JSONEq(t, `null`, string(raw), src)
				continue
			}
			require.NotContains(t, err.Error(), secret, src)
			requireFailure(t, err, flow.ErrorNameExpression, false, src)
		}
		// Unknown functions are rejected when the flow is validated.
		err := h.Validate(json.RawMessage(`{"expression": "readFile('/etc/passwd')"}`))
		require.ErrorContains(t, err, "unknown function readFile()")
	})

	t.Run("HugeExpression", func(t *testing.T) {
		t.Parallel()
		src := strings.Repeat("1 + ", 2000) + "1"
		err := h.Validate(json.RawMessage(fmt.Sprintf(`{"expression": %q}`, src)))
		require.ErrorContains(t, err, "expression is 8001 bytes, the limit is 4096")
		_, err = invoke(t, h, `{"preset": "upper"}`, `{}`, sel(t, `{"value": "ok"}`))
		require.NoError(t, err)
	})

	t.Run("TooManyNodes", func(t *testing.T) {
		t.Parallel()
		deep := strings.Repeat("[", 1100) + "1" + strings.Repeat("]", 1100)
		err := h.Validate(json.RawMessage(fmt.Sprintf(`{"expression": %q}`, deep)))
		require.ErrorContains(t, err, "compiling expression")
		require.ErrorContains(t, err, "exceeds maximum allowed nodes")

		wide := strings.Repeat("n+", 700) + "n"
		err = h.Validate(json.RawMessage(fmt.Sprintf(`{"expression": %q}`, wide)))
		require.ErrorContains(t, err, "exceeds maximum allowed nodes")
	})

	t.Run("LoopingExpressionIsStoppedByOperations", func(t *testing.T) {
		t.Parallel()
		items := make([]any, 3000)
		for i := range items {
			items[i] = i
		}
		ctx, _ := json.Marshal(map[string]any{"items": items})
		// A long timeout, so that the operation count stops it, however slow
		// the machine (or the race detector).
		counted, err := flow.NewTransformHandler(&flow.TransformHandlerConfig{MaxOperations: 100_000, Timeout: time.Minute})
		require.NoError(t, err)
		start := time.Now()
		_, err = invoke(t, counted, `{"expression": "count(items, count(items, count(items, # > 0) > 0) > 0)"}`, string(ctx), nil)
		requireFailure(t, err, flow.ErrorNameExpression, false)
		require.ErrorContains(t, err, "expression stopped: it took more than 100000 operations")
		require.Less(t, time.Since(start), 10*time.Second)
	})

	t.Run("LoopingExpressionIsStoppedByTime", func(t *testing.T) {
		t.Parallel()
		slow, err := flow.NewTransformHandler(&flow.TransformHandlerConfig{MaxOperations: 1 << 40, Timeout: 50 * time.Millisecond})
		require.NoError(t, err)
		items := make([]any, 3000)
		ctx, _ := json.Marshal(map[string]any{"items": items})
		start := time.Now()
		_, err = invoke(t, slow, `{"expression": "count(items, count(items, count(items, true) > 0) > 0)"}`, string(ctx), nil)
		requireFailure(t, err, flow.ErrorNameExpression, false)
		require.ErrorContains(t, err, "expression stopped: it ran longer than 50ms")
		require.Less(t, time.Since(start), 5*time.Second)
	})

	t.Run("MemoryBombsAreStopped", func(t *testing.T) {
		t.Parallel()
		for _, src := range []string{
			`reduce(1..64, #acc + #acc, "xx")`,            // doubling a string
			`reduce(1..64, concat(#acc, #acc), [1])`,      // doubling an array
			`repeat("x", 1000000) + repeat("x", 1000000)`, // two big strings
			`repeat(repeat("ab", 1000), 1000)`,            // a repeat of a repeat
			`replace(repeat("a", 100000), "a", repeat("b", 1000))`,
			`join(map(1..100000, repeat("z", 100)), "")`,
			`let a = [1,1,1,1,1,1,1,1]; let b = [a,a,a,a,a,a,a,a]; let c = [b,b,b,b,b,b,b,b]; let d = [c,c,c,c,c,c,c,c]; let e = [d,d,d,d,d,d,d,d]; let f = [e,e,e,e,e,e,e,e]; let g = [f,f,f,f,f,f,f,f]; toJSON(g)`,
			`1..100000000`,
		} {
			_, err := invoke(t, h, fmt.Sprintf(`{"expression": %q}`, src), `{}`, nil)
			requireFailure(t, err, flow.ErrorNameExpression, false, src)
			require.Regexp(t, "expression stopped|memory budget exceeded", err.Error(), src)
		}
	})
}
