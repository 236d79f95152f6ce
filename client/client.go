package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/internal/tracing"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Config configures a Client.
type Config struct {
	// Store is the database. Required.
	Store db.Store
	// Registry holds the workflows that may be created. Required. New does
	// not bind it: the registry's typed bindings go through the engine it is
	// bound to, which the host (duraflow.New) binds to its client. A program
	// that builds a client alone and uses bindings calls
	// Registry.Bind(client) once, before it uses them.
	Registry *workflow.Registry
	// Clock supplies "now" for everything the client writes.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// WakeFunc is called after a commit made a task due now (create, resume,
	// restart, an event for a waiting instance), so a runner picks it up
	// without waiting for its poll.
	//
	// Defaults to nothing.
	WakeFunc func(workflowName string)
	// RecordHooks records an OnWorkflowEnqueued outbox entry in the same
	// transaction as every change that enqueues work (see package hook).
	//
	// Defaults to false.
	RecordHooks bool
	// MetadataFunc, when set, is called by Create and CreateBatch for every
	// instance before it is written, with the workflow name and the metadata
	// of the request, and returns the metadata to store instead (an error
	// fails the call). It runs after the name is validated and before it is
	// looked up in the registry, so it may register the workflow: a flow
	// registry (package flow) pins the flow version an instance runs and
	// loads a flow that another process applied.
	//
	// Defaults to nil: metadata is stored as given.
	MetadataFunc func(ctx context.Context, workflowName string, metadata json.RawMessage) (json.RawMessage, error)
	// QueueFunc, when set, is called by Create and CreateBatch for a request
	// that names no queue, after MetadataFunc, with the metadata it
	// returned, and returns the instance's task queue; "" leaves the
	// workflow's (workflow.Definition.Queue). A flow registry (package
	// flow) returns the queue of the flow version the metadata pins.
	//
	// Defaults to nil: the workflow's queue.
	QueueFunc func(ctx context.Context, workflowName string, metadata json.RawMessage) (string, error)
	// EagerStarter, when set, is a runner in this process that instances
	// may start on at once (eager start): Create and CreateBatch ask it for
	// free slots and create that many instances already running, with their
	// tasks leased to it, in the create's transaction; it runs them without
	// claiming them. The others are queued as without it. *runner.Runner
	// implements it; the host (duraflow.New) sets it to its runner.
	//
	// Defaults to nil: every instance is queued.
	EagerStarter EagerStarter
	// LimitsFunc, when set, is called by Create and CreateBatch for an
	// instance of a workflow whose registered definition has no limits,
	// with its metadata (after MetadataFunc), and returns the limits the
	// instance is created under (nil for none): a flow registry's Limits
	// reads them from the pinned flow version's definition.
	//
	// Defaults to nil: the registered definition's limits only.
	LimitsFunc func(ctx context.Context, workflowName string, metadata json.RawMessage) (*workflow.Limits, error)
	// Observer, when set, is told of the instances Create and CreateBatch
	// (and their Tx forms, before the caller's commit) created, for
	// metrics (see package metrics). Deduplicated creates and existing ids
	// are not counted.
	//
	// Defaults to nil: nothing is observed.
	Observer Observer
	// EngineLimits bound what the client takes (see workflow.EngineLimits):
	// the params and metadata of a create, the payload of an event, the
	// instances of a batch. The host (duraflow.New) sets its own.
	//
	// Defaults to workflow.DefaultEngineLimits(): 1 MiB payloads, 100
	// instances a batch.
	EngineLimits workflow.EngineLimits
	// TracerProvider, when set, turns tracing on for creates: Create,
	// CreateBatch and their Tx forms store the trace context of the span
	// in the caller's context with each new instance, so that the runs of
	// the instance (the runner's spans, with the same provider: see
	// docs/tracing.md) descend from the caller's trace. A caller without a
	// span stores nothing, and nor does any create while it is nil.
	//
	// Defaults to nil: no trace context is stored.
	TracerProvider trace.TracerProvider
}

// Observer receives the client's in-memory observations, for metrics. It is
// called after the create's statement returned and must not block.
type Observer interface {
	// ObserveCreated reports n new instances of workflowName.
	ObserveCreated(workflowName string, n int)
}

// EagerStarter is a runner that newly created instances can be handed to
// directly (eager start), as Temporal's eager workflow start does: no claim
// round trip, and no run to load. *runner.Runner implements it.
type EagerStarter interface {
	// ReserveEager reserves up to n free execution slots for instances of
	// workflowName about to be created, without blocking, and returns the
	// lease to create them with (Max is how many it reserved), or nil when
	// it reserved none.
	ReserveEager(workflowName string, n int) *db.CreateLease
	// StartEager runs the created instances that carry a task leased to the
	// starter and frees the rest of the reservation. The client calls it
	// exactly once for every non-nil lease, with nil when the create failed.
	StartEager(lease *db.CreateLease, created []db.CreateResult)
}

// Client is the management service. It implements workflow.Engine.
type Client struct {
	store    db.Store
	registry *workflow.Registry
	clock    clock.Clock
	wake     func(string)
	hooks    bool
	metadata func(context.Context, string, json.RawMessage) (json.RawMessage, error)
	queue    func(context.Context, string, json.RawMessage) (string, error)
	eager    EagerStarter
	// namespace scopes the view (see Namespace); "" is every namespace.
	namespace string
	// nsErr is the error of an invalid namespace given to Namespace, which
	// every call of the view returns.
	nsErr error
	// placementCheck, when set, checks where each create of the view puts
	// its instance (see WithPlacementCheck).
	placementCheck PlacementFunc
	queues         *queueCache
	served         *servedCache
	limits         func(context.Context, string, json.RawMessage) (*workflow.Limits, error)
	obs            Observer
	traced         bool
	// engineLimits are Config.EngineLimits, defaults filled.
	engineLimits workflow.EngineLimits
}

