package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// ErrQueueNotFound means no limits were ever set for the named queue. It
// is workflow.ErrQueueNotFound.
var ErrQueueNotFound = workflow.ErrQueueNotFound

// QueueLimitsTTL is how long a client trusts what it read of the queues'
// limits before it reads them again (once, on the next create). A queue
// limit set by another process applies to the instances this client
// creates at most this long after it was set; one set through this client
// applies at once.
const QueueLimitsTTL = 5 * time.Second

// QueueLimits are the limits of a queue, set at run time and stored in the
// database. A zero field is no limit.
type QueueLimits struct {
	// MaxRunning is the most admitted, not yet terminal instances on the
	// queue, across every runner.
	MaxRunning int
	// Rate limits the starts of the queue's instances.
	Rate workflow.RateLimit
}

// QueueInfo is a queue's limits and how many instances hold a slot of it.
type QueueInfo struct {
	Name       string              `json:"name"`
	MaxRunning int                 `json:"maxRunning,omitempty"`
	Rate       *workflow.RateLimit `json:"rate,omitempty"`
	Running    int                 `json:"running"`
	UpdatedAt  time.Time           `json:"updatedAt"`
}

// queueCache is what the client read of the queues' limits: the set of
// queues that have one.
type queueCache struct {
	mu      sync.Mutex
	limited map[string]bool
	readAt  time.Time
}

// SetQueueLimits sets the limits of a queue, replacing the ones it had (a
// zero field clears that limit). A negative limit, or a rate with a limit
// or a period of zero or less, is workflow.ErrInvalidLimit. The limits
// apply to instances created after they are set; instances already
// created keep the admission they had.
func (c *Client) SetQueueLimits(ctx context.Context, name string, l QueueLimits) (*QueueInfo, error) {
	if err := c.fleetWide("setting a queue's limits"); err != nil {
		return nil, err
	}
	if err := workflow.ValidateQueueName(name); err != nil {
		return nil, err
	}
	if l.MaxRunning < 0 {
		return nil, fmt.Errorf("%w: max running must be positive, got %d", workflow.ErrInvalidLimit, l.MaxRunning)
	}
	if !l.Rate.IsZero() {
		if err := l.Rate.Validate(); err != nil {
			return nil, err
		}
	}
	q, err := c.store.QueueLimitSet(ctx, &db.QueueLimitSetParams{
		Name: name, MaxRunning: l.MaxRunning, RateLimit: l.Rate.Limit, RatePeriod: l.Rate.Period, Now: c.now(),
	})
	if err != nil {
		if errors.Is(err, db.ErrLimitInvalid) {
			return nil, fmt.Errorf("%w: %w", workflow.ErrInvalidLimit, err)
		}
		return nil, err
	}
	c.queues.mu.Lock()
	c.queues.readAt = time.Time{} // read again on the next create
	c.queues.mu.Unlock()
	return queueInfo(q), nil
}

// GetQueue returns a queue's limits, or ErrQueueNotFound when none were
// ever set.
func (c *Client) GetQueue(ctx context.Context, name string) (*QueueInfo, error) {
	if err := workflow.ValidateQueueName(name); err != nil {
		return nil, err
	}
	q, err := c.store.QueueLimitGet(ctx, name)
	if errors.Is(err, db.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	return queueInfo(q), nil
}

// ListQueues returns every queue that has limits, by name.
func (c *Client) ListQueues(ctx context.Context) ([]*QueueInfo, error) {
	qs, err := c.store.QueueLimitList(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*QueueInfo, len(qs))
	for i, q := range qs {
		out[i] = queueInfo(q)
	}
	return out, nil
}

func queueInfo(q *db.QueueLimits) *QueueInfo {
	info := &QueueInfo{Name: q.Name, MaxRunning: q.MaxRunning, Running: q.Running, UpdatedAt: q.UpdatedAt}
	if q.RateLimit > 0 {
		info.Rate = &workflow.RateLimit{Limit: q.RateLimit, Period: q.RatePeriod}
	}
	return info
}

// queueLimited reports whether the queue has a limit, from what the client
// read of the queues at most QueueLimitsTTL ago.
func (c *Client) queueLimited(ctx context.Context, queue string) (bool, error) {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	now := time.Now()
	if c.queues.limited == nil || now.Sub(c.queues.readAt) > QueueLimitsTTL || c.queues.readAt.IsZero() {
		qs, err := c.store.QueueLimitList(ctx)
		if err != nil {
			return false, fmt.Errorf("reading queue limits: %w", err)
		}
		limited := make(map[string]bool, len(qs))
		for _, q := range qs {
			if q.MaxRunning > 0 || q.RateLimit > 0 {
				limited[q.Name] = true
			}
		}
		c.queues.limited, c.queues.readAt = limited, now
	}
	return c.queues.limited[queue], nil
}

// limitSpecs returns the limited scopes of an instance of def with params:
// none (and no statement) for a workflow without limits on a queue without
// any.
func (c *Client) limitSpecs(ctx context.Context, def *workflow.Definition, queue string, params, metadata json.RawMessage) ([]db.LimitSpec, error) {
	var specs []db.LimitSpec
	if queue == "" {
		queue = workflow.DefaultQueue
	}
	limitedQueue, err := c.queueLimited(ctx, queue)
	if err != nil {
		return nil, err
	}
	if limitedQueue {
		specs = append(specs, db.LimitSpec{Scope: db.QueueScope(queue)})
	}
	l := &def.Limits
	if !l.Limited() && c.limits != nil {
		dyn, err := c.limits(ctx, def.Name, metadata)
		if err != nil {
			return nil, err
		}
		if dyn != nil {
			l = dyn
		}
	}
	if l.MaxRunning > 0 || !l.Rate.IsZero() {
		specs = append(specs, db.LimitSpec{
			Scope: db.WorkflowScope(def.Name), Define: true,
			MaxRunning: l.MaxRunning, RateLimit: l.Rate.Limit, RatePeriod: l.Rate.Period,
		})
	}
	if l.Key != nil {
		key, err := l.Key(params)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", workflow.ErrConcurrencyKey, err)
		}
		specs = append(specs, db.LimitSpec{
			Scope: db.KeyScope(def.Name, key), Define: true,
			MaxRunning: l.KeyMaxRunning, RateLimit: l.KeyRate.Limit, RatePeriod: l.KeyRate.Period,
		})
	}
	return specs, nil
}

// LimitSpecs returns the limited scopes an instance of workflowName with
// params and metadata is created under (none for a workflow without
// limits on a queue without any), as Create computes them: for callers
// that create instances through the store themselves (the scheduler). A
// concurrency key that cannot be computed is workflow.ErrConcurrencyKey.
func (c *Client) LimitSpecs(ctx context.Context, workflowName string, params, metadata json.RawMessage) ([]db.LimitSpec, error) {
	def, ok := c.registry.Definition(workflowName)
	if !ok {
		return nil, nil
	}
	return c.limitSpecs(ctx, &def, def.Queue, params, metadata)
}

// waitingFor is the API's view of what holds an instance back.
func waitingFor(w *db.WaitingFor) *dftype.WaitingFor {
	if w == nil {
		return nil
	}
	kind, name := db.ScopeKind(w.Scope)
	if kind == "key" {
		// "<workflow>:<key>": the workflow is the instance's own.
		if _, key, ok := strings.Cut(name, ":"); ok {
			name = key
		}
	}
	return &dftype.WaitingFor{
		Kind: w.Kind, Scope: kind, Name: name, Max: w.Max,
		Period: dftype.Duration(w.Period), Until: w.Until,
	}
}
