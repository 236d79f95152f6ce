package flow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

const selectorContext = `{
	"user": {"name": "Ada", "tags": ["x", "y"]},
	"order": {"id": 9007199254740993, "total": 12.5, "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}], "paid": false, "note": null},
	"dotted.key": "literal",
	"count": 3
}`

func decodeContext(t *testing.T, js string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m))
	return m
}

func TestSelectorSelect(t *testing.T) {
	t.Parallel()
	ctx := decodeContext(t, selectorContext)
	cases := []struct {
		name     string
		selector string
		want     string // JSON
		found    bool
	}{
		{"StaticString", `{"value": "hi"}`, `"hi"`, true},
		{"StaticObject", `{"value": {"a": [1, 2.5, true]}}`, `{"a":[1,2.5,true]}`, true},
		{"StaticNull", `{"value": null}`, `null`, true},
		{"Key", `{"key": "count"}`, `3`, true},
		{"KeyWithDots", `{"key": "dotted.key"}`, `"literal"`, true},
		{"KeyMissing", `{"key": "nope"}`, `null`, false},
		{"KeyIsNotAPath", `{"key": "user.name"}`, `null`, false},
		{"Path", `{"path": "user.name"}`, `"Ada"`, true},
		{"PathArrayIndex", `{"path": "order.items.0.sku"}`, `"A-1"`, true},
		{"PathSecondIndex", `{"path": "order.items.1.qty"}`, `1`, true},
		{"PathKeepsBigIntegers", `{"path": "order.id"}`, `9007199254740993`, true},
		{"PathToNull", `{"path": "order.note"}`, `null`, true},
		{"PathToFalse", `{"path": "order.paid"}`, `false`, true},
		{"PathMissing", `{"path": "order.items.5.sku"}`, `null`, false},
		{"PathIntoScalar", `{"path": "count.x"}`, `null`, false},
		{"PathBadIndex", `{"path": "order.items.01"}`, `null`, false},
		{"Context", `{"context": true}`, selectorContext, true},
		{"Template", `{"template": "Hello ${user.name}, order ${order.id} (${order.items.0.sku})"}`, `"Hello Ada, order 9007199254740993 (A-1)"`, true},
		{"TemplateValuesAsJSON", `{"template": "${order.total} ${order.paid} ${order.note} ${user.tags}"}`, `"12.5 false null [\"x\",\"y\"]"`, true},
		{"TemplateSpacesAndEscape", `{"template": "${ user.name } costs $$${order.total}, literal $${x}"}`, `"Ada costs $12.5, literal ${x}"`, true},
		{"TemplateWithoutPlaceholders", `{"template": "plain"}`, `"plain"`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := sel(t, tc.selector)
			v, found, err := s.Select(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.found, found)
			require.JSONEq(t, tc.want, asJSON(t, v))
		})
	}

	t.Run("NilSelectsNull", func(t *testing.T) {
		t.Parallel()
		var s *flow.Selector
		v, found, err := s.Select(ctx)
		require.NoError(t, err)
		require.True(t, found)
		require.Nil(t, v)
	})

	t.Run("ResultsAreCopies", func(t *testing.T) {
		t.Parallel()
		ctx := decodeContext(t, selectorContext)
		v, _, err := sel(t, `{"path": "user"}`).Select(ctx)
		require.NoError(t, err)
		v.(map[string]any)["name"] = "changed"
		whole, _, err := sel(t, `{"context": true}`).Select(ctx)
		require.NoError(t, err)
		whole.(map[string]any)["count"] = 99
		require.JSONEq(t, selectorContext, asJSON(t, ctx), "the context is unchanged")
	})

	t.Run("TemplateMissingPathFails", func(t *testing.T) {
		t.Parallel()
		_, _, err := sel(t, `{"template": "id ${order.missing}"}`).Select(ctx)
		requireFailure(t, err, flow.ErrorNameInvalidInput, false)
		require.ErrorContains(t, err, "${order.missing} is not in the flow context")
	})
}

func TestSelectorJSON(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name, js, msg string
	}{
		{"NotAnObject", `"order.id"`, "a selector must be an object"},
		{"Empty", `{}`, "an empty selector selects nothing"},
		{"Two", `{"key": "a", "path": "b"}`, "exactly one of"},
		{"Unknown", `{"expr": "a"}`, `expr: unknown field "expr"`},
		{"EmptyPathSegment", `{"path": "a..b"}`, `path: path "a..b" has an empty segment`},
		{"ContextFalse", `{"context": false}`, "a selector needs one of"},
		{"ContextNotBool", `{"context": "yes"}`, "context: must be true"},
		{"KeyNotString", `{"key": 1}`, "key: must be a string"},
		{"UnclosedTemplate", `{"template": "Hi ${user.name"}`, `is not closed with "}"`},
		{"EmptyPlaceholder", `{"template": "Hi ${}"}`, "empty path"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s flow.Selector
			err := json.Unmarshal([]byte(tc.js), &s)
			require.ErrorIs(t, err, flow.ErrInvalidDefinition)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	for _, js := range []string{`{"value":{"a":1}}`, `{"value":null}`, `{"key":"k"}`, `{"path":"a.b"}`, `{"context":true}`, `{"template":"x ${a}"}`} {
		var s flow.Selector
		require.NoError(t, json.Unmarshal([]byte(js), &s))
		out, err := json.Marshal(s)
		require.NoError(t, err)
		require.JSONEq(t, js, string(out), "round trip")
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	ctx := decodeContext(t, selectorContext)
	s, err := flow.Expand("/users/${user.name}/tags/${user.tags.1}", ctx)
	require.NoError(t, err)
	require.Equal(t, "/users/Ada/tags/y", s)
	s, err = flow.Expand("${raw:user.name} ${ raw: user.tags.1 }", ctx)
	require.NoError(t, err)
	require.Equal(t, "Ada y", s, `"raw:" changes nothing outside an http url`)
	require.Error(t, flow.ValidateTemplate("${a"))
	require.Error(t, flow.ValidateTemplate("${raw:}"))
	require.NoError(t, flow.ValidateTemplate("no placeholders, $ alone, and $${escaped}"))
}
