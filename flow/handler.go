package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Handler runs the steps of one type. Host code implements it to add its own
// step types and passes it to NewHandlers with WithHandler.
//
// Run is called inside a durable step (step.Do): once per attempt, never
// again once the step completed, and its result is recorded as JSON and
// stored at the step's outputKey. Its context is the attempt's: it carries
// workflow.StepInfo (workflow.StepInfoFromContext) and is cancelled when the
// attempt times out or the run is suspended, so a long-running handler must
// watch it. An error fails the attempt; it is retried by the step's retry
// policy unless it is (or wraps) a *workflow.NonRetryableError, and its
// workflow.ErrorName is what the history and onFailure see.
type Handler interface {
	// Type is the step type the handler runs, such as "http". It must be
	// stable: definitions name it.
	Type() string
	// Validate checks a step's config before a flow is accepted. It returns
	// nil, a *ValidationError whose paths are relative to the config (see
	// DecodeConfig), or any other error, which is reported at the config.
	Validate(config json.RawMessage) error
	// Run executes one attempt of a step.
	Run(ctx context.Context, inv *Invocation) (any, error)
}

// Invocation is what a handler's Run gets: the step, its config, its input
// and the flow context. Input and Context are the handler's own copies.
type Invocation struct {
	// FlowID and FlowVersion name the flow definition.
	FlowID      string
	FlowVersion string
	// StepID is the step's id and Visit counts its visits in this run, from 1.
	StepID string
	Visit  int
	// Config is the step's config as written; Validate accepted it.
	Config json.RawMessage
	// Input is the value the step's input selector selected: nil, bool,
	// json.Number, string, []any or map[string]any.
	Input any
	// Context is the flow context before the step.
	Context map[string]any
}

// Select resolves a selector (say one from the handler's config) against the
// invocation's context; a missing key or path selects nil.
func (inv *Invocation) Select(s *Selector) (any, error) {
	v, _, err := s.Select(inv.Context)
	return v, err
}

// Expand fills a template from the invocation's context (see Expand).
func (inv *Invocation) Expand(template string) (string, error) {
	return Expand(template, inv.Context)
}

// DecodeInput decodes the input into v through JSON.
func (inv *Invocation) DecodeInput(v any) error {
	raw, err := json.Marshal(inv.Input)
	if err != nil {
		return failure(ErrorNameInvalidInput, "encoding input of step %q: %v", inv.StepID, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return failure(ErrorNameInvalidInput, "decoding input of step %q: %v", inv.StepID, err)
	}
	return nil
}

// The compiler gives three built-in handlers a different durable shape than
// step.Do. These interfaces are unexported: host handlers always run in
// step.Do.

// sleeper handlers become step.Sleep.
type sleeper interface {
	sleepFor(config json.RawMessage, ctx map[string]any) (time.Duration, error)
}

// waiter handlers become step.WaitForEvent.
type waiter interface {
	waitOptions(config json.RawMessage) (workflow.WaitOptions, error)
}

// invoker handlers become step.Invoke (subflow).
type invoker interface {
	invokeOptions(config json.RawMessage, input any) (workflow.InvokeOptions, error)
}

// router handlers choose the next step: they record it in their result.
type router interface {
	// targets lists the step ids the config may route to, with their paths
	// relative to the config.
	targets(config json.RawMessage) []target
	// next reads the chosen step id from a recorded result.
	next(result json.RawMessage) (string, error)
}

// merger handlers without an outputKey merge their result object into the
// context (set).
type merger interface{ mergesIntoContext() }

type target struct {
	path string
	id   string
}

// Handlers is the set of step types a flow may use, by type. It is immutable
// and safe for concurrent use.
type Handlers struct {
	byType map[string]Handler
}

// HandlersOption configures NewHandlers.
type HandlersOption func(*handlersOptions)

type handlersOptions struct {
	handlers []Handler
}

// WithHandler adds a handler, replacing a built-in one of the same type (for
// example an http handler built by NewHTTPHandler with an allowlist, or an
// exec handler with commands). Replacing delay, wait-for-event or branch
// with a host handler makes those steps ordinary step.Do steps.
func WithHandler(h Handler) HandlersOption {
	return func(o *handlersOptions) { o.handlers = append(o.handlers, h) }
}

// NewHandlers returns the built-in handlers with their default configuration
// — http (no internal addresses), delay, branch, transform, set,
// wait-for-event, exec (no commands) and subflow — plus or replaced by those given
// with WithHandler.
func NewHandlers(opts ...HandlersOption) (*Handlers, error) {
	var o handlersOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	httpH, err := NewHTTPHandler(nil)
	if err != nil {
		return nil, err
	}
	execH, err := NewExecHandler(nil)
	if err != nil {
		return nil, err
	}
	transformH, err := NewTransformHandler(nil)
	if err != nil {
		return nil, err
	}
	hs := &Handlers{byType: map[string]Handler{}}
	for _, h := range []Handler{httpH, delayHandler{}, branchHandler{}, transformH, setHandler{}, waitHandler{}, execH, subflowHandler{}} {
		hs.byType[h.Type()] = h
	}
	for _, h := range o.handlers {
		if h == nil {
			return nil, errors.New("flow: WithHandler: nil handler")
		}
		typ := h.Type()
		if typ == "" {
			return nil, fmt.Errorf("flow: WithHandler: handler %T has an empty type", h)
		}
		if _, err := wfcore.NormalizeStepName(typ); err != nil || typ != stepIDRE.FindString(typ) {
			return nil, fmt.Errorf("flow: WithHandler: type %q must match %s", typ, stepIDRE)
		}
		hs.byType[typ] = h
	}
	return hs, nil
}

// Lookup returns the handler of a step type.
func (hs *Handlers) Lookup(typ string) (Handler, bool) {
	h, ok := hs.byType[typ]
	return h, ok
}

// Types returns the known step types, sorted.
func (hs *Handlers) Types() []string {
	out := make([]string, 0, len(hs.byType))
	for t := range hs.byType {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// defaultHandlers returns NewHandlers() for a nil *Handlers.
func defaultHandlers(hs *Handlers) (*Handlers, error) {
	if hs != nil {
		return hs, nil
	}
	return NewHandlers()
}
