package db

import (
	"context"
	"errors"
	"time"
)

// ErrWorkerOffline means the worker named by a drain is offline: it
// deregistered, or the reaper marked it offline after its heartbeat
// stopped. There is nothing to drain; nothing was written.
var ErrWorkerOffline = errors.New("db: worker is offline")

// WorkerStatus is the status of a worker row.
type WorkerStatus string

// Worker statuses.
const (
	// WorkerStatusOnline means the worker heartbeats and claims work.
	WorkerStatusOnline WorkerStatus = "online"
	// WorkerStatusDraining means a drain was requested: the worker claims
	// nothing new and finishes or releases what it holds, then
	// deregisters.
	WorkerStatusDraining WorkerStatus = "draining"
	// WorkerStatusOffline means the worker deregistered (DeregisteredAt
	// is set) or its heartbeat stopped and the reaper released its tasks.
	WorkerStatusOffline WorkerStatus = "offline"
)

// Valid reports whether s is one of the worker statuses.
func (s WorkerStatus) Valid() bool {
	switch s {
	case WorkerStatusOnline, WorkerStatusDraining, WorkerStatusOffline:
		return true
	}
	return false
}

// Worker is one registered runner. Its ID is the runner's ID, the lock owner
// of the tasks it holds, so a task's LockOwner names its worker.
type Worker struct {
	ID       string
	Hostname string
	PID      int
	// Version is the version of the program the worker runs, as it gave it.
	Version string
	// Labels are free-form key/value pairs the worker registered with.
	Labels map[string]string
	// Queues are the task queues the worker serves.
	Queues []string
	// Workflows are the workflow names the worker executes.
	Workflows      []string
	MaxConcurrency int
	// ActiveCount is how many executions the worker held at its last
	// heartbeat.
	ActiveCount int
	// CompletedTotal and FailedTotal count the runs the worker completed
	// and errored since it registered, as of its last heartbeat.
	CompletedTotal  int64
	FailedTotal     int64
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
	// OfflineAfter is the worker's own reap threshold
	// (WorkerRegisterParams.OfflineAfter); zero when it recorded none.
	OfflineAfter time.Duration
	Status       WorkerStatus
	// DrainRequestedAt is when a drain was first requested; nil when none was.
	DrainRequestedAt *time.Time
	// DeregisteredAt is when the worker deregistered on a clean stop; nil
	// for a live worker and for one the reaper marked offline.
	DeregisteredAt *time.Time
}

// WorkerRegisterParams are the arguments of Store.WorkerRegister.
type WorkerRegisterParams struct {
	ID             string
	Hostname       string
	PID            int
	Version        string
	Labels         map[string]string
	Queues         []string
	Workflows      []string
	MaxConcurrency int
	Now            time.Time
	// OfflineAfter is how long the worker may go without a heartbeat
	// before a reaper marks it offline and releases its tasks, recorded
	// with its row: the worker starts no step once that time has passed
	// since its last heartbeat, so reapers must not be quicker. Zero
	// records none, and reapers use their own WorkerReapParams.OfflineAfter.
	OfflineAfter time.Duration
	// ReleaseHeld releases, in the same transaction, every task still
	// locked by ID, as the reaper releases them: a process sets it on its
	// first registration, before it claims anything, because whatever its
	// id holds then belongs to an earlier life of the worker (a restart of
	// the same host and pid) that is dead. A worker that registers again
	// after it was marked offline leaves it unset: it may hold tasks it
	// claimed since, whose leases are good.
	ReleaseHeld bool
}

// WorkerHeartbeatParams are the arguments of Store.WorkerHeartbeat.
type WorkerHeartbeatParams struct {
	ID             string
	ActiveCount    int
	CompletedTotal int64
	FailedTotal    int64
	Now            time.Time
}

