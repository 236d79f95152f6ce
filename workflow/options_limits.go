package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrInvalidLimit means a concurrency or rate limit is not positive (a max
// running, a rate or a period of zero or less), a per-key limit was given
// without a concurrency key, or WithMaxStepsPerRun is outside its range.
var ErrInvalidLimit = errors.New("workflow: invalid limit")

// ErrConcurrencyKey means a workflow's concurrency key could not be
// computed from an instance's params (the key function failed, or a flow's
// key expression failed or returned something other than a string):
// nothing was created.
var ErrConcurrencyKey = errors.New("workflow: concurrency key")

// ErrQueueNotFound means no limits were ever set for the named queue.
var ErrQueueNotFound = errors.New("workflow: queue not found")

// RateLimit is at most Limit starts per Period, counted in fixed windows
// aligned on multiples of Period, so a sliding period may hold up to twice
// Limit across a window boundary (see docs/limits.md). The zero value is
// no limit.
type RateLimit struct {
	Limit  int
	Period time.Duration
}

// IsZero reports whether r sets no limit.
func (r RateLimit) IsZero() bool { return r.Limit == 0 && r.Period == 0 }

// Validate reports, as ErrInvalidLimit, a rate limit that is not positive in
// both its limit and period, or whose period is under a millisecond.
func (r RateLimit) Validate() error {
	if r.Limit <= 0 || r.Period <= 0 {
		return fmt.Errorf("%w: a rate limit needs a positive limit and period, got %d per %s", ErrInvalidLimit, r.Limit, r.Period)
	}
	if r.Period < time.Millisecond {
		return fmt.Errorf("%w: a rate limit's period is at least 1ms, got %s", ErrInvalidLimit, r.Period)
	}
	return nil
}

// KeyFunc computes an instance's concurrency key from its params (the JSON
// the Create call gave). An error fails the Create with ErrConcurrencyKey.
type KeyFunc func(params json.RawMessage) (string, error)

// KeyOf is a KeyFunc over a workflow's typed params: it decodes the params
// as P and calls key.
//
//	workflow.WithConcurrencyKey(workflow.KeyOf(func(p Charge) string { return p.CustomerID }), 1)
func KeyOf[P any](key func(P) string) KeyFunc {
	return func(params json.RawMessage) (string, error) {
		var p P
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return "", fmt.Errorf("decoding params: %w", err)
			}
		}
		return key(p), nil
	}
}

// Limits are the concurrency and rate limits of a workflow definition.
// They are enforced across every runner by counters in the database: an
// instance takes a slot in each limited scope when it is admitted, before
// its first run starts, and holds it until it is terminal.
type Limits struct {
	// MaxRunning is the most admitted, not yet terminal instances of the
	// workflow; 0 for no limit.
	MaxRunning int
	// Rate limits the starts of the workflow's instances.
	Rate RateLimit
	// Key computes the concurrency key of an instance; nil for none.
	Key KeyFunc
	// KeyMaxRunning is the most admitted, not yet terminal instances per key.
	KeyMaxRunning int
	// KeyRate limits the starts per key.
	KeyRate RateLimit
}

// Limited reports whether l limits anything.
func (l *Limits) Limited() bool {
	return l.MaxRunning > 0 || !l.Rate.IsZero() || l.Key != nil
}

// WithMaxRunning lets at most n instances of the workflow be admitted and
// not yet terminal at once, across every runner; the others wait, queued,
// until one ends.
func WithMaxRunning(n int) Option {
	return func(d *Definition) error {
		if n <= 0 {
			return fmt.Errorf("%w: max running must be positive, got %d", ErrInvalidLimit, n)
		}
		d.Limits.MaxRunning = n
		return nil
	}
}

// WithRateLimit lets at most n instances of the workflow start per period;
// the excess waits (its start is put off until the window allows), never
// dropped.
func WithRateLimit(n int, period time.Duration) Option {
	return func(d *Definition) error {
		r := RateLimit{Limit: n, Period: period}
		if err := r.Validate(); err != nil {
			return err
		}
		d.Limits.Rate = r
		return nil
	}
}

// WithConcurrencyKey gives each instance a concurrency key computed from
// its params, and lets at most max instances of one key be admitted and not
// yet terminal at once ("one at a time per customer" is max 1).
func WithConcurrencyKey(key KeyFunc, max int) Option {
	return func(d *Definition) error {
		if key == nil {
			return fmt.Errorf("%w: a concurrency key needs a key function", ErrInvalidLimit)
		}
		if max <= 0 {
			return fmt.Errorf("%w: max running per key must be positive, got %d", ErrInvalidLimit, max)
		}
		d.Limits.Key, d.Limits.KeyMaxRunning = key, max
		return nil
	}
}

// WithKeyRateLimit lets at most n instances of one concurrency key start
// per period. It needs WithConcurrencyKey (in either order); a key's max
// running then stays as that option set it.
func WithKeyRateLimit(n int, period time.Duration) Option {
	return func(d *Definition) error {
		r := RateLimit{Limit: n, Period: period}
		if err := r.Validate(); err != nil {
			return err
		}
		d.Limits.KeyRate = r
		return nil
	}
}

// validateLimits checks the options together once they all applied.
func (d *Definition) validateLimits() error {
	if !d.Limits.KeyRate.IsZero() && d.Limits.Key == nil {
		return fmt.Errorf("%w: a per-key rate limit needs WithConcurrencyKey", ErrInvalidLimit)
	}
	return nil
}
