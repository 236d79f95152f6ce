package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/dftype"
)

// Backoff says how the delay between attempts grows.
type Backoff string

// Backoff kinds. With delay d, the wait before retry n (n = 1 for the first
// retry) is d for constant, d·n for linear and d·2^(n−1) for exponential.
const (
	BackoffConstant    Backoff = "constant"
	BackoffLinear      Backoff = "linear"
	BackoffExponential Backoff = "exponential"
)

// Defaults of a step's configuration.
const (
	// DefaultRetryLimit is how many retries follow the first attempt.
	DefaultRetryLimit = 5
	// DefaultRetryDelay is the base delay between attempts.
	DefaultRetryDelay = 10 * time.Second
	// DefaultBackoff is the default backoff kind.
	DefaultBackoff = BackoffExponential
	// DefaultStepTimeout bounds one attempt.
	DefaultStepTimeout = 10 * time.Minute
)

// RetryPolicy says how often and how soon a failed step (or, as a
// workflow's retry, a failed run) is tried again.
type RetryPolicy struct {
	// Limit is how many retries follow the first attempt; 0 means none.
	// UnlimitedRetries (or any larger value) retries without end: it is
	// recorded as unlimited (StepInfo.MaxAttempts is UnlimitedAttempts),
	// never as a number that overflows a database column.
	//
	// Defaults to 5.
	Limit int `json:"limit"`
	// Delay is the base delay between attempts.
	//
	// Defaults to 10 seconds.
	Delay time.Duration `json:"delay"`
	// Backoff is constant, linear or exponential.
	//
	// Defaults to exponential.
	Backoff Backoff `json:"backoff,omitempty"`
	// MaxDelay caps each wait, jitter included; 0 caps it at MaxSleep only.
	//
	// Defaults to 0 (no cap below MaxSleep).
	MaxDelay time.Duration `json:"maxDelay,omitempty"`
	// NoJitter turns jitter off: every wait is exactly what Backoff says.
	// With jitter (the default) each wait is spread uniformly over ±20%
	// (JitterFraction) of it, so that many instances failing together do
	// not retry together. The runner records the computed time
	// (next_retry_at), so replay never draws again.
	//
	// Defaults to false (jitter on). In JSON it is "jitter": false.
	NoJitter bool `json:"-"`
	// NonRetryable lists error names (the ErrorName of the step's error)
	// that fail the step at once, without the retries left: for a flow, the
	// names its HTTP or code steps report; for Go code, the ErrorName() of
	// its errors.
	NonRetryable []string `json:"nonRetryable,omitempty"`
}

// UnlimitedRetries is the Limit of a policy that retries without end. Any
// Limit at or above it means the same.
const UnlimitedRetries = math.MaxInt32

// UnlimitedAttempts is the MaxAttempts recorded for a step whose policy
// retries without end.
const UnlimitedAttempts = -1

// JitterFraction is the spread of the default jitter: a wait d becomes a
// uniform draw in [d·(1−JitterFraction), d·(1+JitterFraction)], capped by
// MaxDelay and MaxSleep.
const JitterFraction = 0.2

// DefaultRetryPolicy returns the policy of a step that sets none: 5 retries,
// 10 seconds, exponential, with jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Limit: DefaultRetryLimit, Delay: DefaultRetryDelay, Backoff: DefaultBackoff}
}

// Unlimited reports whether the policy retries without end.
func (p RetryPolicy) Unlimited() bool { return p.Limit >= UnlimitedRetries }

// MaxAttempts is how many attempts the policy allows in all, or
// UnlimitedAttempts: the value a step records.
func (p RetryPolicy) MaxAttempts() int {
	if p.Unlimited() {
		return UnlimitedAttempts
	}
	return p.Limit + 1
}

// Exhausted reports whether attempt (1 for the first) was the last the
// policy allows.
func (p RetryPolicy) Exhausted(attempt int) bool {
	return !p.Unlimited() && attempt > p.Limit
}

// IsNonRetryable reports whether the error name is one of NonRetryable.
func (p RetryPolicy) IsNonRetryable(name string) bool {
	for _, n := range p.NonRetryable {
		if n == name {
			return true
		}
	}
	return false
}

