package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/duraflow/duraflow/flow/internal/jsonvalue"
)

// The size-checked replacements of expr's built-ins, and the functions the
// sandbox adds. Each one fails before it allocates much more than the value
// limit (sandbox.maxBytes) and runs in time linear in it.

// split returns split or splitAfter: the pieces are counted before the
// string is split.
func (sb *Sandbox) split(after bool) func(args ...any) (any, error) {
	name := "split"
	if after {
		name = "splitAfter"
	}
	return func(args ...any) (any, error) {
		s, sep := args[0].(string), args[1].(string)
		n := -1
		if len(args) == 3 {
			n = toInt(args[2])
		}
		pieces := strings.Count(s, sep) + 1
		if sep == "" {
			pieces = utf8.RuneCountInString(s)
		}
		if n >= 0 && n < pieces {
			pieces = n
		}
		// Each piece is a string header in memory and at least "", in JSON.
		if err := sb.checkLen(name, 2+len(s)+3*pieces); err != nil {
			return nil, err
		}
		if after {
			return strings.SplitAfterN(s, sep, n), nil
		}
		return strings.SplitN(s, sep, n), nil
	}
}

// concat sums the sizes of its arguments before it copies them.
func (sb *Sandbox) concat(args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("concat: needs at least one array")
	}
	s := sizer{limit: sb.maxBytes, maxDepth: sb.maxDepth}
	length := 0
	for _, a := range args {
		rv := reflect.ValueOf(a)
		if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
			return nil, fmt.Errorf("concat: cannot concat a %s", jsonvalue.TypeName(a))
		}
		length += rv.Len()
		s.walk(a, 0)
		if s.stop() {
			return nil, sb.fail(fmt.Errorf("expression stopped: concat would build an array of more than %d bytes", sb.maxBytes))
		}
	}
	out := make([]any, 0, length)
	for _, a := range args {
		rv := reflect.ValueOf(a)
		for i := range rv.Len() {
			out = append(out, rv.Index(i).Interface())
		}
	}
	return out, nil
}

// toJSON writes what json.MarshalIndent(v, "", "  ") writes, into a buffer
// that stops the evaluation as soon as it holds more than the value limit:
// the indentation of a deep value grows with the square of its depth, so a
// small value can make a huge text.
func (sb *Sandbox) toJSON(args ...any) (any, error) {
	e := &jsonWriter{max: sb.maxBytes, maxDepth: sb.maxDepth}
	if err := e.value(reflect.ValueOf(args[0]), 0); err != nil {
		if errors.Is(err, errJSONTooBig) {
			return nil, sb.fail(fmt.Errorf("expression stopped: toJSON would write more than %d bytes", sb.maxBytes))
		}
		if errors.Is(err, errJSONTooDeep) {
			return nil, sb.fail(fmt.Errorf("expression stopped: toJSON of a value nested more than %d levels deep", sb.maxDepth))
		}
		return nil, err
	}
	return e.buf.String(), nil
}

var (
	errJSONTooBig  = errors.New("too big")
	errJSONTooDeep = errors.New("too deep")
)

type jsonWriter struct {
	buf      bytes.Buffer
	max      int
	maxDepth int
}

func (w *jsonWriter) write(b []byte) error {
	if w.buf.Len()+len(b) > w.max {
		return errJSONTooBig
	}
	w.buf.Write(b)
	return nil
}

func (w *jsonWriter) newline(depth int) error {
	if w.buf.Len()+1+2*depth > w.max {
		return errJSONTooBig
	}
	w.buf.WriteByte('\n')
	for range depth {
		w.buf.WriteString("  ")
	}
	return nil
}

var jsonMarshalerType = reflect.TypeFor[json.Marshaler]()

func (w *jsonWriter) value(rv reflect.Value, depth int) error {
	if !rv.IsValid() {
		return w.write([]byte("null"))
	}
	if rv.Type().Implements(jsonMarshalerType) {
		return w.leaf(rv, depth)
	}
	switch rv.Kind() {
	case reflect.Interface, reflect.Pointer:
		if rv.IsNil() {
			return w.write([]byte("null"))
		}
		return w.value(rv.Elem(), depth)
	case reflect.String:
		if w.buf.Len()+len(rv.String())+2 > w.max {
			return errJSONTooBig
		}
		return w.leaf(rv, depth)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			if w.buf.Len()+rv.Len()*4/3 > w.max {
				return errJSONTooBig
			}
			return w.leaf(rv, depth) // base64, as encoding/json writes []byte
		}
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return w.write([]byte("null"))
		}
		if rv.Len() == 0 {
			return w.write([]byte("[]"))
		}
		if depth >= w.maxDepth {
			return errJSONTooDeep
		}
		if err := w.write([]byte("[")); err != nil {
			return err
		}
		for i := range rv.Len() {
			if i > 0 {
				if err := w.write([]byte(",")); err != nil {
					return err
				}
			}
			if err := w.newline(depth + 1); err != nil {
				return err
			}
			if err := w.value(rv.Index(i), depth+1); err != nil {
				return err
			}
		}
		if err := w.newline(depth); err != nil {
			return err
		}
		return w.write([]byte("]"))
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return w.leaf(rv, depth) // encoding/json's rules (and errors) for other keys
		}
		if rv.IsNil() {
			return w.write([]byte("null"))
		}
		if rv.Len() == 0 {
			return w.write([]byte("{}"))
		}
		if depth >= w.maxDepth {
			return errJSONTooDeep
		}
		keys := make([]reflect.Value, 0, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			keys = append(keys, it.Key())
		}
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		if err := w.write([]byte("{")); err != nil {
			return err
		}
		for i, k := range keys {
			if i > 0 {
				if err := w.write([]byte(",")); err != nil {
					return err
				}
			}
			if err := w.newline(depth + 1); err != nil {
				return err
			}
			if err := w.leaf(reflect.ValueOf(k.String()), 0); err != nil {
				return err
			}
			if err := w.write([]byte(": ")); err != nil {
				return err
			}
			if err := w.value(rv.MapIndex(k), depth+1); err != nil {
				return err
			}
		}
		if err := w.newline(depth); err != nil {
			return err
		}
		return w.write([]byte("}"))
	}
	return w.leaf(rv, depth)
}

