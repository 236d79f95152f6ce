package flow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// End is a transition target that ends the flow. An empty onSuccess ends it
// too; End is for the places that need a step id: a branch condition, a
// branch default, or onFailure (to end the flow successfully after a
// failure was recorded in the context).
const End = "$end"

// MaxDefinitionBytes bounds the JSON of one definition.
const MaxDefinitionBytes = workflow.MaxPayloadBytes

// MaxStepIDLength is the longest step id. The durable step of a visit is named
// "<step id>#<visit>", well within workflow.MaxStepNameLength.
const MaxStepIDLength = 100

var stepIDRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_-]*$`)

// Definition is a flow: data that compiles into a durable workflow.
//
//	{
//	  "id": "order", "version": "1.2.0", "name": "Order processing",
//	  "initialStepId": "fetch",
//	  "steps": {
//	    "fetch": {"id": "fetch", "type": "http",
//	              "config": {"url": "https://shop.example.com/orders/${orderId}"},
//	              "outputKey": "order", "transitions": {"onSuccess": "check"},
//	              "retries": {"limit": 3, "delay": "2 seconds"}, "timeout": "30 seconds"},
//	    "check": {"id": "check", "type": "branch",
//	              "config": {"conditions": [{"left": {"path": "order.body.total"}, "op": "gt",
//	                                         "right": {"value": 100}, "next": "review"}],
//	                         "default": "$end"}},
//	    "review": {"id": "review", "type": "wait-for-event",
//	               "config": {"type": "review", "timeout": "1 day"}, "outputKey": "review"}
//	  },
//	  "output": "review"
//	}
type Definition struct {
	// ID names the flow; it is the workflow name the compiled flow is
	// registered under, so it follows workflow.ValidateWorkflowName.
	ID string `json:"id"`
	// Version is a semantic version (see ParseVersion). An instance runs the
	// version it started with.
	Version string `json:"version"`
	// Name is a human-readable title.
	Name string `json:"name,omitempty"`
	// Description says what the flow is for.
	Description string `json:"description,omitempty"`
	// InitialStepID is the step the flow starts with.
	InitialStepID string `json:"initialStepId"`
	// Steps are the flow's steps by id; each key must equal its step's ID.
	Steps map[string]*Step `json:"steps"`
	// Output is a dot path into the final context that is the flow's output;
	// empty outputs the whole context. A path that is missing at the end
	// outputs null.
	Output string `json:"output,omitempty"`
	// Queue is the task queue the flow's instances run on unless their
	// Create call names another: only runners that serve it run them. It
	// follows workflow.ValidateQueueName. An instance runs on the queue of
	// the version it is pinned to.
	//
	// Defaults to workflow.DefaultQueue.
	Queue string `json:"queue,omitempty"`
	// Deadline, when set, is how long after its creation an instance may
	// run before it errors with DeadlineExceeded (workflow.WithDeadline).
	// A stored flow's instances follow the version they pin.
	Deadline *dftype.Duration `json:"deadline,omitempty"`
	// Retry, when set, runs a failed run again after a backoff, replaying
	// the steps that completed (workflow.WithWorkflowRetry). A stored
	// flow's instances follow the version they pin.
	Retry *RetryPolicy `json:"retry,omitempty"`
	// MaxRunning is the most admitted, not yet terminal instances of the
	// flow (docs/limits.md); absent for no limit.
	MaxRunning *int `json:"maxRunning,omitempty"`
	// RateLimit limits the starts of the flow's instances.
	RateLimit *Rate `json:"rateLimit,omitempty"`
	// Concurrency is the flow's concurrency key and its limits.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
}

// Step is one node of a flow.
type Step struct {
	// ID identifies the step; it must equal the step's key in
	// Definition.Steps and match ^[a-zA-Z0-9_][a-zA-Z0-9_-]*$ (at most 100
	// characters).
	ID string `json:"id"`
	// Type names the handler that runs the step ("http", "branch", ...).
	Type string `json:"type"`
	// Config is the handler's configuration, validated by the handler.
	Config json.RawMessage `json:"config,omitempty"`
	// Input selects the value the handler works on; nil selects null.
	Input *Selector `json:"input,omitempty"`
	// OutputKey is the dot path of the context where the step's output is
	// stored, and where the error is stored when onFailure catches a failure;
	// empty discards the output (a set step then merges its values into the
	// context).
	OutputKey string `json:"outputKey,omitempty"`
	// Transitions say which step comes next.
	Transitions Transitions `json:"transitions,omitzero"`
	// Retries is the retry policy of a step that runs a handler; nil means
	// workflow.DefaultRetryPolicy (5 retries, 10 seconds, exponential). A
	// delay, wait-for-event or subflow step refuses it.
	Retries *RetryPolicy `json:"retries,omitempty"`
	// Timeout bounds each attempt of a step that runs a handler. A delay,
	// wait-for-event or subflow step refuses it (a wait's and a subflow's
	// timeout is in its config).
	//
	// Defaults to 10 minutes (workflow.DefaultStepTimeout).
	Timeout *dftype.Duration `json:"timeout,omitempty"`
	// Compensate names the step that undoes this one (a saga's
	// compensation, see workflow.Compensate): once this step completed, if
	// the flow then fails for good or a caller asks for its compensation,
	// the named step's handler runs with its own config, input (selected
	// from the context as it is then), retries and timeout, as the durable
	// step "compensate:<this step's name>" (for example
	// "compensate:reserve#1"), in the reverse order of completion. Its
	// output is discarded and its transitions are not followed. A subflow
	// step may have a compensation (registered once its child completed)
	// and may be one: its child is then invoked, with the input selected
	// then, and waited for (a child that fails fails the compensation).
	// Only a step that runs a handler or a subflow (not a sleep, a wait or
	// a branch) can have or be a compensation.
	Compensate string `json:"compensate,omitempty"`
}

// Transitions say which step follows a step.
type Transitions struct {
	// OnSuccess is the next step after success; empty (or End) ends the
	// flow. A branch step chooses its next step from its config instead.
	OnSuccess string `json:"onSuccess,omitempty"`
	// OnFailure is the step that follows a failure after the step's retries
	// (or a wait-for-event timeout); the error {stepId, name, message,
	// attempts} is stored at the step's outputKey, or at ErrorKey when it has
	// none. Empty fails the flow with the step's error.
	OnFailure string `json:"onFailure,omitempty"`
}

// ErrorKey is the context key where a failure caught by onFailure is stored
// when the failed step has no outputKey.
const ErrorKey = "error"

// RetryPolicy is a step's retry policy in a definition; unset fields take
// the defaults of workflow.DefaultRetryPolicy.
type RetryPolicy struct {
	// Limit is how many retries follow the first attempt; 0 means none.
	//
	// Defaults to 5.
	Limit *int `json:"limit,omitempty"`
	// Delay is the base delay between attempts ("10 seconds").
	//
	// Defaults to 10 seconds.
	Delay *dftype.Duration `json:"delay,omitempty"`
	// Backoff is constant, linear or exponential.
	//
	// Defaults to exponential.
	Backoff workflow.Backoff `json:"backoff,omitempty"`
	// Unlimited retries without end (Limit is then ignored).
	//
	// Defaults to false.
	Unlimited bool `json:"unlimited,omitempty"`
	// MaxDelay caps each wait, jitter included ("5 minutes").
	//
	// Defaults to no cap below workflow.MaxSleep.
	MaxDelay *dftype.Duration `json:"maxDelay,omitempty"`
	// Jitter spreads each wait by ±20% (workflow.JitterFraction); false
	// turns it off.
	//
	// Defaults to true.
	Jitter *bool `json:"jitter,omitempty"`
	// NonRetryable lists error names that fail the step at once, without
	// the retries left: for example "HttpError" or the name a code step's
	// error reports.
	NonRetryable []string `json:"nonRetryable,omitempty"`
}

// Policy returns the workflow retry policy with defaults filled in.
func (p *RetryPolicy) Policy() workflow.RetryPolicy {
	out := workflow.DefaultRetryPolicy()
	if p == nil {
		return out
	}
	if p.Limit != nil {
		out.Limit = *p.Limit
	}
	if p.Delay != nil {
		out.Delay = p.Delay.Std()
	}
	if p.Backoff != "" {
		out.Backoff = p.Backoff
	}
	if p.Unlimited {
		out.Limit = workflow.UnlimitedRetries
	}
	if p.MaxDelay != nil {
		out.MaxDelay = p.MaxDelay.Std()
	}
	if p.Jitter != nil {
		out.NoJitter = !*p.Jitter
	}
	out.NonRetryable = p.NonRetryable
	return out
}

// Parse reads a definition from JSON strictly: an unknown field, a value of
// the wrong type or a malformed selector, duration or retry policy is a
// problem at its path ("steps.fetch.retries.limit: must be an integer"), and
// all of them are reported in one *ValidationError. Parse checks the shape
// only; Validate (or Compile) checks what the definition means.
func Parse(b []byte) (*Definition, error) {
	if len(b) > MaxDefinitionBytes {
		return nil, &ValidationError{Problems: []Problem{{Message: fmt.Sprintf("definition is %d bytes, the limit is %d", len(b), MaxDefinitionBytes)}}}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &ValidationError{Problems: []Problem{{Message: "definition is empty"}}}
	}
	var def Definition
	if err := newValidationError(decodeStrict(b, &def, ""), nil); err != nil {
		return nil, err
	}
	return &def, nil
}

// ParseAndValidate reads a definition as Parse does and checks it as
// Validate does, and reports the problems of both at once: a definition
// with an unknown field and a missing initial step gets both problems in
// one *ValidationError, not the first alone. Validate checks what Parse
// could decode; a problem of what it means at or under a path whose shape
// was wrong already is left out, as it only repeats the first (a version
// of the wrong type is not also "required"). The warnings are returned
// with or without an error.
func ParseAndValidate(b []byte, handlers *Handlers) (*Definition, []Problem, error) {
	def, err := Parse(b)
	if err == nil {
		warnings, err := Validate(def, handlers)
		if err != nil {
			return nil, warnings, err
		}
		return def, warnings, nil
	}
	ve, ok := errors.AsType[*ValidationError](err)
	if !ok || !json.Valid(b) || len(b) > MaxDefinitionBytes {
		return nil, nil, err
	}
	// Parse refused the shape; decode what there is and check its meaning
	// too, so that every problem is reported at once.
	var partial Definition
	_ = decodeStrict(b, &partial, "") // the same problems as Parse's
	problems := slices.Clone(ve.Problems)
	warnings, verr := Validate(&partial, handlers)
	if more, ok := errors.AsType[*ValidationError](verr); ok {
		for _, p := range more.Problems {
			if !underAny(p.Path, ve.Problems) {
				problems = append(problems, p)
			}
		}
	} else if verr != nil {
		return nil, nil, verr
	}
	return nil, warnings, newValidationError(problems, warnings)
}

// underAny reports whether path is one of the problems' paths or under one
// of them.
func underAny(path string, problems []Problem) bool {
	for _, p := range problems {
		if p.Path == "" || path == p.Path || strings.HasPrefix(path, p.Path+".") || strings.HasPrefix(path, p.Path+"[") {
			return true
		}
	}
	return false
}

// StepName returns the durable step name of the visit-th visit (from 1) of
// step id: "<id>#<visit>". It is what histories show for a flow's steps.
func StepName(id string, visit int) string { return fmt.Sprintf("%s#%d", id, visit) }

// timeout returns the step's attempt timeout, or 0 for the default.
func (s *Step) timeout() time.Duration {
	if s.Timeout == nil {
		return 0
	}
	return s.Timeout.Std()
}