// WorkerHeartbeatResult is what a worker learns from its heartbeat.
type WorkerHeartbeatResult struct {
	// DrainRequested is true when a drain was requested: the worker stops
	// claiming, finishes or releases what it holds and deregisters.
	DrainRequested bool
	// Offline is true when the worker was marked offline (the reaper found
	// its heartbeat too old): the heartbeat wrote nothing, the tasks it held
	// were released, and its writes through their old leases fail. It must
	// register again to come back.
	Offline bool
}

// WorkerDeregisterParams are the arguments of Store.WorkerDeregister.
type WorkerDeregisterParams struct {
	ID  string
	Now time.Time
}

// WorkerDrainParams are the arguments of Store.WorkerDrain.
type WorkerDrainParams struct {
	ID  string
	Now time.Time
}

// WorkerListParams are the arguments of Store.WorkerList. Workers are
// ordered by id; AfterID continues after the last row of the previous page.
type WorkerListParams struct {
	// Status filters by status; empty lists every status.
	Status WorkerStatus
	// Queue lists only the workers that serve this queue; empty lists all.
	Queue   string
	AfterID string
	// Limit is the page length; 0 means the store's default
	// (paging.DefaultPageSize, 50).
	Limit int
}

// WorkerReapParams are the arguments of Store.WorkerReap.
type WorkerReapParams struct {
	// Now is the reaper's time; released tasks are due at it.
	Now time.Time
	// OfflineAfter is the threshold for the workers that recorded none
	// (WorkerRegisterParams.OfflineAfter): a worker still online or
	// draining whose last heartbeat is older than its own threshold, or
	// this one, at Now is marked offline.
	OfflineAfter time.Duration
}

// WorkerReapResult says what a reap did.
type WorkerReapResult struct {
	// WorkerIDs are the workers it marked offline.
	WorkerIDs []string
	// ReleasedTasks counts the tasks of those workers it released.
	ReleasedTasks int
}

// WorkerStore is the worker registry of a Store.
type WorkerStore interface {
	// WorkerRegister registers a worker as online, or registers an
	// existing row again under the same id (a restart of the same host
	// and pid): times, totals and drain request start afresh. With
	// p.ReleaseHeld, every task still locked by the id is released at
	// once, as the reaper releases them.
	WorkerRegister(ctx context.Context, p *WorkerRegisterParams) (*Worker, error)
	// WorkerHeartbeat records a live worker's heartbeat, active count and
	// totals, and reports whether a drain was requested. A worker marked
	// offline is left alone and reported Offline; an unknown id is
	// ErrNotFound.
	WorkerHeartbeat(ctx context.Context, p *WorkerHeartbeatParams) (WorkerHeartbeatResult, error)
	// WorkerDeregister marks a worker offline on a clean stop, setting
	// DeregisteredAt; ErrNotFound for an unknown id.
	WorkerDeregister(ctx context.Context, p *WorkerDeregisterParams) (*Worker, error)
	// WorkerGet returns one worker or ErrNotFound.
	WorkerGet(ctx context.Context, id string) (*Worker, error)
	// WorkerList returns a page of workers ordered by id.
	WorkerList(ctx context.Context, p *WorkerListParams) ([]*Worker, error)
	// WorkerDrain asks a worker to drain: an online worker becomes
	// draining, a draining one stays so (the first request's time is
	// kept). ErrNotFound for an unknown id, ErrWorkerOffline for an
	// offline worker, and nothing is written then.
	WorkerDrain(ctx context.Context, p *WorkerDrainParams) (*Worker, error)
	// WorkerReap marks the workers whose last heartbeat is older than
	// p.OfflineAfter offline and, in the same transaction, releases every
	// task they hold: pending, due at once (never later than it was), at a
	// new version so that the old holder's fenced writes (TaskHeartbeat,
	// Checkpoint, TaskRelease) fail with ErrLeaseLost, with a lease loss
	// counted as for an expired lease.
	WorkerReap(ctx context.Context, p *WorkerReapParams) (WorkerReapResult, error)
}