var _ workflow.Engine = (*Client)(nil)

// New returns a client over cfg.Store. Everything it uses is given in cfg:
// nothing is attached to it afterwards.
func New(cfg *Config) (*Client, error) {
	if cfg == nil || cfg.Store == nil || cfg.Registry == nil {
		return nil, errors.New("client: Store and Registry are required")
	}
	if err := cfg.EngineLimits.Validate(); err != nil {
		return nil, fmt.Errorf("client: Config.%w", err)
	}
	c := &Client{store: cfg.Store, registry: cfg.Registry, clock: cfg.Clock, wake: cfg.WakeFunc, hooks: cfg.RecordHooks, metadata: cfg.MetadataFunc, queue: cfg.QueueFunc, eager: cfg.EagerStarter, limits: cfg.LimitsFunc, queues: &queueCache{}, served: &servedCache{}, obs: cfg.Observer, traced: cfg.TracerProvider != nil, engineLimits: cfg.EngineLimits.WithDefaults()}
	if c.clock == nil {
		c.clock = clock.New()
	}
	if c.wake == nil {
		c.wake = func(string) {}
	}
	return c, nil
}

// EagerResumer is an EagerStarter that also takes the runs that events sent
// through the client wake (eager resume): SendEvent reserves a slot with
// ReserveEager, the send leases the woken run's task to the runner in its
// own transaction, and ResumeEager runs it, with no claim round trip and no
// notification. *runner.Runner implements it.
type EagerResumer interface {
	EagerStarter
	// ResumeEager runs the task a send leased to the runner
	// (db.EventSendResult.LeasedTask) in the slot lease reserved, or frees
	// the slot when task is nil. A nil lease does nothing.
	ResumeEager(lease *db.CreateLease, task *db.Task)
}

// reserveEager asks the eager starter, if any, for up to n slots for
// instances on queue; a starter that does not serve the queue gets its
// reservation back at once.
func (c *Client) reserveEager(workflowName, queue string, n int) *db.CreateLease {
	if c.eager == nil {
		return nil
	}
	lease := c.eager.ReserveEager(workflowName, n)
	if lease != nil && len(lease.Queues) > 0 && !slices.Contains(lease.Queues, queue) {
		c.eager.StartEager(lease, nil)
		return nil
	}
	return lease
}

// traceContext is the stored form of the trace context of the caller's
// span when tracing is on; "" when it is off or ctx has no span.
func (c *Client) traceContext(ctx context.Context) string {
	if !c.traced {
		return ""
	}
	return tracing.Encode(ctx)
}

// wakeAfterCreate reports the created instances to the observer and wakes
// runners after a create unless every created instance already runs on the
// eager starter: then nothing was queued, and only a hook entry (when
// recorded) is waiting for delivery.
func (c *Client) wakeAfterCreate(workflowName string, created []db.CreateResult) {
	if len(created) == 0 {
		return
	}
	if c.obs != nil {
		n := 0
		for i := range created {
			if !created[i].Deduplicated {
				n++
			}
		}
		if n > 0 {
			c.obs.ObserveCreated(workflowName, n)
		}
	}
	if !c.hooks {
		queued := false
		for _, res := range created {
			if res.LeasedTask == nil {
				queued = true
				break
			}
		}
		if !queued {
			return
		}
	}
	c.wake(workflowName)
}

// EngineLimits returns the limits the client applies
// (Config.EngineLimits), defaults filled. An HTTP API over the client
// takes them as the bounds of its own request limits.
func (c *Client) EngineLimits() workflow.EngineLimits { return c.engineLimits }

// WorkflowNames returns the names of the registered workflows, sorted.
func (c *Client) WorkflowNames() []string { return c.registry.Names() }

// Registry returns the registry the client serves.
func (c *Client) Registry() *workflow.Registry { return c.registry }

func (c *Client) now() *time.Time {
	t := c.clock.Now().UTC().Truncate(time.Microsecond)
	return &t
}

func (c *Client) checkWorkflow(name string) error {
	if c.nsErr != nil {
		return c.nsErr
	}
	if err := workflow.ValidateWorkflowName(name); err != nil {
		return err
	}
	return c.lookupWorkflow(name)
}

func (c *Client) lookupWorkflow(name string) error {
	if _, ok := wfcore.Lookup(c.registry, name); !ok {
		return fmt.Errorf("%w: %q", workflow.ErrWorkflowNotFound, name)
	}
	return nil
}

// createMetadata returns the metadata to store with a new instance: what
// MetadataFunc makes of the request's, checked against the payload limit.
func (c *Client) createMetadata(ctx context.Context, workflowName string, md json.RawMessage) (json.RawMessage, error) {
	if c.metadata != nil {
		var err error
		if md, err = c.metadata(ctx, workflowName, md); err != nil {
			return nil, err
		}
	}
	if err := c.engineLimits.ValidatePayload("metadata", md); err != nil {
		return nil, err
	}
	return md, nil
}

// deadlineAt is the deadline of an instance of def created at now: the
// request's, else the workflow's (workflow.WithDeadline, or its settings
// function's for metadata), else none. A request deadline that is not in
// the future is ErrInvalidRequest.
func deadlineAt(ctx context.Context, def workflow.Definition, req time.Time, metadata json.RawMessage, now time.Time) (*time.Time, error) {
	if req.IsZero() {
		s, err := def.SettingsOf(ctx, metadata)
		if err != nil {
			return nil, fmt.Errorf("reading the settings of workflow %q: %w", def.Name, err)
		}
		def.Deadline = s.Deadline
	}
	return wfcore.DeadlineAt(def, req, now)
}

