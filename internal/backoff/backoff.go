// Package backoff paces what Duraflow retries after a transient database
// error: the store calls the runner repeats while its lease holds, the
// background services' rounds (claims, hook deliveries, schedule firings,
// flow loading, the lifecycle prune, the wake listener's reconnections)
// while the database is unavailable, and the reads of an HTTP request. It
// is exponential backoff with jitter and a cap (cenkalti/backoff), waited
// in real time whatever clock the caller runs on: it paces calls to a
// database that is recovering, which no fake clock governs. An Outage
// keeps a background service's log of an outage to two lines, one when it
// starts and one when it ends.
//
// It knows db for its one notion of an outage (db.ErrUnavailable) and
// nothing above it.
package backoff

import (
	"context"
	"errors"
	"log/slog"
	"time"

	cenkalti "github.com/cenkalti/backoff/v5"

	"github.com/duraflow/duraflow/db"
)

// Policy is exponential backoff with jitter: the waits start at about
// First and double up to Max, each drawn at random from half to one and a
// half times its delay, and never longer than Max.
type Policy struct {
	First, Max time.Duration
}

// The policies of Duraflow's retries.
var (
	// Call paces the repeats of one store call whose answer a run waits
	// for (the runner's checkpoints, heartbeats and run loads): 50 ms
	// doubling to 1 s.
	Call = Policy{First: 50 * time.Millisecond, Max: time.Second}
	// Loop paces the rounds of a background service while the database is
	// unavailable: 100 ms doubling to 5 s, so a recovering database gets
	// at most one round every few seconds from each service of each
	// process, and the work goes on within seconds of its return.
	Loop = Policy{First: 100 * time.Millisecond, Max: 5 * time.Second}
	// Request paces the repeats of an HTTP read (the API's and the
	// console's GETs): 50 ms doubling to 400 ms, RequestAttempts tries in
	// all, so a request that meets an outage is answered 503 within about
	// a second.
	Request = Policy{First: 50 * time.Millisecond, Max: 400 * time.Millisecond}
)

// RequestAttempts is how many times an HTTP read is tried before it is
// answered 503 DATABASE_UNAVAILABLE.
const RequestAttempts = 4

// Backoff hands out the waits of one series of retries. It is not safe for
// concurrent use.
type Backoff struct {
	max time.Duration
	exp cenkalti.ExponentialBackOff
}

// New returns the start of a series of waits of p.
func (p Policy) New() *Backoff {
	b := &Backoff{max: p.Max, exp: cenkalti.ExponentialBackOff{
		InitialInterval: p.First, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: p.Max,
	}}
	b.exp.Reset()
	return b
}

// Next returns the next wait of the series.
func (b *Backoff) Next() time.Duration { return min(b.exp.NextBackOff(), b.max) }

// Reset starts the series again from its first wait.
func (b *Backoff) Reset() { b.exp.Reset() }

// Sleep waits d in real time and reports true, or false when ctx ends
// first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Outage follows one background service's access to the database across
// its rounds: a round that fails with db.ErrUnavailable starts an outage or
// goes on with it, any other outcome (success, or an error the database
// answered) ends it. The first failure of an outage is logged at warn and
// the end at info, with how long it lasted; the failures between are
// logged at debug only, however long the outage. It is not safe for
// concurrent use: each loop has its own.
type Outage struct {
	log  *slog.Logger
	what string
	b    *Backoff

	since    time.Time // when the outage began; zero when there is none
	failures int
}

// NewOutage returns the outage record of the service that does what (a
// gerund: "claiming tasks"), logging to log and waiting as p says between
// failed rounds.
func NewOutage(log *slog.Logger, what string, p Policy) *Outage {
	return &Outage{log: log, what: what, b: p.New()}
}

// Down reports whether an outage is under way: the last round failed with
// db.ErrUnavailable.
func (o *Outage) Down() bool { return !o.since.IsZero() }

// Round records the outcome of a round and reports whether it failed
// because the database is unavailable; then wait is how long to wait
// before the next round. For any other outcome it ends an outage under
// way and returns false: the caller handles err (nil or an answer of the
// database) as it would without an outage.
func (o *Outage) Round(err error) (unavailable bool, wait time.Duration) {
	if err == nil || !errors.Is(err, db.ErrUnavailable) {
		o.end()
		return false, 0
	}
	o.failures++
	if o.since.IsZero() {
		o.since = time.Now()
		o.log.Warn("database unavailable; retrying with backoff", "while", o.what, "error", err)
	} else {
		o.log.Debug("database still unavailable", "while", o.what, "failures", o.failures, "error", err)
	}
	return true, o.b.Next()
}

// end ends the outage under way, if any.
func (o *Outage) end() {
	if o.since.IsZero() {
		return
	}
	o.log.Info("database available again", "while", o.what,
		"down_for", time.Since(o.since).Round(time.Millisecond).String(), "failures", o.failures)
	o.since, o.failures = time.Time{}, 0
	o.b.Reset()
}
