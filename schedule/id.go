package schedule

import (
	"crypto/rand"
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

// idRandomBytes is how many random bytes end the id of an instance a
// schedule starts.
const idRandomBytes = 8

// idRandomLength is the length of the random end of such an id: "-" and
// two hex digits a byte.
const idRandomLength = 1 + 2*idRandomBytes

// InstanceID returns a new id for the instance a schedule starts for a due
// time: InstanceIDPrefix, then "-" and 16 random hex digits, such as
// "nightly-20260314T020000Z-3f9c0a1b2c3d4e5f". The prefix says which
// schedule and due time the instance is for; the random part makes the id
// one that nobody can work out beforehand and create first, which would
// otherwise refuse the firing. Each call returns another id: a firing is
// exactly-once by the schedule's version (db.ScheduleStore.ScheduleFire),
// not by its ids.
func InstanceID(scheduleID string, due time.Time) string {
	var b [idRandomBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return InstanceIDPrefix(scheduleID, due) + "-" + hex.EncodeToString(b[:])
}

// InstanceIDPrefix returns the part of InstanceID that is not random:
// "<scheduleID>-<due time in UTC as 20060102T150405Z>", such as
// "nightly-20260314T020000Z", the same for every firing of a schedule id
// at a due time. When the schedule id is too long for the whole id to fit
// in workflow.MaxIDLength characters, it is cut and followed by the first
// 8 hex digits of its SHA-256, so cut ids of different schedules still
// differ.
func InstanceIDPrefix(scheduleID string, due time.Time) string {
	suffix := "-" + due.UTC().Format(idTimeLayout)
	room := workflow.MaxIDLength - idRandomLength
	if len(scheduleID)+len(suffix) <= room {
		return scheduleID + suffix
	}
	sum := sha256.Sum256([]byte(scheduleID))
	hash := "-" + hex.EncodeToString(sum[:4])
	return scheduleID[:room-len(suffix)-len(hash)] + hash + suffix
}