// checkRead checks the workflow name of a read (Get, History, List): any
// valid name will do, registered here or not, since the instances of a
// workflow this process does not run are in the database all the same.
// registered reports whether this process knows the workflow, so that a
// read that finds nothing can say the workflow is unknown.
func (c *Client) checkRead(name string) (registered bool, err error) {
	if c.nsErr != nil {
		return false, c.nsErr
	}
	if err := workflow.ValidateWorkflowName(name); err != nil {
		return false, err
	}
	return c.lookupWorkflow(name) == nil, nil
}

// unknownWorkflow is the error of a read that found nothing of a workflow
// that is neither registered here nor in the database.
func unknownWorkflow(name string) error {
	return fmt.Errorf("%w: %q (not registered here, and no instance of it is stored in this namespace)", workflow.ErrWorkflowNotFound, name)
}

func (c *Client) checkInstance(name, id string) error {
	if err := c.checkWorkflow(name); err != nil {
		return err
	}
	return workflow.ValidateInstanceID(id)
}

// NewInstanceID returns a random instance id (32 hex characters).
func NewInstanceID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// normalizeParams checks the params of an instance of workflowName: a
// valid payload that, when the workflow is registered in this process,
// decodes into its params type (else ErrInvalidRequest with the decoder's
// message, rather than an instance that errors when it runs). Empty params
// are null.
func (c *Client) normalizeParams(workflowName string, p json.RawMessage) (json.RawMessage, error) {
	if len(p) == 0 {
		return json.RawMessage("null"), nil
	}
	if err := c.engineLimits.ValidatePayload("params", p); err != nil {
		return nil, err
	}
	if err := wfcore.CheckParams(c.registry, workflowName, p); err != nil {
		return nil, err
	}
	return p, nil
}

// Create creates one queued instance with a task due now, or, when the
// eager starter (Config.EagerStarter) has a free slot for the workflow, a
// running instance that the starter executes at once.
func (c *Client) Create(ctx context.Context, workflowName string, req dftype.CreateRequest) (*dftype.InstanceInfo, error) {
	if err := workflow.ValidateWorkflowName(workflowName); err != nil {
		return nil, err
	}
	metadata, err := c.createMetadata(ctx, workflowName, req.Metadata)
	if err != nil {
		return nil, err
	}
	if err := c.lookupWorkflow(workflowName); err != nil {
		return nil, err
	}
	var parent *db.ParentLink
	if req.Parent != nil {
		if parent, err = parentLink(req.Parent); err != nil {
			return nil, err
		}
	}
	if req.ID == "" {
		req.ID = NewInstanceID()
	}
	if err := workflow.ValidateInstanceID(req.ID); err != nil {
		return nil, err
	}
	at, err := c.placement(ctx, workflowName, &req, metadata)
	if err != nil {
		return nil, err
	}
	params, err := c.normalizeParams(workflowName, req.Params)
	if err != nil {
		return nil, err
	}
	now := c.now()
	def, _ := c.registry.Definition(workflowName)
	deadline, err := deadlineAt(ctx, def, req.Deadline, metadata, *now)
	if err != nil {
		return nil, err
	}
	limits, err := c.limitSpecs(ctx, &def, at.Queue, params, metadata)
	if err != nil {
		return nil, err
	}
	var lease *db.CreateLease
	if req.DedupeKey == "" && len(limits) == 0 {
		// A create that may return an existing instance, or that waits for
		// admission under a limit, starts nothing eagerly.
		lease = c.reserveEager(workflowName, at.Queue, 1)
	}
	res, err := c.store.InstanceCreate(ctx, &db.InstanceCreateParams{
		WorkflowName: workflowName, ID: req.ID, Params: params, Metadata: metadata, Now: now, RecordHooks: c.hooks,
		Lease:     lease,
		Namespace: at.Namespace, Queue: at.Queue, Priority: at.Priority, DedupeKey: req.DedupeKey,
		DeadlineAt: deadline, Limits: limits, Parent: parent, TraceContext: c.traceContext(ctx),
	})
	if parent != nil && errors.Is(err, db.ErrAlreadyExists) {
		if lease != nil {
			c.eager.StartEager(lease, nil)
		}
		return c.existingChild(ctx, workflowName, req.ID, parent)
	}
	var created []db.CreateResult
	if err == nil {
		created = []db.CreateResult{res}
	}
	if lease != nil {
		c.eager.StartEager(lease, created)
	}
	if err != nil {
		return nil, mapError(err, workflowName, req.ID)
	}
	if res.Deduplicated {
		info := InstanceInfo(res.Instance)
		info.Deduplicated = true
		return info, nil
	}
	c.wakeAfterCreate(workflowName, created)
	return InstanceInfo(res.Instance), nil
}

