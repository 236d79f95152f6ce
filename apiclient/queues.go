package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// QueueRate is a rate limit on the wire: at most Limit starts per Period.
type QueueRate struct {
	Limit  int             `json:"limit"`
	Period dftype.Duration `json:"period"`
}

// QueueLimits is the body of PUT /queues/:name: the queue's limits, which
// replace the ones it had. An absent field is no limit; a zero or negative
// one is INVALID_LIMIT.
type QueueLimits struct {
	MaxRunning *int       `json:"maxRunning,omitempty"`
	Rate       *QueueRate `json:"rate,omitempty"`
}

// Queue is a queue's limits and how many instances hold a slot of it.
type Queue struct {
	Name       string     `json:"name"`
	MaxRunning int        `json:"maxRunning,omitempty"`
	Rate       *QueueRate `json:"rate,omitempty"`
	Running    int        `json:"running"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

// QueueList is the answer of GET /queues.
type QueueList struct {
	Queues []*Queue `json:"queues"`
}

// ListQueues returns every queue that has limits (GET /queues).
func (c *Client) ListQueues(ctx context.Context) (*QueueList, error) {
	var out QueueList
	return &out, c.do(ctx, http.MethodGet, c.api("/queues"), nil, nil, &out)
}

// GetQueue returns a queue's limits (GET /queues/:name); QUEUE_NOT_FOUND
// when none were ever set.
func (c *Client) GetQueue(ctx context.Context, name string) (*Queue, error) {
	path, err := c.queuePath(name)
	if err != nil {
		return nil, err
	}
	var out Queue
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// SetQueueLimits replaces a queue's limits (PUT /queues/:name).
func (c *Client) SetQueueLimits(ctx context.Context, name string, limits QueueLimits) (*Queue, error) {
	path, err := c.queuePath(name)
	if err != nil {
		return nil, err
	}
	var out Queue
	return &out, c.do(ctx, http.MethodPut, path, nil, limits, &out)
}

func (c *Client) queuePath(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty queue name", workflow.ErrInvalidRequest)
	}
	return c.api("/queues/" + url.PathEscape(name)), nil
}
