package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// maxWorkerIDLength bounds a worker id, as runner.Config validates it.
const maxWorkerIDLength = 200

// WorkerListParams select a page of workers.
type WorkerListParams struct {
	// Status filters by status; empty lists every status.
	Status dftype.WorkerStatus
	// Queue lists only the workers that serve this queue; empty lists all.
	Queue string
	// PageSize is the page length, 1 to 1000.
	//
	// Defaults to 50.
	PageSize int
	// Cursor continues a previous page (WorkerListResult.NextCursor).
	Cursor string
}

// WorkerListResult is one page of workers, ordered by id.
type WorkerListResult struct {
	Workers []*dftype.WorkerInfo `json:"workers"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"cursor,omitempty"`
}

// MarshalJSON writes the page with "hasNextPage", true when NextCursor
// (JSON "cursor") is set: the paging shape of every list of the HTTP API.
func (r WorkerListResult) MarshalJSON() ([]byte, error) {
	type plain WorkerListResult
	return paging.MarshalPage(plain(r), r.NextCursor)
}

// ListWorkers returns a page of the registered workers (runners), ordered
// by id, of one status and serving one queue when p says so. Bad params are
// workflow.ErrInvalidRequest.
func (c *Client) ListWorkers(ctx context.Context, p WorkerListParams) (*WorkerListResult, error) {
	if p.Status != "" && !p.Status.Valid() {
		return nil, fmt.Errorf("%w: unknown worker status %q (online, draining or offline)", workflow.ErrInvalidRequest, p.Status)
	}
	if p.Queue != "" {
		if err := workflow.ValidateQueueName(p.Queue); err != nil {
			return nil, fmt.Errorf("%w: queue: %w", workflow.ErrInvalidRequest, err)
		}
	}
	if p.PageSize == 0 {
		p.PageSize = paging.DefaultPageSize
	}
	if p.PageSize < 1 || p.PageSize > paging.MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", workflow.ErrInvalidRequest, paging.MaxPageSize)
	}
	lp := &db.WorkerListParams{Status: db.WorkerStatus(p.Status), Queue: p.Queue, Limit: p.PageSize + 1}
	if p.Cursor != "" {
		after, err := decodeWorkerCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		lp.AfterID = after
	}
	rows, err := c.store.WorkerList(ctx, lp)
	if err != nil {
		return nil, err
	}
	res := &WorkerListResult{Workers: []*dftype.WorkerInfo{}}
	if len(rows) > p.PageSize {
		rows = rows[:p.PageSize]
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(rows[len(rows)-1].ID))
	}
	for _, w := range rows {
		res.Workers = append(res.Workers, workerInfo(w))
	}
	return res, nil
}

// GetWorker returns one worker, or dftype.ErrWorkerNotFound.
func (c *Client) GetWorker(ctx context.Context, id string) (*dftype.WorkerInfo, error) {
	if err := checkWorkerID(id); err != nil {
		return nil, err
	}
	w, err := c.store.WorkerGet(ctx, id)
	if err != nil {
		return nil, mapWorkerError(err, id)
	}
	return workerInfo(w), nil
}

// DrainWorker asks a worker to drain: it is draining at once, and the
// worker, which sees the request at its next heartbeat, claims nothing new,
// finishes or hands back what it holds within its drain grace, and
// deregisters. Draining a draining worker changes nothing. It returns
// dftype.ErrWorkerNotFound for an unknown id and dftype.ErrWorkerOffline
// for an offline worker, writing nothing.
func (c *Client) DrainWorker(ctx context.Context, id string) (*dftype.WorkerInfo, error) {
	if err := c.fleetWide("draining a worker"); err != nil {
		return nil, err
	}
	if err := checkWorkerID(id); err != nil {
		return nil, err
	}
	w, err := c.store.WorkerDrain(ctx, &db.WorkerDrainParams{ID: id, Now: *c.now()})
	if err != nil {
		return nil, mapWorkerError(err, id)
	}
	return workerInfo(w), nil
}

func checkWorkerID(id string) error {
	if id == "" || len(id) > maxWorkerIDLength || !utf8.ValidString(id) {
		return fmt.Errorf("%w: %q is not a worker id", dftype.ErrWorkerNotFound, id)
	}
	return nil
}

func decodeWorkerCursor(s string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || checkWorkerID(string(b)) != nil {
		return "", fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
	}
	return string(b), nil
}

func mapWorkerError(err error, id string) error {
	switch {
	case errors.Is(err, db.ErrNotFound):
		return fmt.Errorf("%w: %s", dftype.ErrWorkerNotFound, id)
	case errors.Is(err, db.ErrWorkerOffline):
		return fmt.Errorf("%w: %s", dftype.ErrWorkerOffline, id)
	}
	return err
}

func workerInfo(w *db.Worker) *dftype.WorkerInfo {
	return &dftype.WorkerInfo{
		ID: w.ID, Hostname: w.Hostname, PID: w.PID, Version: w.Version, Labels: w.Labels,
		Queues: w.Queues, Workflows: w.Workflows, MaxConcurrency: w.MaxConcurrency,
		ActiveCount: w.ActiveCount, CompletedTotal: w.CompletedTotal, FailedTotal: w.FailedTotal,
		RegisteredAt: w.RegisteredAt, LastHeartbeatAt: w.LastHeartbeatAt, Status: dftype.WorkerStatus(w.Status),
		DrainRequestedAt: w.DrainRequestedAt, DeregisteredAt: w.DeregisteredAt,
	}
}
