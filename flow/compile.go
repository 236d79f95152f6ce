package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/duraflow/duraflow/workflow"
)

// CompileOption configures Compile.
type CompileOption func(*compileOptions)

type compileOptions struct {
	stepLimit int
}

// WithStepLimit sets the number of step visits one run may make (delays
// included) before the flow fails with an error matching
// workflow.ErrTooManySteps. Values above workflow.MaxStepsPerRunLimit are
// capped. Its Do and WaitForEvent steps count against the runner's bound
// too (workflow.EngineLimits.MaxStepsPerRun, or the registration's
// workflow.WithMaxStepsPerRun): a limit above it needs a registration with
// the same bound, as the flow registry (Config.MaxStepsPerRun) does.
//
// Defaults to workflow.MaxStepsPerRun (1024).
func WithStepLimit(n int) CompileOption {
	return func(o *compileOptions) { o.stepLimit = n }
}

// ceiling checks a flow's output for what no host's limits allow; the
// runner holds it to its own.
var ceiling = workflow.EngineLimits{MaxPayloadBytes: workflow.MaxPayloadBytesLimit}

// Flow is a compiled definition: a workflow (its Run method) over raw JSON
// params and output, ready to be registered with workflow.Register (or
// Register).
//
// Each visit of a step is one durable step named "<step id>#<visit>" (see
// StepName), the visits of each step id counted from 1 in the run, so a loop
// through a step records fetch#1, fetch#2, ... and replays exactly. What the
// flow does between steps — selecting inputs, storing outputs, following
// transitions — is a pure function of the params and the recorded step
// results, so a replay rebuilds the same context and takes the same path.
type Flow struct {
	def       *Definition
	version   Version
	hs        *Handlers
	stepLimit int
}

// Compile validates def (see Validate) and compiles a copy of it with the
// handlers (nil means NewHandlers()).
func Compile(def *Definition, handlers *Handlers, opts ...CompileOption) (*Flow, error) {
	hs, err := defaultHandlers(handlers)
	if err != nil {
		return nil, err
	}
	if _, err := Validate(def, hs); err != nil {
		return nil, err
	}
	o := compileOptions{stepLimit: workflow.MaxStepsPerRun}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.stepLimit <= 0 {
		o.stepLimit = workflow.MaxStepsPerRun
	}
	o.stepLimit = min(o.stepLimit, workflow.MaxStepsPerRunLimit)
	// The flow keeps its own copy, so that the caller's definition may change
	// without changing a registered flow.
	raw, err := json.Marshal(def)
	if err != nil {
		return nil, fmt.Errorf("copying definition: %w", err)
	}
	own, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	v, _ := ParseVersion(own.Version)
	return &Flow{def: own, version: v, hs: hs, stepLimit: o.stepLimit}, nil
}

// Register registers a compiled flow under its id and returns the untyped
// binding, as workflow.Register(reg, f.ID(), f.Run) does.
func Register(reg *workflow.Registry, f *Flow) (*workflow.Binding[json.RawMessage, json.RawMessage], error) {
	if f == nil {
		return nil, fmt.Errorf("%w: flow is nil", workflow.ErrInvalidRequest)
	}
	return workflow.Register[json.RawMessage, json.RawMessage](reg, f.def.ID, f.Run, f.options()...)
}

// options are the registration options of the flow's workflow-level
// settings: its deadline and its workflow retry.
func (f *Flow) options() []workflow.Option {
	var opts []workflow.Option
	if d := f.def.Deadline; d != nil {
		opts = append(opts, workflow.WithDeadline(d.Std()))
	}
	if r := f.def.Retry; r != nil {
		opts = append(opts, workflow.WithWorkflowRetry(r.Policy()))
	}
	return opts
}

// settings are the flow's workflow-level settings (Validate checked them).
func (f *Flow) settings() workflow.Settings {
	var s workflow.Settings
	if d := f.def.Deadline; d != nil {
		s.Deadline = d.Std()
	}
	if r := f.def.Retry; r != nil {
		p := r.Policy()
		s.Retry = &p
	}
	return s
}

// ID returns the flow's id.
func (f *Flow) ID() string { return f.def.ID }

// Version returns the flow's version.
func (f *Flow) Version() Version { return f.version }

