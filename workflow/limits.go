package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/duraflow/duraflow/internal/wfhook"
)

// Limits shared by every entry point (bindings, the HTTP API, the runner).
// MaxPayloadBytes, MaxStepsPerRun and MaxBatchSize are the defaults of a
// host's EngineLimits, which may raise or lower them; the others are fixed.
const (
	// MaxWorkflowNameLength is the longest workflow name.
	MaxWorkflowNameLength = 64
	// MaxIDLength is the longest instance id or event type.
	MaxIDLength = 100
	// MaxStepNameLength is the longest step name.
	MaxStepNameLength = 256
	// MaxPayloadBytes bounds params, event payloads, step results and
	// outputs: the default of EngineLimits.MaxPayloadBytes.
	MaxPayloadBytes = 1 << 20
	// MaxPayloadDepth bounds how deeply arrays and objects nest in params,
	// event payloads, step results, outputs, metadata, schedule params and
	// flow definitions. Every payload is checked against it where it enters
	// (ValidatePayload), so both backends store the same payloads: SQLite's
	// JSON functions refuse documents nested deeper than 1000 levels and
	// Go's decoder deeper than 10000, while Postgres takes more. 256 leaves
	// room for the levels a payload gains when it is embedded in another
	// document (history, metadata, a flow's expressions) and is far deeper
	// than any real document.
	MaxPayloadDepth = 256
	// MaxStepsPerRun bounds the Do, WaitForEvent and Invoke steps of one
	// run; sleeps don't count. It is the default of
	// EngineLimits.MaxStepsPerRun.
	MaxStepsPerRun = 1024
	// MaxBatchSize bounds one CreateBatch call: the default of
	// EngineLimits.MaxBatchSize.
	MaxBatchSize = 100
	// MaxSleep is the longest sleep.
	MaxSleep = 365 * 24 * time.Hour
	// DefaultEventTimeout is how long WaitForEvent waits when no timeout is set.
	DefaultEventTimeout = 24 * time.Hour
	// MinEventTimeout and MaxEventTimeout bound a WaitForEvent timeout.
	MinEventTimeout = time.Second
	// MaxEventTimeout is the longest WaitForEvent timeout.
	MaxEventTimeout = 365 * 24 * time.Hour
)

var identRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_-]*$`)

// ValidateWorkflowName checks a workflow name: 1 to 64 characters of letters,
// digits, '_' and '-', not starting with '-'.
func ValidateWorkflowName(name string) error {
	if len(name) == 0 || len(name) > MaxWorkflowNameLength || !identRE.MatchString(name) {
		return fmt.Errorf("%w: %q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'", ErrInvalidWorkflowName, wfhook.Truncate(name), MaxWorkflowNameLength)
	}
	return nil
}

// MaxQueueNameLength and MaxNamespaceLength bound task queue and namespace
// names.
const (
	MaxQueueNameLength = 100
	MaxNamespaceLength = 100
)

// ValidateQueueName checks a task queue name: 1 to MaxQueueNameLength
// characters of letters, digits, '_' and '-', not starting with '-'.
func ValidateQueueName(name string) error {
	if len(name) == 0 || len(name) > MaxQueueNameLength || !identRE.MatchString(name) {
		return fmt.Errorf("%w: queue %q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'", ErrInvalidRequest, wfhook.Truncate(name), MaxQueueNameLength)
	}
	return nil
}

// ValidateNamespace checks a namespace name with the rules of queue names.
func ValidateNamespace(name string) error {
	if len(name) == 0 || len(name) > MaxNamespaceLength || !identRE.MatchString(name) {
		return fmt.Errorf("%w: namespace %q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'", ErrInvalidRequest, wfhook.Truncate(name), MaxNamespaceLength)
	}
	return nil
}

// ValidateInstanceID checks an instance id: 1 to 100 characters matching
// ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$.
func ValidateInstanceID(id string) error {
	if len(id) == 0 || len(id) > MaxIDLength || !identRE.MatchString(id) {
		return fmt.Errorf("%w: %q must be 1 to %d characters matching %s", ErrInvalidInstanceID, wfhook.Truncate(id), MaxIDLength, identRE)
	}
	return nil
}

// ValidateEventType checks an event type with the same rules as instance ids.
func ValidateEventType(typ string) error {
	if len(typ) == 0 || len(typ) > MaxIDLength || !identRE.MatchString(typ) {
		return fmt.Errorf("%w: %q must be 1 to %d characters matching %s", ErrInvalidEventType, wfhook.Truncate(typ), MaxIDLength, identRE)
	}
	return nil
}

// ValidatePayload checks that b is valid JSON of at most MaxPayloadBytes,
// nested at most MaxPayloadDepth levels deep. what names the payload in the
// error ("params", "event payload", ...). It fails with ErrPayloadTooLarge,
// ErrPayloadTooDeep or ErrInvalidRequest. A host with other limits checks
// with EngineLimits.ValidatePayload.
func ValidatePayload(what string, b []byte) error {
	return validatePayload(what, b, MaxPayloadBytes)
}

// validatePayload is ValidatePayload with maxBytes as the size limit.
func validatePayload(what string, b []byte, maxBytes int) error {
	if len(b) > maxBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrPayloadTooLarge, what, len(b), maxBytes)
	}
	if len(b) > 0 && !json.Valid(b) {
		// Past encoding/json's own depth limit JSON is invalid to it:
		// report the depth, as for any payload too deep.
		if err := ValidatePayloadDepth(what, b, MaxPayloadDepth); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalidRequest, what)
	}
	// Valid JSON: one more pass measures the nesting and checks the values.
	depth, err := portable(b)
	if depth > MaxPayloadDepth {
		return depthError(what, MaxPayloadDepth, depth)
	}
	if err != nil {
		return fmt.Errorf("%w: %s %w", ErrInvalidRequest, what, err)
	}
	return nil
}

// ValidatePayloadPortable checks the valid JSON b for what json.Valid lets
// through but some backend cannot store or a Go program cannot decode:
// strings that are not valid UTF-8 or hold \u0000 or an unpaired surrogate
// escape, and numbers past a float64. It fails with ErrInvalidRequest.
// ValidatePayload runs it; a caller with its own size limit and its own
// answer for invalid JSON (a flow definition) runs it once b is known to be
// valid.
func ValidatePayloadPortable(what string, b []byte) error {
	if _, err := portable(b); err != nil {
		return fmt.Errorf("%w: %s %w", ErrInvalidRequest, what, err)
	}
	return nil
}

// ValidatePayloadDepth checks that arrays and objects nest at most limit
// levels deep in the JSON b, with ErrPayloadTooDeep when they nest deeper.
// It checks the nesting only (see PayloadDepth), and is cheap enough to run
// before anything decodes b.
func ValidatePayloadDepth(what string, b []byte, limit int) error {
	if d := PayloadDepth(b); d > limit {
		return depthError(what, limit, d)
	}
	return nil
}

func depthError(what string, limit, depth int) error {
	return fmt.Errorf("%w: %s nests arrays and objects deeper than %d levels (%d)", ErrPayloadTooDeep, what, limit, depth)
}

// PayloadDepth returns how deeply arrays and objects nest in the JSON b: 0
// for a string, number or literal, 1 for [1,2] or {"a":1}, 2 for [[]], and
// so on. It counts the brackets and braces outside strings in one pass,
// without decoding or allocating; it does not check that b is valid JSON,
// and its answer for invalid JSON means nothing (but it never fails).
func PayloadDepth(b []byte) int {
	depth, deepest := 0, 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i+1)
		case '[', '{':
			depth++
			deepest = max(deepest, depth)
		case ']', '}':
			depth--
		}
	}
	return deepest
}

// stringEnd returns the index of the quote that closes the string whose
// contents start at start (len(b) when it is not closed): the first quote
// preceded by an even number of backslashes.
func stringEnd(b []byte, start int) int {
	for from := start; ; {
		j := bytes.IndexByte(b[from:], '"')
		if j < 0 {
			return len(b)
		}
		q := from + j
		k := q
		for k > start && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q
		}
		from = q + 1
	}
}

// MarshalPayload encodes v as JSON and checks it as ValidatePayload does.
// A host with other limits encodes with EngineLimits.MarshalPayload.
func MarshalPayload(what string, v any) (json.RawMessage, error) {
	return marshalPayload(what, v, MaxPayloadBytes)
}

// marshalPayload is MarshalPayload with maxBytes as the size limit.
func marshalPayload(what string, v any, maxBytes int) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("null"), nil
		}
		return raw, validatePayload(what, raw, maxBytes)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s as JSON: %w", ErrInvalidRequest, what, err)
	}
	return b, validatePayload(what, b, maxBytes)
}

// encodePayload encodes v as JSON for an engine, which checks it against
// its own limits: a json.RawMessage is taken as it is (empty is null).
func encodePayload(what string, v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("null"), nil
		}
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s as JSON: %w", ErrInvalidRequest, what, err)
	}
	return b, nil
}

// portable checks what json.Valid lets through but a backend cannot store
// or a Go program cannot decode, so that the same payload is taken or refused
// alike on every backend: strings must be valid UTF-8 with no \u0000 (which
// Postgres' jsonb cannot hold) and no unpaired surrogate escape; numbers must
// fit a float64 (Postgres' numeric takes more, but no Go or JavaScript
// program could read it back). b must be valid JSON. It also returns how
// deeply arrays and objects nest (as PayloadDepth), so that ValidatePayload,
// which runs on every step result, reads valid JSON once after json.Valid.
func portable(b []byte) (deepest int, err error) {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			end := stringEnd(b, i+1)
			if err == nil {
				err = portableString(b[i+1 : end])
			}
			i = end
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		case c == '-' || ('0' <= c && c <= '9'):
			j := i + 1
			for j < len(b) && isNumberByte(b[j]) {
				j++
			}
			if err == nil {
				err = portableNumber(b[i:j])
			}
			i = j - 1
		}
	}
	return deepest, err
}

func isNumberByte(c byte) bool {
	return '0' <= c && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// portableString checks the contents of one JSON string (without quotes).
func portableString(s []byte) error {
	if !utf8.Valid(s) {
		return errors.New("holds a string that is not valid UTF-8")
	}
	for {
		k := bytes.IndexByte(s, '\\')
		if k < 0 || k+1 >= len(s) {
			return nil
		}
		if s[k+1] != 'u' {
			s = s[k+2:]
			continue
		}
		r := hex4(s[k+2:])
		s = s[k+6:]
		switch {
		case r == 0:
			return errors.New(`holds a string with \u0000, which not every backend can store`)
		case 0xDC00 <= r && r < 0xE000:
			return errors.New("holds a string with an unpaired UTF-16 surrogate escape")
		case 0xD800 <= r && r < 0xDC00:
			if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
				return errors.New("holds a string with an unpaired UTF-16 surrogate escape")
			}
			if low := hex4(s[2:]); low < 0xDC00 || low >= 0xE000 {
				return errors.New("holds a string with an unpaired UTF-16 surrogate escape")
			}
			s = s[6:]
		}
	}
}

// hex4 decodes the four hex digits that json.Valid guarantees after \u.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}

// portableNumber checks that one JSON number fits a float64, and that its
// exponent is one Postgres' numeric can hold (1e-10000 is 0 as a float64, but
// too small for numeric). Only a number whose size could pass float64's
// largest is parsed; most are plainly in range.
func portableNumber(n []byte) error {
	mant, exp := n, 0
	if k := bytes.IndexAny(n, "eE"); k >= 0 {
		mant = n[:k]
		digits := bytes.TrimLeft(n[k+1:], "+-0")
		if len(digits) > 4 {
			return numberRangeError(n)
		}
		exp, _ = strconv.Atoi(string(digits))
		if bytes.IndexByte(n[k+1:], '-') >= 0 {
			exp = -exp
		}
	}
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		mant = mant[:k]
	}
	mant = bytes.TrimLeft(bytes.TrimPrefix(mant, []byte("-")), "0")
	if len(mant)+exp > 308 {
		if _, err := strconv.ParseFloat(string(n), 64); err != nil {
			return numberRangeError(n)
		}
	}
	return nil
}

func numberRangeError(n []byte) error {
	return fmt.Errorf("holds the number %s, which is out of range: numbers must fit a float64", wfhook.Truncate(string(n)))
}
