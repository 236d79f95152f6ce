// Package polltimer resets the poll timers of Duraflow's background loops
// (the runner's claims, the hook deliverer, the scheduler) so that they
// work alike on a real clock and on clock.Mock.
//
// A loop that wakes for another reason than its timer (a wake-up, an
// outage's backoff), or whose timer fired while it worked, resets a timer
// that may hold a tick nobody read. A real timer drops that tick on Reset;
// a timer of clock.Mock keeps it, and its next tick then blocks the mock's
// Add, holding the mock's lock, for good: every test on that clock hangs.
package polltimer

import (
	"time"

	"github.com/benbjohnson/clock"
)

// Reset stops t, drops a tick it holds, and resets it to fire after d.
func Reset(t *clock.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(d)
}
