package db

import (
	"context"
	"time"

	"github.com/duraflow/duraflow/dftype"
)

// StatusCount is how many instances of one workflow have one status.
type StatusCount struct {
	WorkflowName string
	Status       dftype.InstanceStatus
	Count        int64
}

// StatsGetParams selects what StatsGet reads at.
type StatsGetParams struct {
	// Now is the time "ready" and "due" are measured against; zero means
	// the database's clock.
	Now time.Time
}

// Stats is a snapshot of the engine's gauges, read from the database: what
// a metrics scrape or a console overview shows. Each part is read by one
// index-backed query; the parts are not one consistent snapshot.
type Stats struct {
	// Instances counts the instances by workflow and status; pairs with no
	// instance are left out. Every run of an instance counts once (an
	// instance has one row).
	Instances []StatusCount
	// TasksReady counts the pending tasks due at Now (run_at <= Now),
	// paused instances' included: the queue's backlog.
	TasksReady int64
	// TasksLeased counts the tasks a runner holds (status processing),
	// expired leases included.
	TasksLeased int64
	// OutboxBacklog counts the hook outbox entries not delivered yet.
	OutboxBacklog int64
	// OldestDueSchedule is the next_fire_at of the enabled schedule that
	// has been due (next_fire_at <= Now) the longest, or nil when none is
	// due: Now minus it is the scheduler's lag.
	OldestDueSchedule *time.Time
	// WorkersOnline counts the worker rows whose status is online.
	WorkersOnline int64
}

// StatsEndedParams select what StatsEnded counts.
type StatsEndedParams struct {
	// Namespace is the namespace counted; empty counts every namespace.
	Namespace string
	// Since and Until bound when the instances ended, both included: a
	// terminal instance's UpdatedAt.
	Since, Until time.Time
	// Bucket is the width of the buckets of time counted apart, from Since
	// (bucket 0 holds [Since, Since+Bucket)). It must be positive.
	Bucket time.Duration
	// Max bounds the instances read: the counts add up to at most Max,
	// and when they add up to Max some may be left out. It must be
	// positive.
	Max int
}

// EndedCount is how many instances of one workflow ended with one status
// in one bucket of StatsEndedParams.
type EndedCount struct {
	WorkflowName string
	Status       dftype.InstanceStatus
	Bucket       int
	Count        int64
}

// StatsStore reads the engine's gauges (see Stats).
type StatsStore interface {
	// StatsGet reads the gauges of Stats, each with one index-backed
	// query, outside any transaction. It writes nothing.
	StatsGet(ctx context.Context, p *StatsGetParams) (*Stats, error)
	// StatsEnded counts the instances that ended (complete, errored or
	// terminated) in a span of time, by workflow, status and bucket of
	// time, with one query on the list index of update times; it reads no
	// payload and writes nothing. Pairs and buckets with no instance are
	// left out.
	StatsEnded(ctx context.Context, p *StatsEndedParams) ([]EndedCount, error)
}
