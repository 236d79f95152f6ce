package flow

import (
	"fmt"
	"strings"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Validate checks what a definition means against the handlers (nil means
// NewHandlers()): the id and version, the initial step, every step's id, type,
// config (by its handler), input selector, output key, retries, timeout and
// transitions, and the output path. It returns the warnings (unreachable
// steps) even when the definition is valid, and a *ValidationError listing
// every problem (with the warnings too) when it is not.
func Validate(def *Definition, handlers *Handlers) (warnings []Problem, err error) {
	hs, err := defaultHandlers(handlers)
	if err != nil {
		return nil, err
	}
	if def == nil {
		return nil, &ValidationError{Problems: []Problem{{Message: "definition is missing"}}}
	}
	v := &validator{def: def, hs: hs}
	v.run()
	sortProblems(v.warnings)
	if len(v.problems) > 0 {
		sortProblems(v.problems)
		return v.warnings, &ValidationError{Problems: v.problems, Warnings: v.warnings}
	}
	return v.warnings, nil
}

type validator struct {
	def      *Definition
	hs       *Handlers
	problems []Problem
	warnings []Problem
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// retryExtras checks the retry fields of fleet control: maxDelay and
// nonRetryable.
func (v *validator) retryExtras(path string, r *RetryPolicy) {
	if r.MaxDelay != nil && r.MaxDelay.Std() < 0 {
		v.add(path+".maxDelay", "must not be negative")
	}
	for i, n := range r.NonRetryable {
		if strings.TrimSpace(n) == "" {
			v.add(fmt.Sprintf("%s.nonRetryable[%d]", path, i), "must be an error name, not empty")
		}
	}
}

func (v *validator) run() {
	def := v.def
	switch {
	case def.ID == "":
		v.add("id", "is required")
	case workflow.ValidateWorkflowName(def.ID) != nil:
		v.add("id", "%q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-' (it is the workflow name)", def.ID, workflow.MaxWorkflowNameLength)
	}
	if def.Version == "" {
		v.add("version", "is required (a semantic version such as \"1.0.0\")")
	} else if _, err := ParseVersion(def.Version); err != nil {
		v.add("version", "%v", err)
	}
	if def.Output != "" {
		if _, err := parsePath(def.Output); err != nil {
			v.add("output", "%v", err)
		}
	}
	if def.Queue != "" && workflow.ValidateQueueName(def.Queue) != nil {
		v.add("queue", "%q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'", def.Queue, workflow.MaxQueueNameLength)
	}
	if len(def.Steps) == 0 {
		v.add("steps", "a flow needs at least one step")
	}
	if def.Deadline != nil {
		if err := workflow.ValidateDeadline(def.Deadline.Std()); err != nil {
			v.add("deadline", "must be positive and at most %s", dftype.FormatDuration(workflow.MaxSleep))
		}
	}
	if r := def.Retry; r != nil {
		if r.Limit != nil && *r.Limit < 0 {
			v.add("retry.limit", "must not be negative")
		}
		if r.Delay != nil && r.Delay.Std() < 0 {
			v.add("retry.delay", "must not be negative")
		}
		if err := (workflow.RetryPolicy{Backoff: r.Backoff}).Validate(); err != nil {
			v.add("retry.backoff", "unknown backoff %q (use constant, linear or exponential)", r.Backoff)
		}
		v.retryExtras("retry", r)
	}
	switch {
	case def.InitialStepID == "":
		v.add("initialStepId", "is required")
	case def.Steps[def.InitialStepID] == nil && len(def.Steps) > 0:
		v.add("initialStepId", "no step %q (steps: %s)", def.InitialStepID, strings.Join(sortedKeys(def.Steps), ", "))
	}
	for _, key := range sortedKeys(def.Steps) {
		v.step(key, def.Steps[key])
	}
	v.reachability()
	v.limits()
}

func (v *validator) step(key string, s *Step) {
	path := "steps." + key
	if s == nil {
		v.add(path, "must be an object")
		return
	}
	if !validStepID(key) {
		v.add(path, "step id %q must be 1 to %d characters of letters, digits, '_' and '-', not starting with '-'", key, MaxStepIDLength)
	}
	switch {
	case s.ID == "":
		v.add(path+".id", "is required (and must equal the step's key %q)", key)
	case s.ID != key:
		v.add(path+".id", "%q differs from the step's key %q", s.ID, key)
	}
	if s.Input != nil {
		for _, p := range s.Input.validate() {
			v.add(joinPath(path+".input", p.Path), "%s", p.Message)
		}
	}
	if s.OutputKey != "" {
		if _, err := parsePath(s.OutputKey); err != nil {
			v.add(path+".outputKey", "%v", err)
		}
	}
	if s.Retries != nil {
		r := s.Retries
		if r.Limit != nil && *r.Limit < 0 {
			v.add(path+".retries.limit", "must not be negative")
		}
		if r.Delay != nil && r.Delay.Std() < 0 {
			v.add(path+".retries.delay", "must not be negative")
		}
		if err := (workflow.RetryPolicy{Backoff: r.Backoff}).Validate(); err != nil {
			v.add(path+".retries.backoff", "unknown backoff %q (use constant, linear or exponential)", r.Backoff)
		}
		v.retryExtras(path+".retries", r)
	}
	if s.Timeout != nil && s.Timeout.Std() <= 0 {
		v.add(path+".timeout", "must be positive")
	}
	v.transition(path+".transitions.onSuccess", s.Transitions.OnSuccess)
	v.transition(path+".transitions.onFailure", s.Transitions.OnFailure)
	v.compensate(path+".compensate", key, s)

	if s.Type == "" {
		v.add(path+".type", "is required (one of %s)", strings.Join(v.hs.Types(), ", "))
		return
	}
	h, ok := v.hs.Lookup(s.Type)
	if !ok {
		v.add(path+".type", "unknown step type %q (known: %s)", s.Type, strings.Join(v.hs.Types(), ", "))
		return
	}
	if err := h.Validate(s.Config); err != nil {
		v.problems = append(v.problems, problemsOf(path+".config", err)...)
	}
	switch h := h.(type) {
	case sleeper:
		if s.OutputKey != "" {
			v.add(path+".outputKey", "a %s step has no output", s.Type)
		}
		if s.Transitions.OnFailure != "" {
			v.add(path+".transitions.onFailure", "a %s step cannot fail", s.Type)
		}
		if s.Retries != nil {
			v.add(path+".retries", "a %s step is not retried", s.Type)
		}
		if s.Timeout != nil {
			v.add(path+".timeout", "a %s step has no attempt timeout (config.duration is how long it sleeps)", s.Type)
		}
	case waiter:
		if s.Retries != nil {
			v.add(path+".retries", "a %s step is not retried", s.Type)
		}
		if s.Timeout != nil {
			v.add(path+".timeout", "set the wait's timeout in config.timeout")
		}
	case invoker:
		if s.Retries != nil {
			v.add(path+".retries", "a %s step is not retried (its child has its own retries; catch its failure with onFailure)", s.Type)
		}
		if s.Timeout != nil {
			v.add(path+".timeout", "set the wait for the child in config.timeout")
		}
	case router:
		if s.Transitions.OnSuccess != "" {
			v.add(path+".transitions.onSuccess", "a %s step chooses its next step from its config; use config.default instead", s.Type)
		}
		for _, t := range h.targets(s.Config) {
			v.transition(joinPath(path+".config", t.path), t.id)
		}
	}
}

// transition checks a transition target; empty is checked by the caller.
func (v *validator) transition(path, id string) {
	if id == "" || id == End {
		return
	}
	if v.def.Steps[id] == nil {
		v.add(path, "no step %q (steps: %s, or %q to end the flow)", id, strings.Join(sortedKeys(v.def.Steps), ", "), End)
	}
}

// reachability warns about steps no path from the initial step reaches.
func (v *validator) reachability() {
	start := v.def.InitialStepID
	if v.def.Steps[start] == nil {
		return
	}
	seen := map[string]bool{}
	queue := []string{start}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		s := v.def.Steps[id]
		if s == nil || seen[id] {
			continue
		}
		seen[id] = true
		next := []string{s.Transitions.OnSuccess, s.Transitions.OnFailure}
		if h, ok := v.hs.Lookup(s.Type); ok {
			if r, ok := h.(router); ok {
				for _, t := range r.targets(s.Config) {
					next = append(next, t.id)
				}
			}
		}
		for _, n := range next {
			if n != "" && n != End && !seen[n] {
				queue = append(queue, n)
			}
		}
	}
	// A step that only compensates is reached as a compensation; its own
	// transitions are never followed.
	for id := range seen {
		if c := v.def.Steps[id].Compensate; c != "" && v.def.Steps[c] != nil {
			seen[c] = true
		}
	}
	for _, key := range sortedKeys(v.def.Steps) {
		if !seen[key] && v.def.Steps[key] != nil {
			v.warnings = append(v.warnings, Problem{Path: "steps." + key, Message: fmt.Sprintf("step %q is unreachable from the initial step %q", key, start)})
		}
	}
}

func validStepID(id string) bool {
	return len(id) > 0 && len(id) <= MaxStepIDLength && stepIDRE.MatchString(id)
}
