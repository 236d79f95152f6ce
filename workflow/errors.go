package workflow

import (
	"errors"
	"fmt"
)

// Errors of the management API. Bindings, the client and the HTTP API return
// these (wrapped with detail), so callers test them with errors.Is.
var (
	// ErrWorkflowNotFound means no workflow is registered under the name.
	ErrWorkflowNotFound = errors.New("workflow not found")
	// ErrInstanceNotFound means no instance has the id.
	ErrInstanceNotFound = errors.New("instance not found")
	// ErrInstanceAlreadyExists means an instance with the id exists already.
	ErrInstanceAlreadyExists = errors.New("instance id already exists")
	// ErrInstanceTerminal means the instance is complete, errored or terminated
	// and the call is not allowed on it.
	ErrInstanceTerminal = errors.New("instance is terminal")
	// ErrInvalidWorkflowName means a workflow name breaks the naming rules.
	ErrInvalidWorkflowName = errors.New("invalid workflow name")
	// ErrInvalidInstanceID means an instance id breaks the naming rules.
	ErrInvalidInstanceID = errors.New("invalid instance id")
	// ErrInvalidEventType means an event type breaks the naming rules.
	ErrInvalidEventType = errors.New("invalid event type")
	// ErrInvalidRequest means some other argument is malformed.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrPayloadTooLarge means params, an event payload, a step result or an
	// output is larger than the engine's payload limit
	// (EngineLimits.MaxPayloadBytes, MaxPayloadBytes by default).
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrPayloadTooDeep means arrays and objects nest deeper than
	// MaxPayloadDepth in params, an event payload, a step result, an output,
	// metadata or a flow definition. It is not an ErrInvalidRequest: the
	// JSON may be valid, only too deep to store the same way on every
	// backend.
	ErrPayloadTooDeep = errors.New("payload nested too deeply")
	// ErrEngineNotBound means a binding was used before its registry was
	// connected to an engine (see Registry.Bind).
	ErrEngineNotBound = errors.New("workflow registry is not bound to an engine")
)

// Errors that step methods return to workflow code.
var (
	// ErrInvalidStepName means a step name is empty, too long or holds control characters.
	ErrInvalidStepName = errors.New("invalid step name")
	// ErrDuplicateStep means a step with the same name is already running
	// concurrently in this run.
	ErrDuplicateStep = errors.New("step name is already running concurrently")
	// ErrStepNameReused means workflow code reached a step name a second time
	// in one run, one call after the other, as a loop with a fixed name
	// does. A step name is the step's identity: the second call would
	// silently return the first one's recorded result. Give each iteration
	// a name of its own: step.Do(fmt.Sprintf("charge-%d", i), …). The error
	// is a *NonRetryableError named ErrorNameStepNameReused; two calls of
	// one name running at the same time get ErrDuplicateStep instead.
	ErrStepNameReused = errors.New("step name used twice in one run")
	// ErrTooManySteps means the run reached more steps than its bound
	// (WithMaxStepsPerRun, else EngineLimits.MaxStepsPerRun, MaxStepsPerRun
	// by default).
	ErrTooManySteps = errors.New("too many steps in one run")
	// ErrStepTypeMismatch means a step name recorded as one kind of step (say a
	// sleep) is now used as another (say a Do), which happens when workflow code
	// changed in a way that is not replay-safe.
	ErrStepTypeMismatch = errors.New("step name reused for a different kind of step")
	// ErrEventTimeout is matched (errors.Is) by the error WaitForEvent returns
	// when no event arrived before the timeout. Code may handle it.
	ErrEventTimeout = errors.New("timed out waiting for event")
	// ErrStepTimeout is matched by the error of a step whose last attempt
	// outlived its timeout.
	ErrStepTimeout = errors.New("step attempt timed out")
	// ErrSuspended is returned by step methods while the runner suspends the
	// run (it sleeps, waits for an event or a retry, is paused, or lost its
	// lease). Return it from Run; whatever the code does after it is discarded.
	ErrSuspended = errors.New("workflow run suspended")
)

// Error names recorded for errors that have no name of their own.
const (
	errorNameDefault      = "Error"
	errorNameNonRetryable = "NonRetryableError"
	// ErrorNameStepTimeout is the recorded name of an attempt timeout.
	ErrorNameStepTimeout = "StepTimeoutError"
	// ErrorNameEventTimeout is the recorded name of a waitForEvent timeout.
	ErrorNameEventTimeout = "EventTimeoutError"
	// ErrorNameStepNameReused is the recorded name of ErrStepNameReused.
	ErrorNameStepNameReused = "StepNameReusedError"
)

// NonRetryableError marks a step failure that must not be retried: the step
// fails at once, whatever its retry policy says.
type NonRetryableError struct {
	// Name is recorded as the error name; empty records "NonRetryableError".
	Name string
	// Err is the cause.
	Err error
}

// NonRetryable wraps err so that the step fails without further attempts.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &NonRetryableError{Err: err}
}

// NewNonRetryableError returns a non-retryable error with a name and message.
func NewNonRetryableError(name, message string) error {
	return &NonRetryableError{Name: name, Err: errors.New(message)}
}

// Error returns the message of the cause.
func (e *NonRetryableError) Error() string {
	if e.Err == nil {
		return "non-retryable error"
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *NonRetryableError) Unwrap() error { return e.Err }

// ErrorName returns the name recorded for the error.
func (e *NonRetryableError) ErrorName() string {
	if e.Name != "" {
		return e.Name
	}
	return errorNameNonRetryable
}

// StepError is what a step returns when it failed for good, and what the same
// step returns on every replay: the recorded name and message, never the
// original Go error value, so that the first run and the replays agree.
type StepError struct {
	// Step is the step name.
	Step string
	// Name is the recorded error name: the name of a NonRetryableError, the
	// ErrorName() of an error that has one, StepTimeoutError,
	// EventTimeoutError, or "Error".
	Name string
	// Message is the recorded error message.
	Message string
	// Attempts is how many attempts were made.
	Attempts int
}

// Error describes the failure.
func (e *StepError) Error() string {
	return fmt.Sprintf("step %q failed after %d attempt(s): %s: %s", e.Step, e.Attempts, e.Name, e.Message)
}

// ErrorName returns the recorded name.
func (e *StepError) ErrorName() string { return e.Name }

// Is matches ErrEventTimeout and ErrStepTimeout by the recorded name.
func (e *StepError) Is(target error) bool {
	switch target {
	case ErrEventTimeout:
		return e.Name == ErrorNameEventTimeout
	case ErrStepTimeout:
		return e.Name == ErrorNameStepTimeout
	}
	return false
}

// ErrorName returns the name under which an error is recorded: the first
// ErrorName() in its chain, "NonRetryableError" for an unnamed
// NonRetryableError, or "Error".
func ErrorName(err error) string {
	var named interface{ ErrorName() string }
	if errors.As(err, &named) {
		if n := named.ErrorName(); n != "" {
			return n
		}
	}
	return errorNameDefault
}

// IsNonRetryable reports whether err, or any error it wraps, is a NonRetryableError.
func IsNonRetryable(err error) bool {
	var nr *NonRetryableError
	return errors.As(err, &nr)
}
