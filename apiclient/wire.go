package apiclient

import (
	"encoding/json"
	"time"

	"github.com/duraflow/duraflow/client"
)

// The bodies of the HTTP API. Params, payloads, outputs and step results are
// json.RawMessage throughout: the server passes them through as the caller
// sent them (compacted), never decoding them into Go values.

// WorkflowList is the answer of GET /workflows.
type WorkflowList struct {
	Workflows []WorkflowSummary `json:"workflows"`
}

// WorkflowSummary is one registered workflow.
type WorkflowSummary struct {
	Name string `json:"name"`
	// Kind is KindGo for a workflow compiled into the server and KindFlow
	// for a flow of the flow registry.
	Kind string `json:"kind"`
	// Version is a flow's latest version, the one new instances run.
	Version string `json:"version,omitempty"`
}

// Workflow kinds of WorkflowSummary.
const (
	KindGo   = "go"
	KindFlow = "flow"
)

// InstanceList is what Client.List returns: a page of instances, newest
// update first, and the cursor of the next page, decoded from the
// InstancePage the server answers.
type InstanceList = client.ListResult

// History is what Client.History returns: a page of the steps and events of
// one run, decoded from the HistoryPage the server answers.
type History = client.History

// CreateRequest is the body of POST /workflows/:name/instances, and one item
// of a batch. Both fields are optional: an empty ID creates a random one,
// and absent Params are stored as null.
type CreateRequest struct {
	ID     string          `json:"id,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	// Queue overrides the workflow's task queue; empty keeps it.
	Queue string `json:"queue,omitempty"`
	// Priority orders claims, higher first (workflow.MinPriority to
	// workflow.MaxPriority; default 0).
	Priority int `json:"priority,omitempty"`
	// DedupeKey, when set, returns the active instance of the workflow and
	// namespace that holds the key (200 with "deduplicated": true) instead
	// of creating another.
	DedupeKey string `json:"dedupeKey,omitempty"`
	// Deadline, when set (RFC 3339), overrides the workflow's deadline for
	// this instance; it must be in the future (else 400 invalid_request).
	Deadline *time.Time `json:"deadline,omitempty"`
}

// deadlineOf is the wire form of a CreateRequest's deadline.
func deadlineOf(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// DeadlineTime returns the request's deadline as dftype.CreateRequest
// takes it: the zero time when it has none.
func (r *CreateRequest) DeadlineTime() time.Time {
	if r.Deadline == nil {
		return time.Time{}
	}
	return *r.Deadline
}

// CreateBatchRequest is the body of POST /workflows/:name/instances/batch:
// 1 to the server's batch limit (workflow.MaxBatchSize, 100, by default)
// instances, all validated before any is written.
type CreateBatchRequest struct {
	Instances []CreateRequest `json:"instances"`
}

// InstanceBatch is the answer of a batch (201): the instances it created,
// each as GET answers it. Ids that existed already are skipped and left
// out.
type InstanceBatch struct {
	Instances []*Instance `json:"instances"`
}

// SendEventRequest is the body of POST /workflows/:name/instances/:id/events.
// An absent Payload is stored as null.
type SendEventRequest struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// TickRequest is the body of POST /_runner/tick; the body may be absent.
// MaxInstances (0 to httpapi.MaxTickInstances) bounds the instances claimed and
// MaxSteps the new step attempts; 0 leaves the choice to the TickFunc.
type TickRequest struct {
	MaxInstances int `json:"maxInstances,omitempty"`
	MaxSteps     int `json:"maxSteps,omitempty"`
}

// TickResult is the answer of POST /_runner/tick: how many claimed tasks
// the tick ran (to completion, suspension or failure), and the limits it
// ran under, as the request gave them (0: the runner's default, and no step
// budget).
type TickResult struct {
	Processed    int `json:"processed"`
	MaxInstances int `json:"maxInstances"`
	MaxSteps     int `json:"maxSteps"`
}

// HealthStatus is the answer of GET /healthz and of a successful GET /readyz.
type HealthStatus struct {
	Status string `json:"status"`
}

// APIIndex is the answer of GET <prefix> (and <prefix>/): what the server
// is and where to go next.
type APIIndex struct {
	// Name is "Duraflow".
	Name string `json:"name"`
	// Version is the server's version (httpapi.Config.Version).
	Version string `json:"version"`
	// OpenAPI is the path of the server's OpenAPI document.
	OpenAPI string `json:"openapi"`
	// Docs is the address of the documentation.
	Docs string `json:"docs"`
	// Console is the path of the web console, when the host mounts one.
	Console string `json:"console,omitempty"`
	// Routes are the routes the server serves (httpapi.Server.Routes).
	Routes []IndexRoute `json:"routes"`
}

// IndexRoute is one route of an APIIndex.
type IndexRoute struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Scope is the token scope the route needs; empty for /healthz and
	// /readyz, which need none.
	Scope string `json:"scope,omitempty"`
}
