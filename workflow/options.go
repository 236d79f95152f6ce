package workflow

import (
	"fmt"
	"time"
)

// DefaultQueue is the task queue of a workflow whose definition and Create
// call name none.
const DefaultQueue = "default"

// DefaultNamespace is the namespace of an instance whose Create call names
// none.
const DefaultNamespace = "default"

// Option configures a workflow when it is registered: the last argument of
// Register and MustRegister.
//
//	workflow.MustRegister(reg, "billing", billing, workflow.WithQueue("payments"))
type Option func(*Definition) error

// Definition is what the engine knows of a registered workflow besides its
// code: where its instances run and under which controls. Options fill it
// in; the client reads it when it creates an instance and the runner when it
// runs one.
type Definition struct {
	// Name is the registered name.
	Name string
	// Queue is the task queue its instances run on unless the Create call
	// names another.
	//
	// Defaults to DefaultQueue.
	Queue string

	// Deadline and Retry are the workflow-level retry and deadline settings
	// (see options_retry.go: WithDeadline, WithWorkflowRetry).
	//
	// Deadline, when positive, is how long after its creation an instance
	// may run before it errors with ErrorNameDeadlineExceeded.
	//
	// Defaults to 0 (no deadline).
	Deadline time.Duration
	// Retry, when set, runs a failed run again after a backoff, replaying
	// the steps that completed; nil means a failed run is final.
	//
	// Defaults to nil.
	Retry *RetryPolicy
	// SettingsFunc, when set, gives the Deadline and Retry of one instance
	// from its metadata instead (see WithSettingsFunc).
	//
	// Defaults to nil.
	SettingsFunc SettingsFunc
	// Limits are the workflow's concurrency and rate limits (see
	// WithMaxRunning, WithConcurrencyKey, WithRateLimit).
	//
	// Defaults to none.
	Limits Limits
	// MaxStepsPerRun, when positive, bounds the Do, WaitForEvent and
	// Invoke steps of one run instead of the host's
	// EngineLimits.MaxStepsPerRun (see WithMaxStepsPerRun).
	//
	// Defaults to 0: the host's.
	MaxStepsPerRun int
}

// WithQueue runs the workflow's instances on the named task queue unless a
// Create call names another. Only runners that serve the queue claim them.
func WithQueue(name string) Option {
	return func(d *Definition) error {
		if err := ValidateQueueName(name); err != nil {
			return err
		}
		d.Queue = name
		return nil
	}
}

// newDefinition applies opts to the definition of name.
func newDefinition(name string, opts []Option) (*Definition, error) {
	d := &Definition{Name: name, Queue: DefaultQueue}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(d); err != nil {
			return nil, fmt.Errorf("workflow %q: %w", name, err)
		}
	}
	if err := d.validateLimits(); err != nil {
		return nil, fmt.Errorf("workflow %q: %w", name, err)
	}
	return d, nil
}

// Definition returns the definition of the workflow registered under name,
// a copy the caller may keep.
func (r *Registry) Definition(name string) (Definition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.defs[name]
	if !ok {
		return Definition{}, false
	}
	return *d, true
}
