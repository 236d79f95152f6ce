package workflow

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/duraflow/duraflow/internal/wfhook"
)

// MinPriority and MaxPriority bound an instance's priority
// (dftype.CreateRequest.Priority). Among claimable tasks a higher priority is
// claimed first; 0 is the default.
const (
	MinPriority = -1000
	MaxPriority = 1000
)

// MaxDedupeKeyLength is the longest dedupe key (dftype.CreateRequest.DedupeKey), in
// bytes.
const MaxDedupeKeyLength = 256

// ErrInvalidPriority means a priority is outside MinPriority..MaxPriority.
// Errors that match it match ErrInvalidRequest too.
var ErrInvalidPriority = errors.New("invalid priority")

// ValidatePriority checks an instance priority: MinPriority to MaxPriority.
func ValidatePriority(p int) error {
	if p < MinPriority || p > MaxPriority {
		return fmt.Errorf("%w: %w: priority %d must be between %d and %d", ErrInvalidRequest, ErrInvalidPriority, p, MinPriority, MaxPriority)
	}
	return nil
}

// ValidateDedupeKey checks a dedupe key: 1 to MaxDedupeKeyLength bytes of
// valid UTF-8 without control characters. (The empty key, which means none,
// is the caller's to skip.)
func ValidateDedupeKey(key string) error {
	bad := len(key) == 0 || len(key) > MaxDedupeKeyLength || !utf8.ValidString(key)
	for _, r := range key {
		if bad || unicode.IsControl(r) {
			bad = true
			break
		}
	}
	if bad {
		return fmt.Errorf("%w: dedupe key %q must be 1 to %d bytes of UTF-8 without control characters", ErrInvalidRequest, wfhook.Truncate(key), MaxDedupeKeyLength)
	}
	return nil
}
