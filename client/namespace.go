package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Namespace returns a view of the client scoped to the namespace ns: it
// creates instances in ns, and gets, lists, changes, sends events to and
// reads the history of instances of ns only. An instance of another
// namespace is workflow.ErrInstanceNotFound to the view, exactly as one that
// does not exist, so that the view cannot learn which ids other namespaces
// use. Instance ids stay unique per workflow across namespaces: a create in
// one namespace of an id another namespace uses is
// workflow.ErrInstanceAlreadyExists.
//
// The client itself is not scoped: it sees every namespace and creates in
// CreateRequest.Namespace (or workflow.DefaultNamespace), as the engine's own
// callers (the runner, the scheduler, the host) need. An invalid ns makes
// every call of the view return the validation error
// (workflow.ErrInvalidRequest).
func (c *Client) Namespace(ns string) *Client {
	view := *c
	view.namespace, view.nsErr = ns, workflow.ValidateNamespace(ns)
	return &view
}

// Scope returns the namespace the client is scoped to, or "" for a client
// that sees every namespace (see Namespace).
func (c *Client) Scope() string { return c.namespace }

// scope returns the namespace a call of the client is limited to: the
// view's, or for an unscoped client the one asked for ("" for every one).
// A scoped view refuses another.
func (c *Client) scope(asked string) (string, error) {
	if c.nsErr != nil {
		return "", c.nsErr
	}
	if asked != "" {
		if err := workflow.ValidateNamespace(asked); err != nil {
			return "", err
		}
	}
	if c.namespace == "" {
		return asked, nil
	}
	if asked != "" && asked != c.namespace {
		return "", fmt.Errorf("%w: namespace %q is not the client's namespace %q", workflow.ErrInvalidRequest, asked, c.namespace)
	}
	return c.namespace, nil
}

// placement is where a create puts an instance.
type placement struct {
	Namespace string
	Queue     string
	Priority  int
}

// Placement is where a create puts its instance, as a PlacementFunc sees
// it.
type Placement struct {
	// WorkflowName is the workflow of the instance.
	WorkflowName string
	// Namespace is the instance's namespace.
	Namespace string
	// Queue is the instance's task queue: the one the request names, or
	// DefaultQueue.
	Queue string
	// DefaultQueue is the queue the instance would get had the request
	// named none: Config.QueueFunc's for its metadata, else the
	// workflow's, else workflow.DefaultQueue.
	DefaultQueue string
	// Priority is the instance's priority.
	Priority int
}

// PlacementFunc checks where a create of a view puts its instance (see
// WithPlacementCheck): nil allows it; an error refuses the create, which
// then writes nothing and returns the error as it is.
type PlacementFunc func(ctx context.Context, p Placement) error

// WithPlacementCheck returns a view of the client whose creates (Create,
// CreateBatch, CreateTx; every item of a batch) call check with where
// they would put their instance, before anything is written. The HTTP API
// sets one on the views of callers limited to namespaces, so that they
// choose only the queues and priorities their namespace allows
// (httpapi.Config.NamespaceQueues, NamespaceMaxPriority). A nil check
// removes the view's.
func (c *Client) WithPlacementCheck(check PlacementFunc) *Client {
	view := *c
	view.placementCheck = check
	return &view
}

// placement checks the placement fields of req and returns where the
// instance goes: the client's namespace (or the request's, or the
// default), the request's queue (or QueueFunc's for its metadata, or the
// workflow's), and its priority. A view's placement check
// (WithPlacementCheck) then has its say.
func (c *Client) placement(ctx context.Context, workflowName string, req *dftype.CreateRequest, metadata json.RawMessage) (placement, error) {
	if err := wfcore.ValidateCreatePlacement(req); err != nil {
		return placement{}, err
	}
	ns, err := c.scope(req.Namespace)
	if err != nil {
		return placement{}, err
	}
	at := placement{Namespace: ns, Queue: req.Queue, Priority: req.Priority}
	var defaultQueue string
	if (at.Queue == "" || c.placementCheck != nil) && c.queue != nil {
		if defaultQueue, err = c.queue(ctx, workflowName, metadata); err != nil {
			return placement{}, err
		}
	}
	if defaultQueue == "" {
		if def, ok := c.registry.Definition(workflowName); ok {
			defaultQueue = def.Queue
		}
	}
	if at.Queue == "" {
		at.Queue = defaultQueue
	}
	at.Namespace, at.Queue = db.CreatePlacement(at.Namespace, at.Queue)
	if c.placementCheck != nil {
		_, defaultQueue = db.CreatePlacement(at.Namespace, defaultQueue)
		if err := c.placementCheck(ctx, Placement{
			WorkflowName: workflowName, Namespace: at.Namespace, Queue: at.Queue, DefaultQueue: defaultQueue, Priority: at.Priority,
		}); err != nil {
			return placement{}, err
		}
	}
	return at, nil
}

// fleetWide refuses what acts on the whole fleet, outside any namespace
// (what: a queue's limits, a worker's drain), to a view scoped to a
// namespace (workflow.ErrInvalidRequest): only the unscoped client may.
func (c *Client) fleetWide(what string) error {
	if c.namespace != "" {
		return fmt.Errorf("%w: %s acts outside namespaces, which the view of namespace %q may not", workflow.ErrInvalidRequest, what, c.namespace)
	}
	return nil
}