// DelayFor returns the wait before retry n (1 for the first retry) without
// jitter, capped by MaxDelay.
func (p RetryPolicy) DelayFor(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	var d time.Duration
	switch p.Backoff {
	case BackoffConstant:
		d = p.Delay
	case BackoffLinear:
		if n > int(MaxSleep/max(p.Delay, 1)) {
			d = MaxSleep
		} else {
			d = p.Delay * time.Duration(n)
		}
	default:
		d = p.Delay
		for i := 1; i < n && d > 0 && d < MaxSleep; i++ {
			d *= 2
		}
	}
	return p.capDelay(d)
}

// NextDelay returns the wait before retry n with jitter applied: r is a draw
// in [0, 1) (the runner's random source; a test passes a fixed value), and
// the wait is DelayFor's d moved by (2r−1)·JitterFraction·d, then capped by
// MaxDelay. Without jitter (NoJitter) r is ignored.
func (p RetryPolicy) NextDelay(n int, r float64) time.Duration {
	d := p.DelayFor(n)
	if p.NoJitter {
		return d
	}
	r = min(max(r, 0), 1)
	d += time.Duration((2*r - 1) * JitterFraction * float64(d))
	return p.capDelay(d)
}

func (p RetryPolicy) capDelay(d time.Duration) time.Duration {
	if d > MaxSleep || d < 0 {
		d = MaxSleep
	}
	if p.MaxDelay > 0 && d > p.MaxDelay {
		d = p.MaxDelay
	}
	return d
}

// Validate rejects a negative limit, delay or maximum delay, unknown backoff
// kinds and empty non-retryable names.
func (p RetryPolicy) Validate() error {
	if p.Limit < 0 {
		return fmt.Errorf("%w: retry limit %d is negative", ErrInvalidRequest, p.Limit)
	}
	if p.Delay < 0 {
		return fmt.Errorf("%w: retry delay %s is negative", ErrInvalidRequest, p.Delay)
	}
	if p.MaxDelay < 0 {
		return fmt.Errorf("%w: retry maxDelay %s is negative", ErrInvalidRequest, p.MaxDelay)
	}
	for _, n := range p.NonRetryable {
		if n == "" {
			return fmt.Errorf("%w: a nonRetryable error name is empty", ErrInvalidRequest)
		}
	}
	switch p.Backoff {
	case "", BackoffConstant, BackoffLinear, BackoffExponential:
		return nil
	}
	return fmt.Errorf("%w: unknown backoff %q (use constant, linear or exponential)", ErrInvalidRequest, p.Backoff)
}

// retryPolicyJSON is the JSON form of a RetryPolicy.
type retryPolicyJSON struct {
	Limit        json.RawMessage `json:"limit,omitempty"`
	Delay        dftype.Duration `json:"delay"`
	Backoff      Backoff         `json:"backoff,omitempty"`
	MaxDelay     dftype.Duration `json:"maxDelay,omitempty"`
	Jitter       *bool           `json:"jitter,omitempty"`
	NonRetryable []string        `json:"nonRetryable,omitempty"`
}

// UnmarshalJSON accepts the delays as strings ("10 seconds") or
// milliseconds, and the limit as a number or "unlimited".
func (p *RetryPolicy) UnmarshalJSON(b []byte) error {
	var aux retryPolicyJSON
	aux.Delay = dftype.Duration(DefaultRetryDelay)
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*p = RetryPolicy{
		Limit: DefaultRetryLimit, Delay: aux.Delay.Std(), Backoff: aux.Backoff,
		MaxDelay: aux.MaxDelay.Std(), NonRetryable: aux.NonRetryable,
	}
	if len(aux.Limit) > 0 && string(aux.Limit) != "null" {
		var s string
		if err := json.Unmarshal(aux.Limit, &s); err == nil {
			if s != "unlimited" {
				return fmt.Errorf("%w: retry limit %q is neither a number nor \"unlimited\"", ErrInvalidRequest, s)
			}
			p.Limit = UnlimitedRetries
		} else {
			var n int64
			if err := json.Unmarshal(aux.Limit, &n); err != nil {
				return fmt.Errorf("%w: retry limit %s is neither a number nor \"unlimited\"", ErrInvalidRequest, aux.Limit)
			}
			p.Limit = int(min(n, UnlimitedRetries))
			if n < 0 {
				p.Limit = -1 // Validate rejects it
			}
		}
	}
	if aux.Jitter != nil {
		p.NoJitter = !*aux.Jitter
	}
	if p.Backoff == "" {
		p.Backoff = DefaultBackoff
	}
	return nil
}

