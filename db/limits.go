package db

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ErrLimitInvalid means a limit given to the store is not positive (a
// max running or a rate of zero or less, or a rate with no period).
var ErrLimitInvalid = errors.New("db: limit must be positive")

// Scope prefixes: a limited scope's name starts with its kind.
const (
	scopeQueue    = "queue:"
	scopeWorkflow = "workflow:"
	scopeKey      = "key:"
)

// QueueScope is the scope of the limits of a queue.
func QueueScope(queue string) string { return scopeQueue + queue }

// WorkflowScope is the scope of the limits of a workflow name.
func WorkflowScope(workflowName string) string { return scopeWorkflow + workflowName }

// KeyScope is the scope of the limits of one concurrency key of a workflow.
func KeyScope(workflowName, key string) string { return scopeKey + workflowName + ":" + key }

// LimitSpec is one limited scope of an instance being created: the scope
// takes a slot when the instance is admitted and gives it back when the
// instance is terminal (see docs/limits.md).
type LimitSpec struct {
	Scope string
	// Define writes MaxRunning and the rate on the scope's row (the limits
	// of a workflow definition, which the latest create states); false
	// keeps the row's limits (a queue's, set with QueueLimitSet) and only
	// makes sure the row exists.
	Define     bool
	MaxRunning int
	RateLimit  int
	RatePeriod time.Duration
}

// LimitRow is the state of one limited scope as a store reads it under
// its lock: its limits (0 for none), how many admitted instances hold a
// slot, and the rate limit's theoretical arrival time.
type LimitRow struct {
	Scope      string
	MaxRunning int
	RateLimit  int
	RatePeriod time.Duration
	Running    int
	// RateWindow is the start of the latest window the rate limit gave
	// starts in, and RateCount how many.
	RateWindow *time.Time
	RateCount  int
	UpdatedAt  time.Time
}

// Limit kinds of a WaitingFor.
const (
	LimitKindConcurrency = "concurrency"
	LimitKindRate        = "rate"
)

// WaitingFor says which limit holds a queued instance back: a concurrency
// limit with no free slot (the instance has no task until one frees), or a
// rate limit that lets it start at Until.
type WaitingFor struct {
	// Kind is LimitKindConcurrency or LimitKindRate.
	Kind string
	// Scope is the limited scope: "queue:<name>", "workflow:<name>" or
	// "key:<workflow>:<key>".
	Scope string
	// Max is the scope's max running (concurrency) or starts per period (rate).
	Max int
	// Period is the rate limit's period; zero for a concurrency limit.
	Period time.Duration
	// Until is when a rate limit lets the instance start; nil for a
	// concurrency limit.
	Until *time.Time
}

// ScopeKind returns the kind of a scope ("queue", "workflow" or "key") and
// its name: the queue, the workflow, or for a key scope the key (after the
// workflow name and a colon).
func ScopeKind(scope string) (kind, name string) {
	switch {
	case strings.HasPrefix(scope, scopeQueue):
		return "queue", strings.TrimPrefix(scope, scopeQueue)
	case strings.HasPrefix(scope, scopeWorkflow):
		return "workflow", strings.TrimPrefix(scope, scopeWorkflow)
	case strings.HasPrefix(scope, scopeKey):
		return "key", strings.TrimPrefix(scope, scopeKey)
	}
	return "", scope
}

// QueueLimits are the limits of a queue, stored in the database and set at
// run time.
type QueueLimits struct {
	Name string
	// MaxRunning is the most admitted, not yet terminal instances of the
	// queue's limited workflows; 0 for no limit.
	MaxRunning int
	// RateLimit is the most starts per RatePeriod; 0 for no limit.
	RateLimit  int
	RatePeriod time.Duration
	// Running is how many instances hold a slot of the queue now.
	Running   int
	UpdatedAt time.Time
}

// QueueLimitSetParams are the arguments of LimitStore.QueueLimitSet. A
// zero MaxRunning or RateLimit clears that limit; negative values are
// ErrLimitInvalid.
type QueueLimitSetParams struct {
	Name       string
	MaxRunning int
	RateLimit  int
	RatePeriod time.Duration
	Now        *time.Time
}

// Validate returns ErrLimitInvalid for negative limits or a rate without a
// positive period.
func (p *QueueLimitSetParams) Validate() error {
	if p.MaxRunning < 0 || p.RateLimit < 0 || (p.RateLimit > 0 && p.RatePeriod <= 0) {
		return ErrLimitInvalid
	}
	return nil
}

// LimitStore holds the limits of queues. The limits of workflows and keys
// come with each create (InstanceCreateParams.Limits).
type LimitStore interface {
	// QueueLimitSet writes a queue's limits, replacing the ones it had.
	QueueLimitSet(ctx context.Context, p *QueueLimitSetParams) (*QueueLimits, error)
	// QueueLimitGet returns a queue's limits or ErrNotFound when none was
	// ever set (nor any limited instance created on it).
	QueueLimitGet(ctx context.Context, name string) (*QueueLimits, error)
	// QueueLimitList returns the limits of every queue that has a row,
	// by name.
	QueueLimitList(ctx context.Context) ([]*QueueLimits, error)
}

// QueueLimitsFromRow is the QueueLimits of a queue scope's row.
func QueueLimitsFromRow(r *LimitRow) *QueueLimits {
	_, name := ScopeKind(r.Scope)
	return &QueueLimits{
		Name: name, MaxRunning: r.MaxRunning, RateLimit: r.RateLimit, RatePeriod: r.RatePeriod,
		Running: r.Running, UpdatedAt: r.UpdatedAt,
	}
}

// QueueScopePrefix is the first and the end (exclusive) of the range of
// queue scope names, for a store's list.
func QueueScopePrefix() (start, end string) { return scopeQueue, "queue;" }
