package flow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Selector picks a value for a step from the flow context. In JSON it is an
// object with exactly one of these fields:
//
//	{"value": <any JSON>}              a static value, as written
//	{"key": "customer"}                the context's top-level key "customer" (dots are part of the key)
//	{"path": "order.items.0.sku"}      a dot path: object keys, and array indexes written as digits
//	{"context": true}                  the whole context
//	{"template": "Hello ${user.name}"} a string with each ${path} filled from the context ("$$" is a "$")
//
// A key or path that is not in the context selects null (and a branch's
// exists operator tells the two apart). A template fails the step with
// INVALID_INPUT when one of its paths is missing, because a string with a
// hole in it (a URL, a header) is worse than no string; see Template for how
// values are written into it.
type Selector struct {
	// Value is a static JSON value; "null" selects null.
	Value json.RawMessage `json:"value,omitempty"`
	// Key is a top-level key of the context.
	Key string `json:"key,omitempty"`
	// Path is a dot path into the context.
	Path string `json:"path,omitempty"`
	// Context selects the whole context.
	Context bool `json:"context,omitempty"`
	// Template is a string template; see Template.
	Template string `json:"template,omitempty"`
}

var selectorFields = []string{"value", "key", "path", "context", "template"}

// UnmarshalJSON reads the selector strictly: exactly one known field.
func (s *Selector) UnmarshalJSON(b []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return &ValidationError{Problems: []Problem{{Message: `a selector must be an object with one of "value", "key", "path", "context" or "template"`}}}
	}
	var out Selector
	var problems []Problem
	for _, k := range sortedKeys(obj) {
		raw := obj[k]
		var err error
		switch k {
		case "value":
			out.Value = append(json.RawMessage(nil), bytes.TrimSpace(raw)...)
		case "key":
			err = json.Unmarshal(raw, &out.Key)
		case "path":
			err = json.Unmarshal(raw, &out.Path)
		case "context":
			err = json.Unmarshal(raw, &out.Context)
		case "template":
			err = json.Unmarshal(raw, &out.Template)
		default:
			problems = append(problems, Problem{Path: k, Message: fmt.Sprintf("unknown field %q (a selector has one of %s)", k, strings.Join(selectorFields, ", "))})
			continue
		}
		if err != nil {
			what := "a string"
			if k == "context" {
				what = "true"
			}
			problems = append(problems, Problem{Path: k, Message: "must be " + what})
		}
	}
	if len(problems) == 0 {
		problems = out.validate()
		if len(obj) == 0 {
			problems = []Problem{{Message: `an empty selector selects nothing: use one of "value", "key", "path", "context" or "template"`}}
		}
	}
	if len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	*s = out
	return nil
}

// MarshalJSON writes the one field that is set.
func (s Selector) MarshalJSON() ([]byte, error) {
	switch {
	case s.Value != nil:
		return json.Marshal(map[string]json.RawMessage{"value": s.Value})
	case s.Key != "":
		return json.Marshal(map[string]string{"key": s.Key})
	case s.Path != "":
		return json.Marshal(map[string]string{"path": s.Path})
	case s.Context:
		return []byte(`{"context":true}`), nil
	default:
		return json.Marshal(map[string]string{"template": s.Template})
	}
}

// validate reports what is wrong with the selector, with paths relative to it.
func (s *Selector) validate() []Problem {
	set := 0
	if s.Value != nil {
		set++
		if !json.Valid(s.Value) {
			return []Problem{{Path: "value", Message: "is not valid JSON"}}
		}
	}
	if s.Key != "" {
		set++
	}
	if s.Path != "" {
		set++
		if _, err := parsePath(s.Path); err != nil {
			return []Problem{{Path: "path", Message: err.Error()}}
		}
	}
	if s.Context {
		set++
	}
	if s.Template != "" {
		set++
		if _, err := parseTemplate(s.Template); err != nil {
			return []Problem{{Path: "template", Message: err.Error()}}
		}
	}
	switch set {
	case 1:
		return nil
	case 0:
		return []Problem{{Message: `a selector needs one of "value", "key", "path", "context" (true) or "template" (non-empty)`}}
	}
	return []Problem{{Message: `a selector has exactly one of "value", "key", "path", "context" or "template"`}}
}

