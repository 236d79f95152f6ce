package dftype

import (
	"errors"
	"time"
)

// Errors of the worker registry (see WorkerInfo).
var (
	// ErrWorkerNotFound means no worker has the id.
	ErrWorkerNotFound = errors.New("worker not found")
	// ErrWorkerOffline means the worker is offline (it deregistered, or
	// stopped heartbeating and was marked offline), so it cannot be
	// drained.
	ErrWorkerOffline = errors.New("worker is offline")
)

// WorkerStatus is the status of a worker: online, draining or offline.
type WorkerStatus string

// Worker statuses.
const (
	// WorkerOnline means the worker heartbeats and claims work.
	WorkerOnline WorkerStatus = "online"
	// WorkerDraining means a drain was requested: the worker claims nothing
	// new, finishes or hands back what it holds, and deregisters.
	WorkerDraining WorkerStatus = "draining"
	// WorkerOffline means the worker deregistered, or stopped heartbeating
	// and had its tasks released by the reaper.
	WorkerOffline WorkerStatus = "offline"
)

// Valid reports whether s is one of the worker statuses.
func (s WorkerStatus) Valid() bool {
	return s == WorkerOnline || s == WorkerDraining || s == WorkerOffline
}

// WorkerInfo is a registered worker (a runner) as the engine reports it.
// Its ID is the runner's ID, the lock owner of the tasks it holds.
type WorkerInfo struct {
	ID       string            `json:"id"`
	Hostname string            `json:"hostname"`
	PID      int               `json:"pid"`
	Version  string            `json:"version,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Queues are the task queues the worker serves.
	Queues []string `json:"queues"`
	// Workflows are the workflow names the worker executes.
	Workflows      []string `json:"workflows"`
	MaxConcurrency int      `json:"maxConcurrency"`
	// ActiveCount is how many runs the worker executed at its last heartbeat.
	ActiveCount int `json:"activeCount"`
	// CompletedTotal and FailedTotal count the runs it completed and
	// errored since it registered, as of its last heartbeat.
	CompletedTotal   int64        `json:"completedTotal"`
	FailedTotal      int64        `json:"failedTotal"`
	RegisteredAt     time.Time    `json:"registeredAt"`
	LastHeartbeatAt  time.Time    `json:"lastHeartbeatAt"`
	Status           WorkerStatus `json:"status"`
	DrainRequestedAt *time.Time   `json:"drainRequestedAt,omitempty"`
	DeregisteredAt   *time.Time   `json:"deregisteredAt,omitempty"`
}
