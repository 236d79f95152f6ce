package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// ErrNoLifecycleLog is returned by the lifecycle listings when the store
// keeps no lifecycle event log (it is not a db.LifecycleStore).
var ErrNoLifecycleLog = errors.New("the store keeps no lifecycle event log")

// LifecycleListParams select a page of lifecycle events (docs/events.md).
// Every filter is optional.
type LifecycleListParams struct {
	WorkflowName string
	InstanceID   string
	// WorkerID keeps only the events of this worker (worker.online,
	// worker.draining, worker.offline), which name no workflow.
	WorkerID string
	// Types keeps only events of these types (db.LifecycleEventTypes);
	// empty keeps all.
	Types []string
	// Since and Until keep events with Since <= at < Until; zero is
	// unbounded. Until must be after Since when both are set.
	Since, Until time.Time
	// PageSize is the page length, 1 to 1000.
	//
	// Defaults to 50.
	PageSize int
	// Cursor continues a previous page (LifecycleListResult.NextCursor).
	Cursor string
	// AfterID continues after the event with this id, as a cursor does
	// (a stream's Last-Event-ID); it may not be given with Cursor.
	AfterID int64
}

// LifecycleListResult is one page of lifecycle events, in id order.
type LifecycleListResult struct {
	Events []*dftype.LifecycleEvent `json:"events"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"cursor,omitempty"`
}

// MarshalJSON writes the page with "hasNextPage", true when NextCursor
// (JSON "cursor") is set: the paging shape of every list of the HTTP API.
func (r LifecycleListResult) MarshalJSON() ([]byte, error) {
	type plain LifecycleListResult
	return paging.MarshalPage(plain(r), r.NextCursor)
}

// ListLifecycleEvents returns a page of the lifecycle events of every
// namespace that match p, in id order. Bad params (an unknown type, a
// malformed cursor, an empty or inverted time range) are
// workflow.ErrInvalidRequest.
func (c *Client) ListLifecycleEvents(ctx context.Context, p LifecycleListParams) (*LifecycleListResult, error) {
	ls, ok := c.store.(db.LifecycleStore)
	if !ok {
		return nil, ErrNoLifecycleLog
	}
	lp, err := lifecycleListParams(&p)
	if err != nil {
		return nil, err
	}
	rows, err := ls.LifecycleList(ctx, lp)
	if err != nil {
		return nil, err
	}
	res := &LifecycleListResult{Events: make([]*dftype.LifecycleEvent, 0, len(rows))}
	if len(rows) > p.PageSize {
		rows = rows[:p.PageSize]
		res.NextCursor = EncodeLifecycleCursor(rows[len(rows)-1].ID)
	}
	for _, e := range rows {
		res.Events = append(res.Events, LifecycleEventOf(e))
	}
	return res, nil
}

// InstanceLifecycle returns a page of the lifecycle events of one
// instance of the client's namespace, every run's, in id order:
// workflow.ErrInstanceNotFound when there is no such instance, and
// p.WorkflowName and p.InstanceID are ignored.
func (c *Client) InstanceLifecycle(ctx context.Context, workflowName, id string, p LifecycleListParams) (*LifecycleListResult, error) {
	if _, err := c.Get(ctx, workflowName, id); err != nil {
		return nil, err
	}
	p.WorkflowName, p.InstanceID = workflowName, id
	return c.ListLifecycleEvents(ctx, p)
}

// NewestInstanceLifecycle returns up to n (1 to 1000) of the newest
// lifecycle events of one instance of the client's namespace, every run's,
// newest first, and whether older ones exist (list them with
// InstanceLifecycle, oldest first): workflow.ErrInstanceNotFound when there
// is no such instance.
func (c *Client) NewestInstanceLifecycle(ctx context.Context, workflowName, id string, n int) ([]*dftype.LifecycleEvent, bool, error) {
	ls, ok := c.store.(db.LifecycleStore)
	if !ok {
		return nil, false, ErrNoLifecycleLog
	}
	if n < 1 || n > paging.MaxPageSize {
		return nil, false, fmt.Errorf("%w: the number of events must be between 1 and %d", workflow.ErrInvalidRequest, paging.MaxPageSize)
	}
	if _, err := c.Get(ctx, workflowName, id); err != nil {
		return nil, false, err
	}
	rows, err := ls.LifecycleList(ctx, &db.LifecycleListParams{WorkflowName: workflowName, InstanceID: id, Newest: true, Limit: n + 1})
	if err != nil {
		return nil, false, err
	}
	more := len(rows) > n
	if more {
		rows = rows[:n]
	}
	events := make([]*dftype.LifecycleEvent, len(rows))
	for i, e := range rows {
		events[i] = LifecycleEventOf(e)
	}
	return events, more, nil
}