// Select returns the selected value from the context ctx: a fresh copy that
// the caller may change. found is false when a key or path is missing (the
// value is then nil). A nil selector selects null.
func (s *Selector) Select(ctx map[string]any) (v any, found bool, err error) {
	if s == nil {
		return nil, true, nil
	}
	switch {
	case s.Value != nil:
		v, err := decodeValue(s.Value)
		if err != nil {
			return nil, false, failure(ErrorNameInvalidInput, "decoding static value: %v", err)
		}
		return v, true, nil
	case s.Key != "":
		v, ok := ctx[s.Key]
		return deepCopy(v), ok, nil
	case s.Path != "":
		segs, err := parsePath(s.Path)
		if err != nil {
			return nil, false, failure(ErrorNameInvalidInput, "%v", err)
		}
		v, ok := lookup(ctx, segs)
		return deepCopy(v), ok, nil
	case s.Context:
		return deepCopy(map[string]any(ctx)), true, nil
	case s.Template != "":
		str, err := Expand(s.Template, ctx)
		if err != nil {
			return nil, false, err
		}
		return str, true, nil
	}
	return nil, false, failure(ErrorNameInvalidInput, "empty selector")
}

// Expand fills every ${path} of template from the context ctx and returns the
// string. Strings are inserted as they are; numbers, booleans and null as
// their JSON text; objects and arrays as JSON. "$$" writes a literal "$"
// (so "$${x}" is the text "${x}", and "$$${price}" a dollar sign and a price).
// Spaces around the path are ignored ("${ user.name }"). A path that is not
// in the context is an INVALID_INPUT error. Values are not escaped for any
// particular syntax (a header, an argument) — except in an http step's url,
// which escapes each value for its place in the URL unless the placeholder
// says "raw:" ("${raw:base}"); elsewhere "raw:" changes nothing.
func Expand(template string, ctx map[string]any) (string, error) {
	t, err := parseTemplate(template)
	if err != nil {
		return "", failure(ErrorNameInvalidInput, "%v", err)
	}
	return t.expand(ctx)
}

// ValidateTemplate reports a template that Expand can never fill: an
// unterminated "${" or an invalid path.
func ValidateTemplate(template string) error {
	_, err := parseTemplate(template)
	return err
}

type templatePart struct {
	literal string
	path    []string // nil for a literal part
	source  string
	raw     bool // "${raw:path}": not escaped, where templates escape
}

type parsedTemplate []templatePart

func parseTemplate(s string) (parsedTemplate, error) {
	var parts parsedTemplate
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			lit.WriteByte('$')
			i += 2
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template %q: \"${\" at offset %d is not closed with \"}\"", s, i)
			}
			src := strings.TrimSpace(s[i+2 : i+2+end])
			raw := false
			if rest, ok := strings.CutPrefix(src, "raw:"); ok {
				src, raw = strings.TrimSpace(rest), true
			}
			segs, err := parsePath(src)
			if err != nil {
				return nil, fmt.Errorf("template %q: ${%s}: %v", s, src, err)
			}
			if lit.Len() > 0 {
				parts = append(parts, templatePart{literal: lit.String()})
				lit.Reset()
			}
			parts = append(parts, templatePart{path: segs, source: src, raw: raw})
			i += end + 3
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, templatePart{literal: lit.String()})
	}
	return parts, nil
}

// hasPlaceholders reports whether the template fills anything from the context.
func (t parsedTemplate) hasPlaceholders() bool {
	for _, p := range t {
		if p.path != nil {
			return true
		}
	}
	return false
}

func (t parsedTemplate) expand(ctx map[string]any) (string, error) {
	return t.expandEscaped(ctx, nil)
}

// expandEscaped expands the template, passing each value that is not raw
// through escape with the text expanded so far.
func (t parsedTemplate) expandEscaped(ctx map[string]any, escape func(p templatePart, before, value string) (string, error)) (string, error) {
	var b strings.Builder
	for _, p := range t {
		if p.path == nil {
			b.WriteString(p.literal)
			continue
		}
		v, ok := lookup(ctx, p.path)
		if !ok {
			return "", failure(ErrorNameInvalidInput, "template: ${%s} is not in the flow context", p.source)
		}
		s, err := formatValue(v)
		if err != nil {
			return "", failure(ErrorNameInvalidInput, "template: ${%s}: %v", p.source, err)
		}
		if escape != nil && !p.raw {
			if s, err = escape(p, b.String(), s); err != nil {
				return "", err
			}
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
