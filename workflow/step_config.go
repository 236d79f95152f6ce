package workflow

import (
	"encoding/json"
	"fmt"
	"time"
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

// RetryPolicy says how often and how soon a failed step is tried again.
type RetryPolicy struct {
	// Limit is how many retries follow the first attempt; 0 means none.
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
}

// DefaultRetryPolicy returns the policy of a step that sets none: 5 retries,
// 10 seconds, exponential.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Limit: DefaultRetryLimit, Delay: DefaultRetryDelay, Backoff: DefaultBackoff}
}

// DelayFor returns the wait before retry n (1 for the first retry).
func (p RetryPolicy) DelayFor(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	var d time.Duration
	switch p.Backoff {
	case BackoffConstant:
		d = p.Delay
	case BackoffLinear:
		d = p.Delay * time.Duration(n)
	default:
		d = p.Delay
		for i := 1; i < n && d < MaxSleep; i++ {
			d *= 2
		}
	}
	if d > MaxSleep || d < 0 {
		d = MaxSleep
	}
	return d
}

// Validate rejects a negative limit or delay and unknown backoff kinds.
func (p RetryPolicy) Validate() error {
	if p.Limit < 0 {
		return fmt.Errorf("%w: retry limit %d is negative", ErrInvalidRequest, p.Limit)
	}
	if p.Delay < 0 {
		return fmt.Errorf("%w: retry delay %s is negative", ErrInvalidRequest, p.Delay)
	}
	switch p.Backoff {
	case "", BackoffConstant, BackoffLinear, BackoffExponential:
		return nil
	}
	return fmt.Errorf("%w: unknown backoff %q (use constant, linear or exponential)", ErrInvalidRequest, p.Backoff)
}

// UnmarshalJSON accepts the delay as a string ("10 seconds") or milliseconds.
func (p *RetryPolicy) UnmarshalJSON(b []byte) error {
	var aux struct {
		Limit   *int     `json:"limit"`
		Delay   Duration `json:"delay"`
		Backoff Backoff  `json:"backoff"`
	}
	aux.Delay = Duration(DefaultRetryDelay)
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*p = RetryPolicy{Limit: DefaultRetryLimit, Delay: aux.Delay.Std(), Backoff: aux.Backoff}
	if aux.Limit != nil {
		p.Limit = *aux.Limit
	}
	if p.Backoff == "" {
		p.Backoff = DefaultBackoff
	}
	return nil
}

// MarshalJSON writes the delay as a string such as "10 seconds".
func (p RetryPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Limit   int      `json:"limit"`
		Delay   Duration `json:"delay"`
		Backoff Backoff  `json:"backoff,omitempty"`
	}{p.Limit, Duration(p.Delay), p.Backoff})
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
}

// UnmarshalJSON accepts the timeout as a string ("10 minutes") or milliseconds.
func (c *StepConfig) UnmarshalJSON(b []byte) error {
	var aux struct {
		Retries *RetryPolicy `json:"retries"`
		Timeout Duration     `json:"timeout"`
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
		Retries *RetryPolicy `json:"retries,omitempty"`
		Timeout Duration     `json:"timeout,omitempty"`
	}{c.Retries, Duration(c.Timeout)})
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
		Type    string   `json:"type"`
		Timeout Duration `json:"timeout"`
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
