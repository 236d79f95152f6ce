package workflow

import (
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

// ValidatePayload checks that b is valid JSON of at most MaxPayloadBytes. what
// names the payload in the error ("params", "event payload", ...).
func ValidatePayload(what string, b []byte) error {
	if len(b) > MaxPayloadBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrPayloadTooLarge, what, len(b), MaxPayloadBytes)
	}
	if len(b) > 0 && !json.Valid(b) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalidRequest, what)
	}
	return nil
}

// MarshalPayload encodes v as JSON and checks the size limit.
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
