package flow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// DecodeConfig decodes a step's JSON config into v (a pointer to a struct)
// strictly: a field v does not declare, a value of the wrong type or a value
// its UnmarshalJSON rejects is a problem at its path, and every problem is
// reported, not only the first. The error is a *ValidationError whose paths
// are relative to the config ("headers.Accept", "conditions[2].op"), which is
// what a Handler's Validate returns. An empty or null config decodes as {}.
//
// Custom handlers use it so that their configs are as strict as the built-in
// ones.
func DecodeConfig(config json.RawMessage, v any) error {
	if len(bytes.TrimSpace(config)) == 0 {
		config = json.RawMessage("{}")
	}
	return newValidationError(decodeStrict(config, v, ""), nil)
}

// decodeStrict decodes raw into v, which must be a non-nil pointer, and
// returns the problems found, located under path.
func decodeStrict(raw json.RawMessage, v any, path string) []Problem {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return []Problem{{Path: path, Message: fmt.Sprintf("cannot decode into %T", v)}}
	}
	if !json.Valid(raw) {
		var x any
		err := json.Unmarshal(raw, &x)
		return []Problem{{Path: path, Message: fmt.Sprintf("invalid JSON: %v", err)}}
	}
	d := &decoder{}
	d.value(raw, rv.Elem(), path)
	return d.problems
}

type decoder struct{ problems []Problem }

func (d *decoder) add(path, format string, args ...any) {
	d.problems = append(d.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func (d *decoder) value(raw json.RawMessage, v reflect.Value, path string) {
	if v.Kind() != reflect.Pointer && v.CanAddr() && v.Addr().Type().Implements(unmarshalerType) {
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(raw); err != nil {
			d.problems = append(d.problems, problemsOf(path, err)...)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(raw) {
			v.SetZero()
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(raw, v.Elem(), path)
	case reflect.Struct:
		obj, ok := d.object(raw, path)
		if !ok {
			return
		}
		fields := structFields(v.Type())
		for _, k := range sortedKeys(obj) {
			i, ok := fields[k]
			if !ok {
				d.add(joinPath(path, k), "unknown field %q", k)
				continue
			}
			d.value(obj[k], v.Field(i), joinPath(path, k))
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			d.add(path, "cannot decode into %s", v.Type())
			return
		}
		obj, ok := d.object(raw, path)
		if !ok {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(obj))
		for _, k := range sortedKeys(obj) {
			elem := reflect.New(v.Type().Elem()).Elem()
			d.value(obj[k], elem, joinPath(path, k))
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), elem)
		}
		v.Set(m)
	case reflect.Slice:
		if isNull(raw) {
			v.SetZero()
			return
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil {
			d.add(path, "must be an array")
			return
		}
		s := reflect.MakeSlice(v.Type(), len(arr), len(arr))
		for i, item := range arr {
			d.value(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
			d.add(path, "must be %s", kindName(v.Type()))
		}
	}
}

// object decodes a JSON object; null is an empty object.
func (d *decoder) object(raw json.RawMessage, path string) (map[string]json.RawMessage, bool) {
	if isNull(raw) {
		return nil, true
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		d.add(path, "must be an object")
		return nil, false
	}
	return obj, true
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a valid " + t.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var fieldCache sync.Map // reflect.Type -> map[string]int

// structFields maps the JSON names of a struct's exported fields to their
// indexes. Embedded structs are not supported: config types don't need them.
func structFields(t reflect.Type) map[string]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]int)
	}
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		m[name] = i
	}
	fieldCache.Store(t, m)
	return m
}
