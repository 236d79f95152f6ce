package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// WorkerListParams select a page of workers (GET /workers).
type WorkerListParams struct {
	// Status filters by status; empty lists every status.
	Status dftype.WorkerStatus
	// Queue lists only the workers that serve this queue; empty lists all.
	Queue string
	// PageSize is the page length, 1 to 1000; 0 means the server's default (50).
	PageSize int
	// Cursor continues a previous page (WorkerList.NextCursor).
	Cursor string
}

// WorkerList is the answer of GET /workers: a page of workers ordered by
// id, the cursor of the next page (JSON "cursor", absent on the last) and
// "hasNextPage".
type WorkerList struct {
	Workers    []*dftype.WorkerInfo `json:"workers"`
	NextCursor string               `json:"cursor,omitempty"`
}

// MarshalJSON writes the page with "hasNextPage", true when NextCursor
// (JSON "cursor") is set: the paging shape of every list of the HTTP API.
func (l WorkerList) MarshalJSON() ([]byte, error) {
	type plain WorkerList
	return paging.MarshalPage(plain(l), l.NextCursor)
}

// ListWorkers returns a page of the registered workers (GET /workers).
func (c *Client) ListWorkers(ctx context.Context, p WorkerListParams) (*WorkerList, error) {
	q := url.Values{}
	if p.Status != "" {
		q.Set("status", string(p.Status))
	}
	if p.Queue != "" {
		q.Set("queue", p.Queue)
	}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	var out WorkerList
	return &out, c.do(ctx, http.MethodGet, c.api("/workers"), q, nil, &out)
}

// GetWorker returns one worker (GET /workers/:id); WORKER_NOT_FOUND
// (dftype.ErrWorkerNotFound) for an unknown id.
func (c *Client) GetWorker(ctx context.Context, id string) (*dftype.WorkerInfo, error) {
	path, err := c.workerPath(id, "")
	if err != nil {
		return nil, err
	}
	var out dftype.WorkerInfo
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// DrainWorker asks a worker to drain (POST /workers/:id/drain) and returns
// it, draining; WORKER_NOT_FOUND for an unknown id, WORKER_OFFLINE
// (dftype.ErrWorkerOffline) for an offline one.
func (c *Client) DrainWorker(ctx context.Context, id string) (*dftype.WorkerInfo, error) {
	path, err := c.workerPath(id, "/drain")
	if err != nil {
		return nil, err
	}
	var out dftype.WorkerInfo
	return &out, c.do(ctx, http.MethodPost, path, nil, struct{}{}, &out)
}

func (c *Client) workerPath(id, suffix string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: empty worker id", workflow.ErrInvalidRequest)
	}
	return c.api("/workers/" + url.PathEscape(id) + suffix), nil
}
