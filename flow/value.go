package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"

	"github.com/duraflow/duraflow/flow/internal/jsonvalue"
)

// The flow context and every value a selector returns are plain JSON values
// as decoded with json.Decoder.UseNumber: nil, bool, json.Number, string,
// []any and map[string]any. Numbers stay json.Number so that large integers
// (ids) keep every digit on their way through a flow.

// decodeValue decodes exactly one JSON value with UseNumber.
func decodeValue(raw []byte) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// deepCopy copies the maps and slices of a JSON value, so that a handler can
// change what it was given without changing the flow context.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = deepCopy(e)
		}
		return s
	}
	return v
}

// toJSONValue converts any Go value to a plain JSON value by encoding it.
func toJSONValue(v any) (any, error) {
	switch v.(type) {
	case nil, bool, string, json.Number:
		return v, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeValue(raw)
}

// parsePath splits a dot path ("order.items.0.sku") into its segments. Every
// segment must be non-empty; a segment of digits indexes an array.
func parsePath(p string) ([]string, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("path %q has an empty segment", p)
		}
	}
	return segs, nil
}

// lookup follows segs from root. found is false when a segment is missing: a
// key not in an object, an index out of range or a step into a scalar.
func lookup(root any, segs []string) (v any, found bool) {
	cur := root
	for _, s := range segs {
		switch x := cur.(type) {
		case map[string]any:
			next, ok := x[s]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(x) || strconv.Itoa(i) != s {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// setPath stores v at segs in root, creating objects for missing segments. A
// segment that indexes an existing array replaces that element; stepping
// into a scalar or out of an array's range is an error.
func setPath(root map[string]any, segs []string, v any) error {
	var cur any = root
	for i, s := range segs {
		last := i == len(segs)-1
		switch x := cur.(type) {
		case map[string]any:
			if last {
				x[s] = v
				return nil
			}
			next, ok := x[s]
			if !ok || next == nil {
				next = map[string]any{}
				x[s] = next
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n >= len(x) {
				return fmt.Errorf("cannot set %q: %q is not an index of the array at %q", strings.Join(segs, "."), s, strings.Join(segs[:i], "."))
			}
			if last {
				x[n] = v
				return nil
			}
			if x[n] == nil {
				x[n] = map[string]any{}
			}
			cur = x[n]
		default:
			return fmt.Errorf("cannot set %q: %q holds a %s, not an object", strings.Join(segs, "."), strings.Join(segs[:i], "."), typeName(cur))
		}
	}
	return nil
}

// typeName names a JSON value's type for messages.
func typeName(v any) string { return jsonvalue.TypeName(v) }

// formatValue writes a value into a template: strings as they are, other
// values as JSON (null as "null").
func formatValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// number returns v as an exact rational if it is a JSON number.
func number(v any) (*big.Rat, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case float64:
		if r := new(big.Rat); r.SetFloat64(x) != nil {
			return r, true
		}
		return nil, false
	case int:
		return new(big.Rat).SetInt64(int64(x)), true
	case int64:
		return new(big.Rat).SetInt64(x), true
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// jsonEqual compares two JSON values; numbers compare by value (1 == 1.0).
func jsonEqual(a, b any) bool {
	if na, ok := number(a); ok {
		nb, ok := number(b)
		return ok && na.Cmp(nb) == 0
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !jsonEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}

// compareValues orders two numbers or two strings; ok is false for any other
// pair, which no ordering condition matches.
func compareValues(a, b any) (c int, ok bool) {
	if na, isNum := number(a); isNum {
		nb, isNum := number(b)
		if !isNum {
			return 0, false
		}
		return na.Cmp(nb), true
	}
	sa, isStr := a.(string)
	sb, isStr2 := b.(string)
	if !isStr || !isStr2 {
		return 0, false
	}
	return strings.Compare(sa, sb), true
}