// lifecycleListParams checks p, fills its page size and returns the
// store's params (one more than a page, to learn whether another follows).
func lifecycleListParams(p *LifecycleListParams) (*db.LifecycleListParams, error) {
	if p.PageSize == 0 {
		p.PageSize = paging.DefaultPageSize
	}
	if p.PageSize < 1 || p.PageSize > paging.MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", workflow.ErrInvalidRequest, paging.MaxPageSize)
	}
	lp := &db.LifecycleListParams{
		WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, WorkerID: p.WorkerID, Since: p.Since, Until: p.Until,
		AfterID: p.AfterID, Limit: p.PageSize + 1,
	}
	if p.WorkerID != "" && (len(p.WorkerID) > maxWorkerIDLength || !utf8.ValidString(p.WorkerID)) {
		return nil, fmt.Errorf("%w: %q is not a worker id", workflow.ErrInvalidRequest, p.WorkerID)
	}
	if p.InstanceID != "" {
		if p.WorkflowName == "" {
			return nil, fmt.Errorf("%w: an instance filter needs its workflow", workflow.ErrInvalidRequest)
		}
		if err := workflow.ValidateInstanceID(p.InstanceID); err != nil {
			return nil, err
		}
	}
	for _, t := range p.Types {
		if !db.LifecycleEventType(t).Valid() {
			return nil, fmt.Errorf("%w: unknown lifecycle event type %q (one of %v)", workflow.ErrInvalidRequest, t, db.LifecycleEventTypes())
		}
		lp.Types = append(lp.Types, db.LifecycleEventType(t))
	}
	if !p.Since.IsZero() && !p.Until.IsZero() && !p.Until.After(p.Since) {
		return nil, fmt.Errorf("%w: until (%s) must be after since (%s)", workflow.ErrInvalidRequest,
			p.Until.Format(time.RFC3339Nano), p.Since.Format(time.RFC3339Nano))
	}
	if p.AfterID < 0 {
		return nil, fmt.Errorf("%w: the event id to continue after must not be negative", workflow.ErrInvalidRequest)
	}
	if p.Cursor != "" {
		if p.AfterID != 0 {
			return nil, fmt.Errorf("%w: give a cursor or an event id to continue after, not both", workflow.ErrInvalidRequest)
		}
		after, err := DecodeLifecycleCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		lp.AfterID = after
	}
	return lp, nil
}

// EncodeLifecycleCursor is the cursor of the page after the event id.
func EncodeLifecycleCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10)))
}

// DecodeLifecycleCursor returns the event id a cursor continues after;
// workflow.ErrInvalidRequest when it is malformed.
func DecodeLifecycleCursor(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || id < 0 {
		return 0, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
	}
	return id, nil
}

// LifecycleEventOf is the API's view of a stored lifecycle event.
func LifecycleEventOf(e *db.LifecycleEvent) *dftype.LifecycleEvent {
	return &dftype.LifecycleEvent{
		ID: e.ID, Type: string(e.Type), WorkflowName: e.WorkflowName, InstanceID: e.InstanceID,
		RunNumber: e.RunNumber, StepKey: e.StepKey, Attempt: e.Attempt, Detail: e.Detail, At: e.At, WorkerID: e.WorkerID,
	}
}

// LastLifecycleEventID returns the id of the newest lifecycle event, 0
// when there is none: where a stream of new events starts.
func (c *Client) LastLifecycleEventID(ctx context.Context) (int64, error) {
	ls, ok := c.store.(db.LifecycleStore)
	if !ok {
		return 0, ErrNoLifecycleLog
	}
	return ls.LifecycleLastID(ctx)
}