// leaf writes a value encoding/json marshals (numbers, strings and the
// rare values expr builds that are neither JSON collections nor scalars, such
// as dates), indented like MarshalIndent.
func (w *jsonWriter) leaf(rv reflect.Value, depth int) error {
	if _, over := sizeOf(rv.Interface(), w.max-w.buf.Len()); over {
		return errJSONTooBig
	}
	b, err := json.Marshal(rv.Interface())
	if err != nil {
		return err
	}
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		var ind bytes.Buffer
		if err := json.Indent(&ind, b, strings.Repeat("  ", depth), "  "); err != nil {
			return err
		}
		b = ind.Bytes()
	}
	return w.write(b)
}

// fromJSON decodes a JSON text as encoding/json does into an any, token by
// token, counting the size and depth of what it builds.
func (sb *Sandbox) fromJSON(args ...any) (any, error) {
	dec := json.NewDecoder(strings.NewReader(args[0].(string)))
	r := &jsonReader{dec: dec, sz: sizer{limit: sb.maxBytes}, maxDepth: sb.maxDepth}
	v, err := r.value(0)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			err = errors.New("invalid character after top-level value")
		}
	}
	switch {
	case errors.Is(err, errJSONTooBig):
		return nil, sb.fail(fmt.Errorf("expression stopped: fromJSON would build a value of more than %d bytes", sb.maxBytes))
	case errors.Is(err, errJSONTooDeep):
		return nil, sb.fail(fmt.Errorf("expression stopped: fromJSON of a value nested more than %d levels deep", sb.maxDepth))
	case err != nil:
		return nil, fmt.Errorf("fromJSON: %w", err)
	}
	return v, nil
}

type jsonReader struct {
	dec      *json.Decoder
	sz       sizer
	maxDepth int
}

func (r *jsonReader) add(n int) error {
	r.sz.n += n
	if r.sz.n > r.sz.limit {
		return errJSONTooBig
	}
	return nil
}

func (r *jsonReader) value(depth int) (any, error) {
	tok, err := r.dec.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= r.maxDepth {
			return nil, errJSONTooDeep
		}
		if err := r.add(2); err != nil {
			return nil, err
		}
		if t == '[' {
			arr := []any{}
			for r.dec.More() {
				e, err := r.value(depth + 1)
				if err != nil {
					return nil, err
				}
				if err := r.add(1); err != nil {
					return nil, err
				}
				arr = append(arr, e)
			}
			_, err := r.dec.Token() // ]
			return arr, err
		}
		obj := map[string]any{}
		for r.dec.More() {
			kt, err := r.dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if err := r.add(len(k) + 4); err != nil {
				return nil, err
			}
			e, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			obj[k] = e
		}
		_, err := r.dec.Token() // }
		return obj, err
	case string:
		return t, r.add(len(t) + 2)
	default: // float64, bool, nil
		return t, r.add(8)
	}
}

// matches is the matches operator with its work bounded: the text's length
// times the size of the compiled pattern.
func (sb *Sandbox) matches(args ...any) (any, error) {
	if args[0] == nil || args[1] == nil {
		return false, nil // as expr's own operator
	}
	text, ok1 := args[0].(string)
	pattern, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("matches: needs two strings, not a %s and a %s", jsonvalue.TypeName(args[0]), jsonvalue.TypeName(args[1]))
	}
	p, err := sb.compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("matches: %w", err)
	}
	if work := (len(text) + 1) * p.insts; work > maxRegexpWork {
		return nil, sb.fail(fmt.Errorf("expression stopped: matching a %d-byte text with a pattern of %d instructions is too much work (the limit is %d of their product)",
			len(text), p.insts, maxRegexpWork))
	}
	return p.rx.MatchString(text), nil
}

// pattern is a compiled pattern of matches with the size of its program.
type pattern struct {
	rx    *regexp.Regexp
	insts int
}

// maxCachedPatterns bounds sandbox.patterns: an expression that builds a
// new pattern for every element still compiles each, but keeps only these.
const maxCachedPatterns = 16

// compile compiles a pattern of matches once per evaluation.
func (sb *Sandbox) compile(src string) (*pattern, error) {
	if p, ok := sb.patterns[src]; ok {
		return p, nil
	}
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	rx, err := regexp.Compile(src)
	if err != nil {
		return nil, err
	}
	p := &pattern{rx: rx, insts: len(prog.Inst)}
	if sb.patterns == nil {
		sb.patterns = make(map[string]*pattern)
	}
	if len(sb.patterns) < maxCachedPatterns {
		sb.patterns[src] = p
	}
	return p, nil
}

// urlEncode escapes a string for a URL's query (url.QueryEscape).
func (sb *Sandbox) urlEncode(args ...any) (any, error) {
	out := url.QueryEscape(args[0].(string))
	if err := sb.checkLen("urlEncode", len(out)); err != nil {
		return nil, err
	}
	return out, nil
}

// urlPathEscape escapes a string for one segment of a URL's path
// (url.PathEscape).
func (sb *Sandbox) urlPathEscape(args ...any) (any, error) {
	out := url.PathEscape(args[0].(string))
	if err := sb.checkLen("urlPathEscape", len(out)); err != nil {
		return nil, err
	}
	return out, nil
}