// Definition returns the flow's copy of its definition. It must not be
// changed.
func (f *Flow) Definition() *Definition { return f.def }

// failureInfo is what onFailure stores in the context.
type failureInfo struct {
	StepID   string `json:"stepId"`
	Name     string `json:"name"`
	Message  string `json:"message"`
	Attempts int    `json:"attempts"`
}

// Run executes the flow: it is the workflow function workflow.Register
// takes. The params must be a JSON object (or empty, which is {}); they are
// the initial context.
func (f *Flow) Run(ctx context.Context, event workflow.Event[json.RawMessage], step workflow.Step) (json.RawMessage, error) {
	state, err := initialContext(event.Payload)
	if err != nil {
		return nil, err
	}
	visits := map[string]int{}
	total := 0
	for cur := f.def.InitialStepID; cur != "" && cur != End; {
		s := f.def.Steps[cur]
		if total >= f.stepLimit {
			return nil, &flowError{name: ErrorNameTooManySteps, err: fmt.Errorf(
				"flow %q (version %s) reached step %q after %d step visits, the limit of one run (a loop that never ends?): %w",
				f.def.ID, f.def.Version, cur, total, workflow.ErrTooManySteps)}
		}
		total++
		visits[cur]++
		next, err := f.runStep(ctx, step, s, visits[cur], state)
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return f.output(state)
}

// runStep runs one visit of s and returns the next step id.
func (f *Flow) runStep(ctx context.Context, step workflow.Step, s *Step, visit int, state map[string]any) (string, error) {
	name := StepName(s.ID, visit)
	h, _ := f.hs.Lookup(s.Type)
	switch h := h.(type) {
	case sleeper:
		d, err := h.sleepFor(s.Config, state)
		if err != nil {
			return "", fmt.Errorf("step %q: %w", name, err)
		}
		if err := step.Sleep(name, d); err != nil {
			return "", err
		}
		return s.Transitions.OnSuccess, nil
	case invoker:
		input, _, err := s.Input.Select(state)
		if err != nil {
			return "", fmt.Errorf("step %q: %w", name, err)
		}
		opts, err := h.invokeOptions(s.Config, input)
		if err != nil {
			return "", fmt.Errorf("step %q: %w", name, err)
		}
		if s.Compensate != "" {
			// Registered once the child completed: a later failure of the
			// flow undoes what the child did.
			opts.Compensation = []workflow.StepOption{f.compensation(s, visit, state)}
		}
		raw, err := step.Invoke(name, opts)
		if err != nil {
			return f.failed(s, childFailure(name, err), state)
		}
		out, err := decodeValue(raw)
		if err != nil {
			return "", fmt.Errorf("step %q: decoding the child's output: %w", name, err)
		}
		if err := f.store(s, out, state); err != nil {
			return "", err
		}
		return s.Transitions.OnSuccess, nil
	case waiter:
		opts, err := h.waitOptions(s.Config)
		if err != nil {
			return "", fmt.Errorf("step %q: %w", name, err)
		}
		ev, err := step.WaitForEvent(name, opts)
		if err != nil {
			return f.failed(s, err, state)
		}
		payload, err := decodeValue(ev.Payload)
		if err != nil {
			return "", fmt.Errorf("step %q: decoding event payload: %w", name, err)
		}
		if err := f.store(s, payload, state); err != nil {
			return "", err
		}
		return s.Transitions.OnSuccess, nil
	}

	// The attempt runs on its own goroutine and may outlive step.Do (a
	// timed-out attempt is abandoned, not stopped), so it copies what it
	// needs from the context under mu, and never after Do returned.
	var mu sync.Mutex
	returned := false
	raw, err := step.Do(name, func(actx context.Context) (any, error) {
		mu.Lock()
		if returned {
			mu.Unlock()
			return nil, errors.New("attempt abandoned")
		}
		input, _, err := s.Input.Select(state)
		snapshot := deepCopy(state).(map[string]any)
		mu.Unlock()
		if err != nil {
			return nil, err
		}
		return h.Run(actx, &Invocation{
			FlowID: f.def.ID, FlowVersion: f.def.Version,
			StepID: s.ID, Visit: visit,
			Config: s.Config, Input: input, Context: snapshot,
		})
	}, f.doOptions(s, visit, state)...)
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil {
		return f.failed(s, err, state)
	}
	result, err := decodeValue(raw)
	if err != nil {
		return "", fmt.Errorf("step %q: decoding its result: %w", name, err)
	}
	if _, ok := h.(merger); ok && s.OutputKey == "" {
		if err := mergeInto(state, result); err != nil {
			return "", fmt.Errorf("step %q: %w", name, err)
		}
	} else if err := f.store(s, result, state); err != nil {
		return "", err
	}
	if r, ok := h.(router); ok {
		next, err := r.next(raw)
		if err != nil {
			return "", fmt.Errorf("step %q: %w", name, err)
		}
		if next != End && f.def.Steps[next] == nil {
			return "", fmt.Errorf("step %q chose step %q, which the flow does not have", name, next)
		}
		return next, nil
	}
	return s.Transitions.OnSuccess, nil
}

// doOptions are the options of the Do step of a visit of s: its own, and
// its compensation when it has one.
func (f *Flow) doOptions(s *Step, visit int, state map[string]any) []workflow.StepOption {
	opts := f.stepOptions(s)
	if s.Compensate != "" {
		opts = append(opts, f.compensation(s, visit, state))
	}
	return opts
}

func (f *Flow) stepOptions(s *Step) []workflow.StepOption {
	opts := []workflow.StepOption{workflow.WithRetries(s.Retries.Policy())}
	if d := s.timeout(); d > 0 {
		opts = append(opts, workflow.WithTimeout(d))
	}
	return opts
}

// failed handles a step error: a step that failed for good follows
// onFailure when it has one; anything else ends the run with the error.
func (f *Flow) failed(s *Step, err error, state map[string]any) (string, error) {
	var se *workflow.StepError
	if !errors.As(err, &se) || s.Transitions.OnFailure == "" {
		return "", err
	}
	info, err := toJSONValue(failureInfo{StepID: s.ID, Name: se.Name, Message: se.Message, Attempts: se.Attempts})
	if err != nil {
		return "", err
	}
	key := s.OutputKey
	if key == "" {
		key = ErrorKey
	}
	segs, _ := parsePath(key)
	if err := setPath(state, segs, info); err != nil {
		return "", fmt.Errorf("step %q: storing its error: %w", s.ID, err)
	}
	return s.Transitions.OnFailure, nil
}

// store puts a step's output at its outputKey.
func (f *Flow) store(s *Step, v any, state map[string]any) error {
	if s.OutputKey == "" {
		return nil
	}
	segs, err := parsePath(s.OutputKey)
	if err != nil {
		return err
	}
	if err := setPath(state, segs, v); err != nil {
		return fmt.Errorf("step %q: storing its output: %w", s.ID, err)
	}
	return nil
}

func (f *Flow) output(state map[string]any) (json.RawMessage, error) {
	var out any = state
	if f.def.Output != "" {
		segs, err := parsePath(f.def.Output)
		if err != nil {
			return nil, err
		}
		out, _ = lookup(state, segs)
	}
	// The runner checks the output against its own payload limit, which
	// may be past the default: here only the ceiling of every limit.
	return ceiling.MarshalPayload("flow output", out)
}

// initialContext decodes the params into the initial context.
func initialContext(params json.RawMessage) (map[string]any, error) {
	v, err := decodeValue(params)
	if err != nil {
		return nil, &flowError{name: ErrorNameInvalidParams, err: workflow.NonRetryable(fmt.Errorf("decoding flow params: %w", err))}
	}
	switch x := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return x, nil
	}
	return nil, &flowError{name: ErrorNameInvalidParams, err: workflow.NonRetryable(fmt.Errorf("flow params must be a JSON object, not a %s", typeName(v)))}
}

// mergeInto sets each key of the object v, a dot path, in the context, in
// sorted order (so "a" is set before "a.b").
func mergeInto(state map[string]any, v any) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("merging into the context: result is a %s, not an object", typeName(v))
	}
	for _, k := range sortedKeys(obj) {
		segs, err := parsePath(k)
		if err != nil {
			return err
		}
		if err := setPath(state, segs, obj[k]); err != nil {
			return err
		}
	}
	return nil
}
