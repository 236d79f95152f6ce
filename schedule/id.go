package schedule

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"time"

	"github.com/duraflow/duraflow/workflow"
)

// idRE is the rule of schedule ids, the same as that of instance ids.
var idRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_-]*$`)

// ValidateID checks a schedule id: 1 to 100 characters of letters, digits,
// '_' and '-', not starting with '-' (the rule of instance ids). The error
// wraps workflow.ErrInvalidRequest.
func ValidateID(id string) error {
	if len(id) == 0 || len(id) > workflow.MaxIDLength || !idRE.MatchString(id) {
		shown := id
		if len(shown) > 120 {
			shown = shown[:120] + "…"
		}
		return fmt.Errorf("%w: schedule id %q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'",
			workflow.ErrInvalidRequest, shown, workflow.MaxIDLength)
	}
	return nil
}

// idTimeLayout writes a due time into an instance id: UTC to the second,
// with only characters instance ids allow.
const idTimeLayout = "20060102T150405Z"

// InstanceID returns the id of the instance a schedule starts for a due
// time: "<scheduleID>-<due time in UTC as 20060102T150405Z>", such as
// "nightly-20260314T020000Z". Two due times of one schedule never share an
// id, and the same due time always gets the same one, which is what makes a
// firing idempotent. When the schedule id is too long for the result to fit
// in workflow.MaxIDLength characters, it is cut and followed by the first 8
// hex digits of its SHA-256, so cut ids of different schedules still differ.
func InstanceID(scheduleID string, due time.Time) string {
	suffix := "-" + due.UTC().Format(idTimeLayout)
	if len(scheduleID)+len(suffix) <= workflow.MaxIDLength {
		return scheduleID + suffix
	}
	sum := sha256.Sum256([]byte(scheduleID))
	hash := "-" + hex.EncodeToString(sum[:4])
	return scheduleID[:workflow.MaxIDLength-len(suffix)-len(hash)] + hash + suffix
}
