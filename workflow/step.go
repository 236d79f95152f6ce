package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/internal/wfhook"
)

// Step is how workflow code performs durable operations. The runner gives Run
// a Step bound to the instance's checkpoints; a step name identifies a step
// within a run (names in loops must carry the index). Steps with different
// names may run concurrently from several goroutines.
type Step interface {
	// Do runs fn once and records its JSON-encoded result, which it returns;
	// on replay it returns the recorded result without calling fn. A failed
	// attempt is retried durably according to the step's retry policy; when
	// the step fails for good, Do returns a *StepError. Prefer the typed
	// workflow.Do.
	Do(name string, fn StepFunc, opts ...StepOption) (json.RawMessage, error)
	// Sleep suspends the instance for d (at most 365 days). The wake-up time is
	// recorded the first time the step runs, so replays don't extend it.
	Sleep(name string, d time.Duration) error
	// SleepUntil suspends the instance until t; a time in the past goes on at once.
	SleepUntil(name string, t time.Time) error
	// WaitForEvent suspends the instance until an event of opts.Type is sent
	// to it, or until the timeout, when it returns an error matching
	// ErrEventTimeout. An event sent before the wait is buffered and consumed
	// at once, oldest first.
	WaitForEvent(name string, opts WaitOptions) (*ReceivedEvent, error)
	// Invoke starts a child workflow (opts.Workflow, a Go workflow or a
	// flow) and waits for its end, returning its JSON output; see the
	// typed workflow.Invoke, which callers should prefer.
	Invoke(name string, opts InvokeOptions) (json.RawMessage, error)
}

// StepFunc is the callback of a step: it does the work and returns a value
// that is encoded as JSON. Its context carries the attempt (see Attempt) and is
// cancelled when the attempt times out.
type StepFunc func(ctx context.Context) (any, error)

// ReceivedEvent is an event consumed by WaitForEvent.
type ReceivedEvent struct {
	// Type is the event type.
	Type string `json:"type"`
	// Payload is the JSON payload as sent.
	Payload json.RawMessage `json:"payload"`
	// Timestamp is when the event was sent.
	Timestamp time.Time `json:"timestamp"`
}

// Decode decodes the payload into v.
func (e *ReceivedEvent) Decode(v any) error {
	if len(e.Payload) == 0 {
		return json.Unmarshal([]byte("null"), v)
	}
	return json.Unmarshal(e.Payload, v)
}

// Do runs a typed step: fn's result is recorded as JSON and decoded back into
// T, on the first run as on replay.
//
//	total, err := workflow.Do(step, "sum", func(ctx context.Context) (int, error) { return 42, nil })
func Do[T any](step Step, name string, fn func(ctx context.Context) (T, error), opts ...StepOption) (T, error) {
	var out T
	raw, err := step.Do(name, func(ctx context.Context) (any, error) { return fn(ctx) }, opts...)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("decoding result of step %q: %w", name, err)
	}
	return out, nil
}

// DoVoid runs fn as a durable step that returns nothing but its error, as Do
// does for a step with a result: a completed step is not run again on replay.
// Its recorded result is null, and a recorded result is never decoded, so a
// Do step whose result nobody read can become a DoVoid step without
// breaking the replay of instances in flight.
//
//	err := workflow.DoVoid(step, "send-email", func(ctx context.Context) error {
//		return mailer.Send(ctx, to, body)
//	})
func DoVoid(step Step, name string, fn func(ctx context.Context) error, opts ...StepOption) error {
	_, err := step.Do(name, func(ctx context.Context) (any, error) { return nil, fn(ctx) }, opts...)
	return err
}

// WaitForEvent waits for an event and decodes its payload into T.
func WaitForEvent[T any](step Step, name string, opts WaitOptions) (T, error) {
	var out T
	ev, err := step.WaitForEvent(name, opts)
	if err != nil {
		return out, err
	}
	if err := ev.Decode(&out); err != nil {
		return out, fmt.Errorf("decoding payload of event %q for step %q: %w", ev.Type, name, err)
	}
	return out, nil
}

// StepInfo describes the attempt a step callback is running.
type StepInfo struct {
	// WorkflowName and InstanceID name the instance.
	WorkflowName string
	InstanceID   string
	// RunNumber is the instance's run (1 until it is restarted).
	RunNumber int
	// Step is the step name.
	Step string
	// Attempt is 1 for the first attempt, 2 for the first retry, and so on.
	Attempt int
	// Deadline is the instance's deadline (zero when it has none): the
	// attempt's context is cancelled at it, with ErrDeadlineExceeded as its
	// cause (context.Cause).
	Deadline time.Time
	// StartedAt is when the runner started the attempt, by its clock: the
	// moment it last made sure, just before calling the step's function,
	// that it held the instance's lease. An attempt whose process stops
	// after that moment (SIGSTOP, a pause of the whole process) may run on
	// when it resumes, as one stopped inside the function does; its result
	// is never recorded once another runner took the instance over.
	StartedAt time.Time
}

// StepInfoFromContext returns the step attempt a callback runs, if any.
func StepInfoFromContext(ctx context.Context) (StepInfo, bool) {
	info, ok := ctx.Value(wfhook.StepInfoKey{}).(StepInfo)
	return info, ok
}

// Attempt returns the attempt number of the step callback running with ctx (1
// for the first attempt), or 0 outside a step.
func Attempt(ctx context.Context) int {
	info, _ := StepInfoFromContext(ctx)
	return info.Attempt
}
