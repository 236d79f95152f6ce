package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits shared by every entry point (bindings, the HTTP API, the runner).
const (
	// MaxWorkflowNameLength is the longest workflow name.
	MaxWorkflowNameLength = 64
	// MaxIDLength is the longest instance id or event type.
	MaxIDLength = 100
	// MaxStepNameLength is the longest step name.
	MaxStepNameLength = 256
	// MaxPayloadBytes bounds params, event payloads, step results and outputs.
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
	// MaxStepsPerRun bounds the Do and WaitForEvent steps of one run; sleeps don't count.
	MaxStepsPerRun = 1024
	// MaxBatchSize bounds one CreateBatch call.
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
		return fmt.Errorf("%w: %q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'", ErrInvalidWorkflowName, truncate(name), MaxWorkflowNameLength)
	}
	return nil
}

// ValidateInstanceID checks an instance id: 1 to 100 characters matching
// ^[a-zA-Z0-9_][a-zA-Z0-9-_]*$.
func ValidateInstanceID(id string) error {
	if len(id) == 0 || len(id) > MaxIDLength || !identRE.MatchString(id) {
		return fmt.Errorf("%w: %q must be 1 to %d characters matching %s", ErrInvalidInstanceID, truncate(id), MaxIDLength, identRE)
	}
	return nil
}

// ValidateEventType checks an event type with the same rules as instance ids.
func ValidateEventType(typ string) error {
	if len(typ) == 0 || len(typ) > MaxIDLength || !identRE.MatchString(typ) {
		return fmt.Errorf("%w: %q must be 1 to %d characters matching %s", ErrInvalidEventType, truncate(typ), MaxIDLength, identRE)
	}
	return nil
}

// NormalizeStepName trims a step name and checks it: 1 to 256 characters with
// no control characters. The trimmed name is the step's identity.
func NormalizeStepName(name string) (string, error) {
	key := strings.TrimSpace(name)
	if key == "" {
		return "", fmt.Errorf("%w: empty", ErrInvalidStepName)
	}
	if !utf8.ValidString(key) {
		return "", fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidStepName, truncate(key))
	}
	if utf8.RuneCountInString(key) > MaxStepNameLength {
		return "", fmt.Errorf("%w: %q is longer than %d characters", ErrInvalidStepName, truncate(key), MaxStepNameLength)
	}
	if strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("%w: %q contains control characters", ErrInvalidStepName, truncate(key))
	}
	return key, nil
}

// ValidatePayload checks that b is valid JSON of at most MaxPayloadBytes,
// nested at most MaxPayloadDepth levels deep. what names the payload in the
// error ("params", "event payload", ...). It fails with ErrPayloadTooLarge,
// ErrPayloadTooDeep or ErrInvalidRequest.
func ValidatePayload(what string, b []byte) error {
	if len(b) > MaxPayloadBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrPayloadTooLarge, what, len(b), MaxPayloadBytes)
	}
	if err := ValidatePayloadDepth(what, b, MaxPayloadDepth); err != nil {
		return err
	}
	if len(b) > 0 && !json.Valid(b) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalidRequest, what)
	}
	return nil
}

// ValidatePayloadDepth checks that arrays and objects nest at most limit
// levels deep in the JSON b, with ErrPayloadTooDeep when they nest deeper.
// It checks the nesting only (see PayloadDepth), and is cheap enough to run
// before anything decodes b.
func ValidatePayloadDepth(what string, b []byte, limit int) error {
	if d := PayloadDepth(b); d > limit {
		return fmt.Errorf("%w: %s nests arrays and objects deeper than %d levels (%d)", ErrPayloadTooDeep, what, limit, d)
	}
	return nil
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
func MarshalPayload(what string, v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("null"), nil
		}
		return raw, ValidatePayload(what, raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s as JSON: %w", ErrInvalidRequest, what, err)
	}
	return b, ValidatePayload(what, b)
}

func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