// MarshalJSON writes the delays as strings such as "10 seconds" and an
// unlimited limit as "unlimited".
func (p RetryPolicy) MarshalJSON() ([]byte, error) {
	limit, _ := json.Marshal(p.Limit)
	if p.Unlimited() {
		limit = []byte(`"unlimited"`)
	}
	aux := retryPolicyJSON{
		Limit: limit, Delay: dftype.Duration(p.Delay), Backoff: p.Backoff,
		MaxDelay: dftype.Duration(p.MaxDelay), NonRetryable: p.NonRetryable,
	}
	if p.NoJitter {
		f := false
		aux.Jitter = &f
	}
	return json.Marshal(aux)
}

// StepConfig is the configuration of one step.Do.
type StepConfig struct {
	// Retries is the retry policy; nil means DefaultRetryPolicy().
	Retries *RetryPolicy `json:"retries,omitempty"`
	// Timeout bounds each attempt, best-effort: a result that arrives after it
	// is never committed and the attempt counts as failed.
	//
	// Defaults to 10 minutes.
	Timeout time.Duration `json:"timeout,omitempty"`

	// compensation is set by Compensate and DoWithCompensation.
	compensation *compensation
}

// UnmarshalJSON accepts the timeout as a string ("10 minutes") or milliseconds.
func (c *StepConfig) UnmarshalJSON(b []byte) error {
	var aux struct {
		Retries *RetryPolicy    `json:"retries"`
		Timeout dftype.Duration `json:"timeout"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*c = StepConfig{Retries: aux.Retries, Timeout: aux.Timeout.Std()}
	return nil
}

// MarshalJSON writes the timeout as a string.
func (c StepConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Retries *RetryPolicy    `json:"retries,omitempty"`
		Timeout dftype.Duration `json:"timeout,omitempty"`
	}{c.Retries, dftype.Duration(c.Timeout)})
}

// Resolved returns the configuration with defaults filled in.
func (c StepConfig) Resolved() StepConfig {
	out := c
	if out.Retries == nil {
		p := DefaultRetryPolicy()
		out.Retries = &p
	} else if out.Retries.Backoff == "" {
		p := *out.Retries
		p.Backoff = DefaultBackoff
		out.Retries = &p
	}
	if out.Timeout <= 0 {
		out.Timeout = DefaultStepTimeout
	}
	return out
}

// Validate rejects a negative timeout and an invalid retry policy.
func (c StepConfig) Validate() error {
	if c.Timeout < 0 {
		return fmt.Errorf("%w: step timeout %s is negative", ErrInvalidRequest, c.Timeout)
	}
	if c.Retries != nil {
		return c.Retries.Validate()
	}
	return nil
}

// StepOption configures one step.Do.
type StepOption func(*StepConfig)

// WithConfig replaces the whole configuration.
func WithConfig(c StepConfig) StepOption {
	return func(dst *StepConfig) { *dst = c }
}

// WithRetries sets the retry policy.
func WithRetries(p RetryPolicy) StepOption {
	return func(c *StepConfig) { c.Retries = &p }
}

// WithNoRetries makes the first failure final.
func WithNoRetries() StepOption {
	return func(c *StepConfig) { c.Retries = &RetryPolicy{Limit: 0, Backoff: BackoffConstant} }
}

// WithTimeout bounds each attempt.
func WithTimeout(d time.Duration) StepOption {
	return func(c *StepConfig) { c.Timeout = d }
}

// WaitOptions configures step.WaitForEvent.
type WaitOptions struct {
	// Type is the event type to wait for.
	Type string `json:"type"`
	// Timeout is how long to wait, from 1 second to 365 days; when it passes
	// WaitForEvent returns an error matching ErrEventTimeout.
	//
	// Defaults to 24 hours.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// UnmarshalJSON accepts the timeout as a string ("1 hour") or milliseconds.
func (o *WaitOptions) UnmarshalJSON(b []byte) error {
	var aux struct {
		Type    string          `json:"type"`
		Timeout dftype.Duration `json:"timeout"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*o = WaitOptions{Type: aux.Type, Timeout: aux.Timeout.Std()}
	return nil
}

// Resolved fills the default timeout and validates type and timeout.
func (o WaitOptions) Resolved() (WaitOptions, error) {
	if err := ValidateEventType(o.Type); err != nil {
		return o, err
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultEventTimeout
	}
	if o.Timeout < MinEventTimeout || o.Timeout > MaxEventTimeout {
		return o, fmt.Errorf("%w: waitForEvent timeout %s must be between 1 second and 365 days", ErrInvalidRequest, o.Timeout)
	}
	return o, nil
}
