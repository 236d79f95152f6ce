package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfhook"
)

// Engine carries out what bindings ask for. The management client implements
// it; Registry.Bind connects it (the host does, when it is built).
type Engine interface {
	// Create creates one instance.
	Create(ctx context.Context, workflowName string, req dftype.CreateRequest) (*dftype.InstanceInfo, error)
	// CreateBatch creates up to the engine's batch limit (MaxBatchSize by
	// default) instances, skipping existing ids and leaving them out of the
	// answer.
	CreateBatch(ctx context.Context, workflowName string, reqs []dftype.CreateRequest) ([]*dftype.InstanceInfo, error)
	// Get returns one instance.
	Get(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)
	// Pause, Resume, Terminate and Restart change the instance's life cycle.
	Pause(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)
	Resume(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)
	Terminate(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)
	Restart(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)
	// SendEvent buffers an event for the instance and wakes it if it waits for it.
	SendEvent(ctx context.Context, workflowName, id, eventType string, payload json.RawMessage) error
}

// Registry holds the workflows a host knows, by name. It is safe for
// concurrent use; workflows may be registered while a runner is running.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]wfhook.Runnable
	defs   map[string]*Definition
	engine Engine
	// overrides replace registered workflows for lookups (wfcore.Override):
	// the test harness's mocked child workflows. Nil until one is set.
	overrides map[string]wfhook.Runnable
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]wfhook.Runnable{}, defs: map[string]*Definition{}}
}

// Register adds a workflow under name, configured by opts, and returns its
// typed binding. It fails when the name is invalid or taken, or an option is
// invalid.
//
// A workflow is durable code: run is called from the top each time the
// instance resumes, and its steps return their recorded results. Its params
// type P and output type O are inferred from run, a plain function or a
// method value:
//
//	var billing = workflow.MustRegister(reg, "billing", Billing)
//	var receipts = workflow.MustRegister(reg, "receipt", (&ReceiptWorkflow{sender: s}).Run)
func Register[P, O any](r *Registry, name string, run func(ctx context.Context, event Event[P], step Step) (O, error), opts ...Option) (*Binding[P, O], error) {
	if err := ValidateWorkflowName(name); err != nil {
		return nil, err
	}
	if run == nil {
		return nil, fmt.Errorf("%w: workflow %q is nil", ErrInvalidRequest, name)
	}
	def, err := newDefinition(name, opts)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; ok {
		return nil, fmt.Errorf("%w: workflow %q is registered already", ErrInvalidRequest, name)
	}
	r.byName[name] = &runnable[P, O]{name: name, run: run}
	r.defs[name] = def
	return &Binding[P, O]{name: name, registry: r}, nil
}

// MustRegister is Register for program initialisation; it panics on error.
func MustRegister[P, O any](r *Registry, name string, run func(ctx context.Context, event Event[P], step Step) (O, error), opts ...Option) *Binding[P, O] {
	b, err := Register(r, name, run, opts...)
	if err != nil {
		panic(err)
	}
	return b
}

// lookup returns the workflow registered under name; the engine reaches it
// through wfhook.LookupFunc (package wfcore).
func (r *Registry) lookup(name string) (wfhook.Runnable, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.overrides != nil {
		if w, ok := r.overrides[name]; ok {
			return w, true
		}
	}
	w, ok := r.byName[name]
	return w, ok
}

// lookupRun is lookup with the definition's MaxStepsPerRun; the runner
// reaches it through wfhook.LookupRunFunc, once per run pass.
func (r *Registry) lookupRun(name string) (wfhook.Runnable, int, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	maxSteps := 0
	if d, ok := r.defs[name]; ok {
		maxSteps = d.MaxStepsPerRun
	}
	if r.overrides != nil {
		if w, ok := r.overrides[name]; ok {
			return w, maxSteps, true
		}
	}
	w, ok := r.byName[name]
	return w, maxSteps, ok
}

// override substitutes w for the workflow name in lookups; nil w ends it.
func (r *Registry) override(name string, w wfhook.Runnable) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w == nil {
		delete(r.overrides, name)
		return
	}
	if r.overrides == nil {
		r.overrides = map[string]wfhook.Runnable{}
	}
	r.overrides[name] = w
}

