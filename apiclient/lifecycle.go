package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// LifecycleList is the answer of GET /events and GET
// /workflows/:name/instances/:id/lifecycle: a page of lifecycle events in
// id order, the cursor of the next page (JSON "cursor", absent on the
// last) and "hasNextPage".
type LifecycleList struct {
	Events     []*workflow.LifecycleEvent `json:"events"`
	NextCursor string                     `json:"cursor,omitempty"`
}

// MarshalJSON writes the page with "hasNextPage", true when NextCursor
// (JSON "cursor") is set: the paging shape of every list of the HTTP API.
func (l LifecycleList) MarshalJSON() ([]byte, error) {
	type plain LifecycleList
	return paging.MarshalPage(plain(l), l.NextCursor)
}

// ListLifecycleEvents returns a page of the lifecycle events of every
// namespace (GET /events) that match p; p.AfterID is not sent (use
// Cursor).
func (c *Client) ListLifecycleEvents(ctx context.Context, p client.LifecycleListParams) (*LifecycleList, error) {
	q := lifecycleQuery(&p)
	if p.WorkflowName != "" {
		q.Set("workflow", p.WorkflowName)
	}
	if p.InstanceID != "" {
		q.Set("instance", p.InstanceID)
	}
	var out LifecycleList
	return &out, c.do(ctx, http.MethodGet, c.api("/events"), q, nil, &out)
}

// InstanceLifecycle returns a page of one instance's lifecycle events (GET
// /workflows/:name/instances/:id/lifecycle); p.WorkflowName and
// p.InstanceID are ignored.
func (c *Client) InstanceLifecycle(ctx context.Context, workflowName, id string, p client.LifecycleListParams) (*LifecycleList, error) {
	path, err := c.instancePath(workflowName, id, "/lifecycle")
	if err != nil {
		return nil, err
	}
	var out LifecycleList
	return &out, c.do(ctx, http.MethodGet, path, lifecycleQuery(&p), nil, &out)
}

// lifecycleQuery is the query of the filters and paging both routes take.
func lifecycleQuery(p *client.LifecycleListParams) url.Values {
	q := url.Values{}
	for _, t := range p.Types {
		q.Add("type", t)
	}
	if !p.Since.IsZero() {
		q.Set("since", p.Since.Format(time.RFC3339Nano))
	}
	if !p.Until.IsZero() {
		q.Set("until", p.Until.Format(time.RFC3339Nano))
	}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}
