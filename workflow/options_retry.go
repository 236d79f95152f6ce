package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrorNameDeadlineExceeded is the error name of an instance whose deadline
// passed before it ended: recorded by the runner whatever the instance was
// doing (running a step, sleeping, waiting for an event or a retry).
const ErrorNameDeadlineExceeded = "DeadlineExceeded"

// ErrDeadlineExceeded is the cause (context.Cause) of a running step's
// context cancelled because the instance's deadline passed.
var ErrDeadlineExceeded = errors.New("workflow deadline exceeded")

// WithDeadline gives every instance of the workflow a deadline d after its
// creation, unless its Create call sets one (dftype.CreateRequest.Deadline): when
// the deadline passes the instance errors with ErrorNameDeadlineExceeded,
// even while it sleeps or waits for an event, and a running step's context
// is cancelled at it. A workflow retry never runs past it.
func WithDeadline(d time.Duration) Option {
	return func(def *Definition) error {
		if err := ValidateDeadline(d); err != nil {
			return err
		}
		def.Deadline = d
		return nil
	}
}

// WithWorkflowRetry runs a failed run of the workflow again after the
// policy's backoff, up to its Limit more times: the steps that completed
// are replayed from history (their functions are not called again) and the
// step that failed runs again with a fresh set of attempts. A terminated
// instance, a run that failed with a NonRetryableError (or one of
// p.NonRetryable's names) and an instance past its deadline are not
// retried. The instance's RunAttempt counts the runs so far.
func WithWorkflowRetry(p RetryPolicy) Option {
	return func(def *Definition) error {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("workflow retry: %w", err)
		}
		if p.Backoff == "" {
			p.Backoff = DefaultBackoff
		}
		def.Retry = &p
		return nil
	}
}

// ValidateDeadline rejects a deadline duration that is not positive or
// longer than MaxSleep.
func ValidateDeadline(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: deadline %s must be positive", ErrInvalidRequest, d)
	}
	if d > MaxSleep {
		return fmt.Errorf("%w: deadline %s is longer than %s", ErrInvalidRequest, d, MaxSleep)
	}
	return nil
}

// Settings are the workflow-level retry and deadline settings of one
// instance.
type Settings struct {
	// Deadline, when positive, is how long after its creation the instance
	// may run (as Definition.Deadline).
	Deadline time.Duration
	// Retry is its workflow retry policy, or nil (as Definition.Retry).
	Retry *RetryPolicy
}

// SettingsFunc returns the settings of an instance of a workflow whose
// settings depend on the instance, from its metadata (a flow's pinned
// version): the client calls it at create with the metadata it stores, the
// runner when a run fails.
type SettingsFunc func(ctx context.Context, metadata json.RawMessage) (Settings, error)

// WithSettingsFunc makes the workflow's deadline and workflow retry depend
// on the instance: f replaces Definition.Deadline and Definition.Retry. The
// flow registry registers stored flows with it, so each instance follows
// the "deadline" and "retry" of the version it runs.
func WithSettingsFunc(f SettingsFunc) Option {
	return func(def *Definition) error {
		def.SettingsFunc = f
		return nil
	}
}

// SettingsOf returns the settings of an instance of def with metadata:
// def.SettingsFunc's, or def's own.
func (d Definition) SettingsOf(ctx context.Context, metadata json.RawMessage) (Settings, error) {
	if d.SettingsFunc != nil {
		return d.SettingsFunc(ctx, metadata)
	}
	return Settings{Deadline: d.Deadline, Retry: d.Retry}, nil
}