func init() {
	wfhook.LookupFunc = func(registry any, name string) (wfhook.Runnable, bool) {
		return registry.(*Registry).lookup(name)
	}
	wfhook.LookupRunFunc = func(registry any, name string) (wfhook.Runnable, int, bool) {
		return registry.(*Registry).lookupRun(name)
	}
	wfhook.OverrideFunc = func(registry any, name string, w wfhook.Runnable) {
		registry.(*Registry).override(name, w)
	}
}

// Names returns the registered names, sorted, with those of workflows a
// test harness substitutes without registering them.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	for n := range r.overrides {
		if _, ok := r.byName[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Bind connects the registry's bindings to the engine that serves them.
// The host (duraflow.New) binds the registry to its client while it is
// built, before anything runs; a program that builds a client alone, or
// that uses a remote engine (the HTTP client), calls it once itself before
// it uses the bindings.
func (r *Registry) Bind(e Engine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.engine = e
}

// Engine returns the engine Bind connected, or ErrEngineNotBound.
func (r *Registry) Engine() (Engine, error) { return r.boundEngine() }

func (r *Registry) boundEngine() (Engine, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.engine == nil {
		return nil, ErrEngineNotBound
	}
	return r.engine, nil
}

// Binding is the typed handle of a registered workflow: it creates and finds
// its instances, and invokes it as a child of another workflow (Invoke).
// Bindings work from host code and from inside a step (to start child
// workflows, which run independently of the parent).
type Binding[P, O any] struct {
	name     string
	registry *Registry
}

// Remote returns the typed binding of a workflow that r does not run: one
// registered in another process, or a flow. Its Create, Get and Invoke work
// as a registered workflow's, through the engine r is bound to; nothing is
// registered, and a name that is not a valid workflow name fails at the
// first call.
//
//	var charge = workflow.Remote[ChargeParams, Receipt](reg, "charge")
func Remote[P, O any](r *Registry, name string) *Binding[P, O] {
	return &Binding[P, O]{name: name, registry: r}
}

// CreateOptions describe one instance to create.
type CreateOptions[P any] struct {
	// ID is the instance id; empty generates a random one.
	ID string
	// Params is the instance's input, encoded as JSON.
	Params P
	// Namespace, Queue, Priority and DedupeKey place the instance as in
	// dftype.CreateRequest. A create that finds the active holder of DedupeKey
	// returns the holder's handle.
	Namespace string
	Queue     string
	Priority  int
	DedupeKey string
}

// Name returns the registered workflow name.
func (b *Binding[P, O]) Name() string { return b.name }

// Create creates an instance. It fails with ErrInstanceAlreadyExists when the
// id is taken, and with ErrInvalidInstanceID or ErrPayloadTooLarge on bad input.
func (b *Binding[P, O]) Create(ctx context.Context, opts CreateOptions[P]) (*Instance[O], error) {
	e, err := b.registry.boundEngine()
	if err != nil {
		return nil, err
	}
	params, err := encodePayload("params", opts.Params)
	if err != nil {
		return nil, err
	}
	info, err := e.Create(ctx, b.name, dftype.CreateRequest{
		ID: opts.ID, Params: params,
		Namespace: opts.Namespace, Queue: opts.Queue, Priority: opts.Priority, DedupeKey: opts.DedupeKey,
	})
	if err != nil {
		return nil, err
	}
	return b.handle(info.ID), nil
}

// CreateBatch creates up to the engine's batch limit (MaxBatchSize by
// default) instances at once; ids that exist already are skipped and left
// out of the answer.
func (b *Binding[P, O]) CreateBatch(ctx context.Context, opts []CreateOptions[P]) ([]*Instance[O], error) {
	e, err := b.registry.boundEngine()
	if err != nil {
		return nil, err
	}
	reqs := make([]dftype.CreateRequest, len(opts))
	for i, o := range opts {
		params, err := encodePayload(fmt.Sprintf("params of instance %d", i), o.Params)
		if err != nil {
			return nil, err
		}
		reqs[i] = dftype.CreateRequest{
			ID: o.ID, Params: params,
			Namespace: o.Namespace, Queue: o.Queue, Priority: o.Priority, DedupeKey: o.DedupeKey,
		}
	}
	infos, err := e.CreateBatch(ctx, b.name, reqs)
	if err != nil {
		return nil, err
	}
	out := make([]*Instance[O], len(infos))
	for i, info := range infos {
		out[i] = b.handle(info.ID)
	}
	return out, nil
}

// Get returns the handle of an existing instance, or ErrInstanceNotFound.
func (b *Binding[P, O]) Get(ctx context.Context, id string) (*Instance[O], error) {
	e, err := b.registry.boundEngine()
	if err != nil {
		return nil, err
	}
	if _, err := e.Get(ctx, b.name, id); err != nil {
		return nil, err
	}
	return b.handle(id), nil
}

func (b *Binding[P, O]) handle(id string) *Instance[O] {
	return &Instance[O]{id: id, workflowName: b.name, registry: b.registry}
}

// Instance is the handle of one instance of a workflow with output O.
type Instance[O any] struct {
	id           string
	workflowName string
	registry     *Registry
}

// Status is an instance's state with its typed output.
type Status[O any] struct {
	// Status is the life-cycle status.
	Status dftype.InstanceStatus
	// Output is the decoded output once the instance is complete.
	Output O
	// Error is the recorded error of an errored instance.
	Error *dftype.ErrorInfo
	// Info is everything else the engine reports.
	Info *dftype.InstanceInfo
}

// ID returns the instance id.
func (i *Instance[O]) ID() string { return i.id }

// WorkflowName returns the workflow the instance belongs to.
func (i *Instance[O]) WorkflowName() string { return i.workflowName }

// Status reads the instance's status, output and error.
func (i *Instance[O]) Status(ctx context.Context) (*Status[O], error) {
	e, err := i.registry.boundEngine()
	if err != nil {
		return nil, err
	}
	info, err := e.Get(ctx, i.workflowName, i.id)
	if err != nil {
		return nil, err
	}
	st := &Status[O]{Status: info.Status, Error: info.Error, Info: info}
	if info.Status == dftype.StatusComplete && len(info.Output) > 0 {
		if err := json.Unmarshal(info.Output, &st.Output); err != nil {
			return nil, fmt.Errorf("decoding output of instance %q: %w", i.id, err)
		}
	}
	return st, nil
}

// Wait polls the instance every pollEvery (50 ms when zero) until it is
// terminal and returns its final status, or until ctx is done.
func (i *Instance[O]) Wait(ctx context.Context, pollEvery time.Duration) (*Status[O], error) {
	if pollEvery <= 0 {
		pollEvery = 50 * time.Millisecond
	}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		st, err := i.Status(ctx)
		if err != nil {
			return nil, err
		}
		if st.Status.Terminal() {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for instance %q (still %s): %w", i.id, st.Status, ctx.Err())
		case <-tick.C:
		}
	}
}

