package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
)

// LifecycleList is the answer of GET /events and GET
// /workflows/:name/instances/:id/lifecycle: a page of lifecycle events in
// id order, the cursor of the next page (JSON "cursor", absent on the
// last) and "hasNextPage".
type LifecycleList struct {
	Events     []*dftype.LifecycleEvent `json:"events"`
	NextCursor string                   `json:"cursor,omitempty"`
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
	if p.WorkerID != "" {
		q.Set("worker", p.WorkerID)
	}
	var out LifecycleList
	return &out, c.do(ctx, http.MethodGet, c.api("/events"), q, nil, &out)
}

// InstanceLifecycle returns a page of one instance's lifecycle events (GET
// /workflows/:name/instances/:id/lifecycle); p.WorkflowName,
// p.InstanceID and p.WorkerID are ignored.
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

// followRetry is how long FollowLifecycleEvents waits before it
// reconnects a stream that broke.
const followRetry = time.Second

// FollowLifecycleEvents streams the lifecycle events after afterID that
// match p (GET /events/stream; p's page size, cursor and time range are
// not sent) and calls fn with each, in id order. When the connection
// breaks it reconnects after a second with Last-Event-ID, so no event is
// skipped. It returns nil when ctx is done, fn's error, or the server's
// refusal (an *APIError). The client's http.Client must have no overall
// Timeout: the stream is one long answer.
func (c *Client) FollowLifecycleEvents(ctx context.Context, p client.LifecycleListParams, afterID int64, fn func(*dftype.LifecycleEvent) error) error {
	q := url.Values{}
	for _, t := range p.Types {
		q.Add("type", t)
	}
	if p.WorkflowName != "" {
		q.Set("workflow", p.WorkflowName)
	}
	if p.InstanceID != "" {
		q.Set("instance", p.InstanceID)
	}
	if p.WorkerID != "" {
		q.Set("worker", p.WorkerID)
	}
	for {
		err := c.streamOnce(ctx, q, &afterID, fn)
		if ctx.Err() != nil {
			return nil
		}
		var refused *APIError
		if errors.As(err, &refused) {
			return err
		}
		var h handlerError
		if errors.As(err, &h) {
			return h.err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followRetry):
		}
	}
}

// handlerError carries an error of FollowLifecycleEvents' fn.
type handlerError struct{ err error }

func (h handlerError) Error() string { return h.err.Error() }

// streamOnce reads one connection of the stream, moving *afterID on with
// each event delivered.
func (c *Client) streamOnce(ctx context.Context, q url.Values, afterID *int64, fn func(*dftype.LifecycleEvent) error) error {
	u := c.baseURL + c.api("/events/stream")
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*afterID, 10))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return readAPIError(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue // id, event, comments and blank lines
		}
		var e dftype.LifecycleEvent
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("decoding a lifecycle event: %w", err)
		}
		if err := fn(&e); err != nil {
			return handlerError{err}
		}
		*afterID = e.ID
	}
	return sc.Err()
}