// CreateBatch creates up to Config.EngineLimits.MaxBatchSize (100 by
// default) instances; existing ids are skipped and left out of the
// answer. An instance whose dedupe key an
// active instance holds (or an earlier request of the batch) is not
// created: the holder is in the answer in its place, with Deduplicated set.
// The requests of a batch share one namespace (a request that names
// another than the first's is refused); each has its own queue, priority
// and dedupe key. Every request is validated before anything is written. As many of the first instances as the eager starter
// (Config.EagerStarter) has free slots for start running at once on it; the
// rest are queued.
func (c *Client) CreateBatch(ctx context.Context, workflowName string, reqs []dftype.CreateRequest) ([]*dftype.InstanceInfo, error) {
	if err := workflow.ValidateWorkflowName(workflowName); err != nil {
		return nil, err
	}
	if len(reqs) > 0 && c.metadata != nil {
		// The hook goes first, as for Create, so it may register the
		// workflow; the other items get theirs in the loop below.
		md, err := c.metadata(ctx, workflowName, reqs[0].Metadata)
		if err != nil {
			return nil, fmt.Errorf("instance 0: %w", err)
		}
		reqs = slices.Clone(reqs)
		reqs[0].Metadata = md
	}
	if err := c.lookupWorkflow(workflowName); err != nil {
		return nil, err
	}
	if err := c.engineLimits.CheckBatchSize(len(reqs)); err != nil {
		return nil, err
	}
	items := make([]db.InstanceCreateItem, 0, len(reqs))
	seen := make(map[string]bool, len(reqs))
	var (
		namespace string
		dedupe    bool
		limited   bool
		// eagerQueue is the one queue of the batch, "" when they differ:
		// a batch of several queues starts nothing eagerly.
		eagerQueue string
	)
	def, _ := c.registry.Definition(workflowName)
	now := c.now()
	traceContext := c.traceContext(ctx)
	for i, r := range reqs {
		dedupe = dedupe || r.DedupeKey != ""
		id := r.ID
		if id == "" {
			id = NewInstanceID()
		}
		if err := workflow.ValidateInstanceID(id); err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%w: instance id %q appears twice in the batch", workflow.ErrInvalidRequest, id)
		}
		seen[id] = true
		params, err := c.normalizeParams(workflowName, r.Params)
		if err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		metadata := r.Metadata
		if i > 0 && c.metadata != nil {
			if metadata, err = c.metadata(ctx, workflowName, metadata); err != nil {
				return nil, fmt.Errorf("instance %d: %w", i, err)
			}
		}
		if err := c.engineLimits.ValidatePayload("metadata", metadata); err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		at, err := c.placement(ctx, workflowName, &r, metadata)
		if err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		switch {
		case i == 0:
			namespace, eagerQueue = at.Namespace, at.Queue
		case at.Namespace != namespace:
			return nil, fmt.Errorf("%w: instance %d: the instances of a batch share one namespace", workflow.ErrInvalidRequest, i)
		case at.Queue != eagerQueue:
			eagerQueue = ""
		}
		deadline, err := deadlineAt(ctx, def, r.Deadline, metadata, *now)
		if err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		limits, err := c.limitSpecs(ctx, &def, at.Queue, params, metadata)
		if err != nil {
			return nil, fmt.Errorf("instance %d: %w", i, err)
		}
		limited = limited || len(limits) > 0
		items = append(items, db.InstanceCreateItem{
			ID: id, Params: params, Metadata: metadata, DedupeKey: r.DedupeKey, Queue: at.Queue, Priority: at.Priority,
			DeadlineAt: deadline, Limits: limits, TraceContext: traceContext,
		})
	}
	var lease *db.CreateLease
	if !dedupe && !limited && eagerQueue != "" {
		lease = c.reserveEager(workflowName, eagerQueue, len(items))
	}
	created, err := c.store.InstanceCreateMany(ctx, &db.InstanceCreateManyParams{
		WorkflowName: workflowName, Instances: items, Now: now, RecordHooks: c.hooks, Lease: lease,
		Namespace: namespace,
	})
	if lease != nil {
		c.eager.StartEager(lease, created)
	}
	if err != nil {
		return nil, mapError(err, workflowName, "")
	}
	out := make([]*dftype.InstanceInfo, len(created))
	for i := range created {
		out[i] = InstanceInfo(created[i].Instance)
		out[i].Deduplicated = created[i].Deduplicated
	}
	c.wakeAfterCreate(workflowName, created)
	return out, nil
}

// Get returns one instance.
func (c *Client) Get(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	registered, err := c.checkRead(workflowName)
	if err != nil {
		return nil, err
	}
	if err := workflow.ValidateInstanceID(id); err != nil {
		return nil, err
	}
	inst, err := c.store.InstanceGet(ctx, db.InstanceRef{WorkflowName: workflowName, ID: id, Namespace: c.namespace})
	if err != nil {
		if errors.Is(err, db.ErrNotFound) && !registered {
			if known, kerr := c.workflowStored(ctx, workflowName, c.namespace); kerr != nil {
				return nil, kerr
			} else if !known {
				return nil, unknownWorkflow(workflowName)
			}
		}
		return nil, mapError(err, workflowName, id)
	}
	info := InstanceInfo(inst)
	c.markUnserved(ctx, info)
	if err := c.fillChildren(ctx, info); err != nil {
		return nil, err
	}
	if err := c.fillDepth(ctx, info); err != nil {
		return nil, err
	}
	if err := c.fillPending(ctx, info); err != nil {
		return nil, err
	}
	return info, nil
}

type changeFunc func(context.Context, *db.InstanceChangeParams) (*db.Instance, error)

