package client

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// ServedQueuesTTL is how long a client keeps what it read of the queues the
// online workers serve before it reads the workers again, for
// InstanceInfo.Unserved.
const ServedQueuesTTL = 2 * time.Second

// allQueues is runner.AllQueues: a worker whose queues are it alone serves
// every queue.
const allQueues = "*"

// servedCache is what the client read of the queues the online workers
// serve. Views of a client (Namespace) share it.
type servedCache struct {
	mu     sync.Mutex
	queues map[string]bool
	all    bool // a worker serves every queue
	readAt time.Time
}

// markUnserved sets InstanceInfo.Unserved on the instances of infos that
// are not terminal and whose queue no online worker serves. It reads the
// workers at most once per ServedQueuesTTL, and not at all for a page of
// terminal instances. A store error leaves the instances unmarked: the mark
// is a hint, not the instance's state.
func (c *Client) markUnserved(ctx context.Context, infos ...*dftype.InstanceInfo) {
	need := false
	for _, i := range infos {
		if i != nil && !i.Status.Terminal() && i.Queue != "" {
			need = true
			break
		}
	}
	if !need {
		return
	}
	served, all, ok := c.servedQueues(ctx)
	if !ok || all {
		return
	}
	for _, i := range infos {
		if i != nil && !i.Status.Terminal() && i.Queue != "" && !served[i.Queue] {
			i.Unserved = true
		}
	}
}

// servedQueues returns the queues the online workers serve, and whether one
// of them serves every queue; ok is false when the workers could not be read.
func (c *Client) servedQueues(ctx context.Context) (served map[string]bool, all, ok bool) {
	cache := c.served
	cache.mu.Lock()
	defer cache.mu.Unlock()
	now := c.clock.Now()
	if cache.queues != nil && now.Sub(cache.readAt) < ServedQueuesTTL && !now.Before(cache.readAt) {
		return cache.queues, cache.all, true
	}
	queues, all := map[string]bool{}, false
	p := &db.WorkerListParams{Status: db.WorkerStatusOnline, Limit: 1000}
	for {
		page, err := c.store.WorkerList(ctx, p)
		if err != nil {
			return nil, false, false
		}
		for _, w := range page {
			for _, q := range w.Queues {
				queues[q] = true
			}
			all = all || slices.Contains(w.Queues, allQueues)
		}
		if len(page) < p.Limit {
			break
		}
		p.AfterID = page[len(page)-1].ID
	}
	cache.queues, cache.all, cache.readAt = queues, all, now
	return queues, all, true
}