// Pause pauses the instance: at once when it is queued or waiting, at the next
// step boundary when it is running. It fails with ErrInstanceTerminal on a
// terminal instance.
func (i *Instance[O]) Pause(ctx context.Context) error {
	return i.change(ctx, Engine.Pause)
}

// Resume continues a paused instance; on any other status it does nothing.
func (i *Instance[O]) Resume(ctx context.Context) error {
	return i.change(ctx, Engine.Resume)
}

// Terminate stops the instance for good.
func (i *Instance[O]) Terminate(ctx context.Context) error {
	return i.change(ctx, Engine.Terminate)
}

// Restart starts the instance again from the top in a new run; the old run's
// history is kept and its events are not delivered to the new run.
func (i *Instance[O]) Restart(ctx context.Context) error {
	return i.change(ctx, Engine.Restart)
}

// SendEvent sends an event of the type with payload encoded as JSON.
func (i *Instance[O]) SendEvent(ctx context.Context, eventType string, payload any) error {
	e, err := i.registry.boundEngine()
	if err != nil {
		return err
	}
	raw, err := encodePayload("event payload", payload)
	if err != nil {
		return err
	}
	return e.SendEvent(ctx, i.workflowName, i.id, eventType, raw)
}

func (i *Instance[O]) change(ctx context.Context, f func(Engine, context.Context, string, string) (*dftype.InstanceInfo, error)) error {
	e, err := i.registry.boundEngine()
	if err != nil {
		return err
	}
	_, err = f(e, ctx, i.workflowName, i.id)
	return err
}