func (c *Client) change(ctx context.Context, workflowName, id string, f changeFunc, wakes bool) (*dftype.InstanceInfo, error) {
	if err := c.checkInstance(workflowName, id); err != nil {
		return nil, err
	}
	inst, err := f(ctx, &db.InstanceChangeParams{WorkflowName: workflowName, ID: id, Now: c.now(), RecordHooks: c.hooks, Namespace: c.namespace})
	if errors.Is(err, db.ErrAlreadyExists) {
		// Only a restart can collide: another active instance holds the
		// dedupe key of the terminal one it would revive.
		return nil, fmt.Errorf("%w: %s/%s: its dedupe key is held by another active instance", workflow.ErrInstanceAlreadyExists, workflowName, id)
	}
	if err != nil {
		return nil, mapError(err, workflowName, id)
	}
	if wakes && inst.Status == dftype.StatusQueued {
		c.wake(workflowName)
	}
	if inst.Limited && inst.Status.Terminal() {
		// Its end may have admitted waiting instances of the workflow.
		c.wake(workflowName)
	}
	if inst.Parent != nil && inst.Status == dftype.StatusTerminated {
		// A terminated child's end woke the Invoke step of its parent.
		c.wake(inst.Parent.WorkflowName)
	}
	return InstanceInfo(inst), nil
}

// Pause pauses an instance (see workflow.Instance.Pause).
func (c *Client) Pause(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, c.store.InstancePause, false)
}

// Resume resumes a paused instance.
func (c *Client) Resume(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, c.store.InstanceResume, true)
}

// Terminate terminates a non-terminal instance.
func (c *Client) Terminate(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, c.store.InstanceTerminate, false)
}

// Restart starts a new run of an instance. The children that the earlier
// runs' Invoke steps started with dftype.ParentTerminate and that have
// not ended are terminated (dftype.ParentAbandon ones keep running).
func (c *Client) Restart(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, c.store.InstanceRestart, true)
}

// SendEvent buffers an event for the instance's current run. When the run
// waits for an event of the type it is woken: on this process's runner at
// once when the eager starter is an EagerResumer with a free slot (its task
// leased to it by the send itself), otherwise through the queue and the
// client's WakeFunc.
func (c *Client) SendEvent(ctx context.Context, workflowName, id, eventType string, payload json.RawMessage) error {
	_, err := c.SendEventDelivery(ctx, workflowName, id, eventType, payload)
	return err
}

// EventDelivery says what became of a sent event (see SendEventDelivery).
type EventDelivery struct {
	// Delivered is true when the instance's current run was waiting for an
	// event of the type: a waiting step takes the event (at once, or when
	// the woken run resumes). False means the event is buffered until a
	// WaitForEvent of its type asks for it, which may be never.
	Delivered bool
	// Step is the key of the step that received the event in the send's
	// own transaction, or "" when the resumed run consumes it (or it is
	// buffered).
	Step string
}

// SendEventDelivery is SendEvent that also says whether a waiting step
// took the event or it was buffered.
func (c *Client) SendEventDelivery(ctx context.Context, workflowName, id, eventType string, payload json.RawMessage) (*EventDelivery, error) {
	if err := c.checkInstance(workflowName, id); err != nil {
		return nil, err
	}
	if err := workflow.ValidateEventType(eventType); err != nil {
		return nil, err
	}
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	if err := c.engineLimits.ValidatePayload("event payload", payload); err != nil {
		return nil, err
	}
	resumer, _ := c.eager.(EagerResumer)
	var lease *db.CreateLease
	if resumer != nil {
		lease = resumer.ReserveEager(workflowName, 1)
	}
	res, err := c.store.EventSend(ctx, &db.EventSendParams{
		WorkflowName: workflowName, InstanceID: id, Type: eventType, Payload: payload, Now: c.now(), RecordHooks: c.hooks,
		Lease: lease, Namespace: c.namespace,
	})
	if lease != nil {
		var task *db.Task
		if err == nil {
			task = res.LeasedTask
		}
		resumer.ResumeEager(lease, task)
	}
	if err != nil {
		return nil, mapError(err, workflowName, id)
	}
	if res.Woken && res.LeasedTask == nil {
		c.wake(workflowName)
	}
	return &EventDelivery{Delivered: res.Woken || res.DeliveredTo != "", Step: res.DeliveredTo}, nil
}

// DefaultPagePayloadBytes is the byte budget of a page of List and of
// History when the call names none (ListParams.MaxPayloadBytes,
// HistoryParams.MaxPayloadBytes): 4 MiB.
const DefaultPagePayloadBytes = paging.PagePayloadBytes

// ListParams select a page of instances.
type ListParams struct {
	// WorkflowName filters by workflow; empty lists all.
	WorkflowName string
	// Statuses filters by status; empty lists all.
	Statuses []dftype.InstanceStatus
	// Namespace filters by namespace; empty lists every namespace (on a
	// view scoped by Client.Namespace: the view's, and another is refused).
	Namespace string
	// Queue filters by task queue; empty lists every queue.
	Queue string
	// PageSize is the page length, 1 to 1000.
	//
	// Defaults to 50.
	PageSize int
	// Cursor continues a previous page (ListResult.NextCursor).
	Cursor string
	// OmitPayloads leaves the params, metadata, output and error message
	// of the page's instances out (InstanceInfo.Error keeps its name): the
	// database does not read them, and MaxPayloadBytes does not apply.
	OmitPayloads bool
	// MaxPayloadBytes bounds the payload bytes (params, metadata, output
	// and error message) of the page: an instance is in it only while the
	// payloads of the instances before it add up to less, so a page holds
	// at most that plus one instance's payloads, and ends early, with a
	// NextCursor, where the budget is spent. The first instance is always
	// in the page.
	//
	// Defaults to DefaultPagePayloadBytes (4 MiB).
	MaxPayloadBytes int
}

