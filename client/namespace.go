package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duraflow/duraflow/db"
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

// placement checks the placement fields of req and returns where the
// instance goes: the client's namespace (or the request's, or the
// default), the request's queue (or QueueFunc's for its metadata, or the
// workflow's), and its priority.
func (c *Client) placement(ctx context.Context, workflowName string, req *workflow.CreateRequest, metadata json.RawMessage) (placement, error) {
	if err := workflow.ValidateCreatePlacement(req); err != nil {
		return placement{}, err
	}
	ns, err := c.scope(req.Namespace)
	if err != nil {
		return placement{}, err
	}
	at := placement{Namespace: ns, Queue: req.Queue, Priority: req.Priority}
	if at.Queue == "" && c.queue != nil {
		if at.Queue, err = c.queue(ctx, workflowName, metadata); err != nil {
			return placement{}, err
		}
	}
	if at.Queue == "" {
		if def, ok := c.registry.Definition(workflowName); ok {
			at.Queue = def.Queue
		}
	}
	at.Namespace, at.Queue = db.CreatePlacement(at.Namespace, at.Queue)
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