// ListResult is one page of instances.
type ListResult struct {
	Instances []*dftype.InstanceInfo `json:"instances"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// List returns a page of instances, newest update first.
func (c *Client) List(ctx context.Context, p ListParams) (*ListResult, error) {
	registered := true
	if p.WorkflowName != "" {
		var err error
		if registered, err = c.checkRead(p.WorkflowName); err != nil {
			return nil, err
		}
	} else if c.nsErr != nil {
		return nil, c.nsErr
	}
	if p.PageSize == 0 {
		p.PageSize = paging.DefaultPageSize
	}
	if p.PageSize < 1 || p.PageSize > paging.MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", workflow.ErrInvalidRequest, paging.MaxPageSize)
	}
	budget, err := payloadBudget(p.MaxPayloadBytes)
	if err != nil {
		return nil, err
	}
	ns, err := c.scope(p.Namespace)
	if err != nil {
		return nil, err
	}
	if p.Queue != "" {
		if err := workflow.ValidateQueueName(p.Queue); err != nil {
			return nil, err
		}
	}
	lp := &db.InstanceListParams{
		WorkflowName: p.WorkflowName, Namespace: ns, Queue: p.Queue, Limit: p.PageSize + 1,
		OmitPayloads: p.OmitPayloads, PayloadBudget: budget,
	}
	for _, s := range p.Statuses {
		if !knownStatus(s) {
			return nil, fmt.Errorf("%w: unknown status %q", workflow.ErrInvalidRequest, s)
		}
		lp.Statuses = append(lp.Statuses, dftype.InstanceStatus(s))
	}
	if p.Cursor != "" {
		cur, err := decodeCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		lp.Cursor = cur
	}
	rows, err := c.store.InstanceList(ctx, lp)
	if err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	res := &ListResult{Instances: []*dftype.InstanceInfo{}}
	// The page ends before the first instance past the byte budget (the
	// store read none of its payloads), or after PageSize.
	spent := false
	if !p.OmitPayloads {
		for i, r := range rows {
			if r.PayloadsOmitted {
				rows, spent = rows[:i], true
				break
			}
		}
	}
	if spent || len(rows) > p.PageSize {
		rows = rows[:min(len(rows), p.PageSize)]
		last := rows[len(rows)-1]
		res.NextCursor = encodeCursor(&db.InstanceCursor{UpdatedAt: last.UpdatedAt, WorkflowName: last.WorkflowName, ID: last.ID})
	}
	if len(rows) == 0 && !registered && p.Cursor == "" {
		// Nothing of a workflow this process does not know: a typo, or a
		// workflow with instances the filters left out.
		if known, err := c.workflowStored(ctx, p.WorkflowName, ns); err != nil {
			return nil, err
		} else if !known {
			return nil, unknownWorkflow(p.WorkflowName)
		}
	}
	for _, r := range rows {
		res.Instances = append(res.Instances, InstanceInfo(r))
	}
	c.markUnserved(ctx, res.Instances...)
	return res, nil
}

// workflowStored reports whether the database holds an instance of the
// workflow in namespace ns ("" for every namespace).
func (c *Client) workflowStored(ctx context.Context, name, ns string) (bool, error) {
	rows, err := c.store.InstanceList(ctx, &db.InstanceListParams{WorkflowName: name, Namespace: ns, Limit: 1, OmitPayloads: true})
	if err != nil {
		return false, fmt.Errorf("listing instances: %w", err)
	}
	return len(rows) > 0, nil
}

// StepInfo is one step of an instance's history.
type StepInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// MaxAttempts is how many attempts the step's policy allows, or
	// workflow.UnlimitedAttempts (-1) for a policy without a limit.
	MaxAttempts   int               `json:"maxAttempts,omitempty"`
	Result        json.RawMessage   `json:"result,omitempty"`
	Error         *dftype.ErrorInfo `json:"error,omitempty"`
	NextRetryAt   *time.Time        `json:"nextRetryAt,omitempty"`
	WakeAt        *time.Time        `json:"wakeAt,omitempty"`
	WaitEventType string            `json:"waitEventType,omitempty"`
	CreatedAt     time.Time         `json:"createdAt"`
	UpdatedAt     time.Time         `json:"updatedAt"`
	CompletedAt   *time.Time        `json:"completedAt,omitempty"`
	// StartedAt is when the step's latest attempt started (Do steps).
	StartedAt *time.Time `json:"startedAt,omitempty"`
	// AttemptLog is every attempt of a Do step, oldest first: the failed
	// ones with their errors, then the one that completed.
	AttemptLog []*AttemptInfo `json:"attemptLog,omitempty"`
	// Child is the child an invoke step started, once it exists.
	Child *dftype.ChildRef `json:"child,omitempty"`
}

// AttemptInfo is one attempt of a step in history.
type AttemptInfo struct {
	// RunAttempt is the instance's run attempt it belongs to (a workflow
	// retry runs a failed step again from attempt 1).
	RunAttempt int `json:"runAttempt"`
	// Attempt is 1 for the first attempt.
	Attempt int `json:"attempt"`
	// Status is "failed" or "complete".
	Status    string            `json:"status"`
	StartedAt *time.Time        `json:"startedAt,omitempty"`
	EndedAt   *time.Time        `json:"endedAt,omitempty"`
	Error     *dftype.ErrorInfo `json:"error,omitempty"`
}

// RunningStepInfo is a step attempt that runs now, as the runner holding
// the instance last reported it (with its lease heartbeat: it shows up
// within one heartbeat interval of its start).
type RunningStepInfo struct {
	Name      string    `json:"name"`
	Attempt   int       `json:"attempt"`
	StartedAt time.Time `json:"startedAt"`
}

// EventInfo is one event of an instance's history.
type EventInfo struct {
	ID          int64           `json:"id"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	RunNumber   int             `json:"runNumber"`
	CreatedAt   time.Time       `json:"createdAt"`
	DeliveredAt *time.Time      `json:"deliveredAt,omitempty"`
	ConsumedBy  string          `json:"consumedBy,omitempty"`
}

// History is one page of the record of one run of an instance.
type History struct {
	Instance  *dftype.InstanceInfo `json:"instance"`
	RunNumber int                  `json:"runNumber"`
	Steps     []*StepInfo          `json:"steps"`
	Events    []*EventInfo         `json:"events"`
	// Running are the step attempts running now (current run only).
	Running []*RunningStepInfo `json:"running,omitempty"`
	// NextCursor continues with the next page of steps and events; empty on
	// the last page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// HistoryParams select a page of an instance's history.
type HistoryParams struct {
	// Run is the run number; 0 means the current run.
	Run int
	// PageSize bounds the steps and the events of one page (each up to
	// PageSize), 1 to 1000; 0 is 1000.
	PageSize int
	// Cursor continues a previous page (History.NextCursor).
	Cursor string
	// MaxPayloadBytes bounds the payload bytes of one page: the steps'
	// results and error messages, then the events' payloads. A step or an
	// event is in the page only while the payloads before it add up to
	// less, so a page holds at most that plus one step's or event's
	// payload, and ends early, with a NextCursor, where the budget is
	// spent. A page always holds at least one step or event when any is
	// left.
	//
	// Defaults to DefaultPagePayloadBytes (4 MiB).
	MaxPayloadBytes int
}

// payloadBudget returns the byte budget of a page: max, or the default
// for 0.
func payloadBudget(max int) (int, error) {
	if max < 0 {
		return 0, fmt.Errorf("%w: the payload budget of a page must not be negative", workflow.ErrInvalidRequest)
	}
	return cmp.Or(max, DefaultPagePayloadBytes), nil
}

// History returns a page of the steps and events of a run of an instance,
// both in the order they were recorded. Every page has a cursor to the
// next until none is left: follow History.NextCursor to read a run whole.
func (c *Client) History(ctx context.Context, workflowName, id string, p HistoryParams) (*History, error) {
	info, err := c.Get(ctx, workflowName, id)
	if err != nil {
		return nil, err
	}
	if p.PageSize < 0 || p.PageSize > paging.MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", workflow.ErrInvalidRequest, paging.MaxPageSize)
	}
	budget, err := payloadBudget(p.MaxPayloadBytes)
	if err != nil {
		return nil, err
	}
	limit := cmp.Or(p.PageSize, paging.MaxPageSize)
	run := p.Run
	var cur historyCursor
	if p.Cursor != "" {
		if cur, err = decodeHistoryCursor(p.Cursor); err != nil {
			return nil, err
		}
		if run == 0 {
			run = cur.Run
		}
		if run != cur.Run {
			return nil, fmt.Errorf("%w: the cursor belongs to run %d", workflow.ErrInvalidRequest, cur.Run)
		}
	}
	if run <= 0 {
		run = info.RunNumber
	}
	if run > info.RunNumber {
		return nil, fmt.Errorf("%w: instance %q has %d run(s)", workflow.ErrInvalidRequest, id, info.RunNumber)
	}
	// The steps spend the byte budget first, the events what is left; a
	// list ends before its first row past it (the store read none of its
	// payloads), and the events wait for the next page when the steps
	// spent it all.
	steps, err := c.store.StepList(ctx, &db.StepListParams{
		WorkflowName: workflowName, InstanceID: id, RunNumber: run, AfterID: cur.Step, Limit: limit, PayloadBudget: budget,
	})
	if err != nil {
		return nil, fmt.Errorf("listing steps: %w", err)
	}
	more := len(steps) == limit
	spent := 0
	for i, s := range steps {
		if s.PayloadsOmitted {
			steps, more = steps[:i], true
			break
		}
		spent += len(s.Result) + len(s.ErrorMessage)
	}
	var events []*db.Event
	if spent < budget {
		events, err = c.store.EventList(ctx, &db.EventListParams{
			WorkflowName: workflowName, InstanceID: id, RunNumber: run, AfterID: cur.Event, Limit: limit, PayloadBudget: budget - spent,
		})
		if err != nil {
			return nil, fmt.Errorf("listing events: %w", err)
		}
		more = more || len(events) == limit
		for i, e := range events {
			if e.PayloadOmitted {
				events, more = events[:i], true
				break
			}
		}
	} else {
		more = true
	}
	h := &History{Instance: info, RunNumber: run, Steps: []*StepInfo{}, Events: []*EventInfo{}}
	next := historyCursor{Run: run, Step: cur.Step, Event: cur.Event}
	for _, s := range steps {
		si := &StepInfo{
			Name: s.Key, Type: string(s.Type), Status: string(s.Status), Attempts: s.Attempts,
			MaxAttempts: s.MaxAttempts, Result: s.Result, NextRetryAt: s.NextRetryAt, WakeAt: s.WakeAt,
			WaitEventType: s.WaitEventType, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, CompletedAt: s.CompletedAt,
		}
		if s.ErrorName != "" || s.ErrorMessage != "" {
			si.Error = &dftype.ErrorInfo{Name: s.ErrorName, Message: s.ErrorMessage}
		}
		si.StartedAt = s.StartedAt
		h.Steps = append(h.Steps, si)
		next.Step = s.ID
	}
	if err := c.addAttempts(ctx, workflowName, id, run, steps, h.Steps); err != nil {
		return nil, err
	}
	linkChildren(info, run, h.Steps)
	if run == info.RunNumber && !info.Status.Terminal() {
		if err := c.addRunning(ctx, workflowName, id, h); err != nil {
			return nil, err
		}
	}
	for _, e := range events {
		h.Events = append(h.Events, &EventInfo{
			ID: e.ID, Type: e.Type, Payload: e.Payload, RunNumber: e.RunNumber,
			CreatedAt: e.CreatedAt, DeliveredAt: e.DeliveredAt, ConsumedBy: e.ConsumedByStepKey,
		})
		next.Event = e.ID
	}
	if more {
		h.NextCursor = encodeHistoryCursor(next)
	}
	return h, nil
}

// addAttempts fills the attempt logs of the Do steps of a history page:
// their failed attempts (StepAttemptList) and, for a completed step, the
// attempt that completed it.
func (c *Client) addAttempts(ctx context.Context, workflowName, id string, run int, steps []*db.Step, infos []*StepInfo) error {
	var keys []string
	for _, s := range steps {
		if s.Type == db.StepTypeDo {
			keys = append(keys, s.Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	attempts, err := c.store.StepAttemptList(ctx, &db.StepAttemptListParams{
		WorkflowName: workflowName, InstanceID: id, RunNumber: run, StepKeys: keys,
	})
	if err != nil {
		return fmt.Errorf("listing step attempts: %w", err)
	}
	byKey := map[string][]*AttemptInfo{}
	for _, a := range attempts {
		ai := &AttemptInfo{RunAttempt: a.RunAttempt, Attempt: a.Attempt, Status: "failed", StartedAt: a.StartedAt, EndedAt: &a.EndedAt}
		if a.ErrorName != "" || a.ErrorMessage != "" {
			ai.Error = &dftype.ErrorInfo{Name: a.ErrorName, Message: a.ErrorMessage}
		}
		byKey[a.StepKey] = append(byKey[a.StepKey], ai)
	}
	for i, s := range steps {
		if s.Type != db.StepTypeDo {
			continue
		}
		log := byKey[s.Key]
		if s.Status == db.StepStatusComplete {
			// The completing attempt follows the last failure in the same
			// run attempt, or, as attempt 1, in the run attempt a workflow
			// retry started after it.
			runAttempt := 1
			if n := len(log); n > 0 {
				runAttempt = log[n-1].RunAttempt
				if s.Attempts == 1 {
					runAttempt++
				}
			}
			log = append(log, &AttemptInfo{
				RunAttempt: runAttempt, Attempt: s.Attempts, Status: "complete", StartedAt: s.StartedAt, EndedAt: s.CompletedAt,
			})
		}
		infos[i].AttemptLog = log
	}
	return nil
}

// addRunning adds the step attempts the holder of the instance's task runs
// now, when its lease holds.
func (c *Client) addRunning(ctx context.Context, workflowName, id string, h *History) error {
	task, err := c.store.TaskGet(ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	if errors.Is(err, db.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting task: %w", err)
	}
	if task.LockedUntil == nil || !task.LockedUntil.After(c.clock.Now()) {
		return nil
	}
	for _, st := range task.RunningSteps {
		h.Running = append(h.Running, &RunningStepInfo{Name: st.Key, Attempt: st.Attempt, StartedAt: st.StartedAt})
	}
	return nil
}

// InstanceInfo converts a stored instance into the engine's report.
func InstanceInfo(i *db.Instance) *dftype.InstanceInfo {
	info := &dftype.InstanceInfo{
		WorkflowName: i.WorkflowName, ID: i.ID, Status: i.Status,
		Params: i.Params, Metadata: i.Metadata, Output: i.Output, RunNumber: i.RunNumber,
		CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt, StartedAt: i.StartedAt, CompletedAt: i.CompletedAt,
		Namespace: i.Namespace, Queue: i.Queue, Priority: i.Priority, DedupeKey: i.DedupeKey,
		DeadlineAt: i.DeadlineAt, RunAttempt: i.RunAttempt,
	}
	if p := i.Parent; p != nil {
		info.Parent = &dftype.ParentRef{
			WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: p.RunNumber,
			StepKey: p.StepKey, Policy: dftype.ParentPolicy(p.Policy),
		}
	}
	if !knownStatus(info.Status) {
		info.Status = dftype.StatusUnknown
	}
	if i.ErrorName != "" || i.ErrorMessage != "" {
		info.Error = &dftype.ErrorInfo{Name: i.ErrorName, Message: i.ErrorMessage}
	}
	if i.Status == dftype.StatusQueued {
		info.WaitingFor = waitingFor(i.WaitingFor)
	}
	return info
}

func knownStatus(s dftype.InstanceStatus) bool {
	switch s {
	case dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause,
		dftype.StatusPaused, dftype.StatusComplete, dftype.StatusErrored, dftype.StatusTerminated:
		return true
	}
	return false
}

// mapError turns the store's sentinels into the workflow package's errors.
func mapError(err error, workflowName, id string) error {
	switch {
	case errors.Is(err, db.ErrNotFound):
		return fmt.Errorf("%w: %s/%s", workflow.ErrInstanceNotFound, workflowName, id)
	case errors.Is(err, db.ErrAlreadyExists):
		return fmt.Errorf("%w: %s/%s", workflow.ErrInstanceAlreadyExists, workflowName, id)
	case errors.Is(err, db.ErrTerminal):
		return fmt.Errorf("%w: %s/%s", workflow.ErrInstanceTerminal, workflowName, id)
	case errors.Is(err, db.ErrInvalidData):
		// The payload checks refuse what a backend cannot store before it
		// is sent; a refusal that still comes back is the caller's data.
		return fmt.Errorf("%w: %s/%s: %w", workflow.ErrInvalidRequest, workflowName, id, err)
	}
	return err
}
