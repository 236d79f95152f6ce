package db

import (
	"context"
	"time"
)

// LifecycleEventType names what a lifecycle event records. It is not the
// type of a workflow event (Event.Type), which authors choose; the
// lifecycle types are the fixed set below.
type LifecycleEventType string

// Lifecycle event types. Instance events have no step key; step events
// name their step.
const (
	// LifecycleCreated: an instance was created (a create, a batch create,
	// a schedule's firing, a child's Invoke).
	LifecycleCreated LifecycleEventType = "instance.created"
	// LifecycleStarted: a run started on a runner, once per run, in the
	// transaction that started it: an eager start's create, the claim that
	// took a run that never started, or the release that started a waiting
	// instance's run with its lease.
	LifecycleStarted LifecycleEventType = "instance.started"
	// LifecycleStepStarted: a step attempt started. It is written by the
	// checkpoint that records the attempt, at the attempt's start time.
	LifecycleStepStarted LifecycleEventType = "step.started"
	// LifecycleStepCompleted: a step completed (a Do step's result, a
	// consumed event, a sleep that ended).
	LifecycleStepCompleted LifecycleEventType = "step.completed"
	// LifecycleStepFailed: a step failed for good; Detail is the error.
	LifecycleStepFailed LifecycleEventType = "step.failed"
	// LifecycleStepRetrying: a step attempt failed and the step will be
	// retried; Attempt is the failed attempt and Detail its error.
	LifecycleStepRetrying LifecycleEventType = "step.retrying"
	// LifecycleWaiting: the run suspended; Detail says for what: "sleep",
	// "event:<type>", "retry" or "limit".
	LifecycleWaiting LifecycleEventType = "instance.waiting"
	// LifecycleEventReceived: a workflow event was sent to the instance
	// and buffered for its run; Detail is the event's type.
	LifecycleEventReceived LifecycleEventType = "event.received"
	// LifecyclePaused: a pause was asked for and took effect or was
	// recorded (the instance paused, or waitingForPause).
	LifecyclePaused LifecycleEventType = "instance.paused"
	// LifecycleResumed: a paused instance was resumed.
	LifecycleResumed LifecycleEventType = "instance.resumed"
	// LifecycleTerminated: an instance was terminated.
	LifecycleTerminated LifecycleEventType = "instance.terminated"
	// LifecycleRestarted: a new run of the instance started; RunNumber is
	// the new run's.
	LifecycleRestarted LifecycleEventType = "instance.restarted"
	// LifecycleCompleted: a run completed.
	LifecycleCompleted LifecycleEventType = "instance.completed"
	// LifecycleErrored: a run errored; Detail is the error.
	LifecycleErrored LifecycleEventType = "instance.errored"

	// Worker events name a worker (LifecycleEvent.WorkerID) and no
	// workflow or instance.

	// LifecycleWorkerOnline: a worker registered (or registered again,
	// after a restart or after it was marked offline).
	LifecycleWorkerOnline LifecycleEventType = "worker.online"
	// LifecycleWorkerDraining: a drain was asked of an online worker
	// (not logged again while it drains).
	LifecycleWorkerDraining LifecycleEventType = "worker.draining"
	// LifecycleWorkerOffline: a worker went offline; Detail is
	// "deregistered" (a clean stop) or "heartbeat stopped" (the reaper
	// marked it offline).
	LifecycleWorkerOffline LifecycleEventType = "worker.offline"
)

// LifecycleEventTypes lists every lifecycle event type, in the order of
// an instance's life, then the worker events.
func LifecycleEventTypes() []LifecycleEventType {
	return []LifecycleEventType{
		LifecycleCreated, LifecycleStarted, LifecycleStepStarted, LifecycleStepCompleted,
		LifecycleStepFailed, LifecycleStepRetrying, LifecycleWaiting, LifecycleEventReceived,
		LifecyclePaused, LifecycleResumed, LifecycleTerminated, LifecycleRestarted,
		LifecycleCompleted, LifecycleErrored,
		LifecycleWorkerOnline, LifecycleWorkerDraining, LifecycleWorkerOffline,
	}
}

// Valid reports whether t is one of LifecycleEventTypes.
func (t LifecycleEventType) Valid() bool {
	for _, v := range LifecycleEventTypes() {
		if t == v {
			return true
		}
	}
	return false
}

// LifecycleEvent is one row of the lifecycle event log: something that
// happened to an instance (or a worker), written in the transaction of the
// transition it records, so the log never disagrees with the state.
type LifecycleEvent struct {
	// ID grows with every event written (not necessarily in commit order
	// on Postgres, where concurrent transactions commit in any order), and
	// skips: see LifecycleRowOf.
	ID   int64
	Type LifecycleEventType
	// WorkflowName and InstanceID name the instance of an instance or
	// step event; both are "" for a worker event.
	WorkflowName string
	InstanceID   string
	// RunNumber is the run of an instance or step event; 0 for a worker
	// event.
	RunNumber int
	// StepKey names the step of a step event; "" for an instance event.
	StepKey string
	// Attempt is the step attempt a step event records; 0 otherwise.
	Attempt int
	// Detail is the error of a failure, the reason of a wait or the type
	// of a received event; "" when there is none.
	Detail string
	// At is when it happened: the transition's time (a step.started's is
	// the attempt's start).
	At time.Time
	// WorkerID names the worker of a worker event (worker.*); "" for the
	// others.
	WorkerID string
	// StepStartedAt is set only between a backend's LifecyclePack and
	// LifecycleUnpack: the start of the attempt whose outcome this event
	// is, when the event's row also records that attempt's step.started.
	// Lists never return it set.
	StepStartedAt time.Time
}

// LifecycleListParams are the arguments of LifecycleStore.LifecycleList.
// Every filter is optional.
type LifecycleListParams struct {
	WorkflowName string
	// InstanceID keeps one instance's events; it needs WorkflowName (an
	// instance id is unique within its workflow), and matches nothing
	// without it.
	InstanceID string
	// WorkerID keeps only the events of this worker (worker events).
	WorkerID string
	// Types keeps only events of these types; empty keeps all.
	Types []LifecycleEventType
	// Since and Until keep events with Since <= At < Until; zero is
	// unbounded.
	Since, Until time.Time
	// AfterID continues after the event with this id (the cursor).
	AfterID int64
	// Newest lists the newest events first, in descending id order (still
	// after AfterID); BeforeID then continues before the event with this
	// id (0: from the newest).
	Newest   bool
	BeforeID int64
	// Limit is the page length; 0 is the default page size.
	Limit int
}

// LifecyclePruneScan is how many times LifecyclePruneParams.Max events a
// prune batch looks at, oldest id first, for events older than Before: the
// log has no index on time, so a batch reads a bounded window, in which a
// few younger events (a step.started is as old as its attempt; runners'
// clocks differ) hold up none of the older ones after them.
const LifecyclePruneScan = 4

// LifecyclePruneParams are the arguments of LifecycleStore.LifecyclePrune.
type LifecyclePruneParams struct {
	// Before deletes events with At before it.
	Before time.Time
	// Max bounds how many events one call deletes (a small batch, so the
	// prune never holds locks for long).
	Max int
}

// LifecycleStore is the lifecycle event log a Store may offer as a
// capability (both backends do). The events themselves are written by the
// store's transitions (Checkpoint, InstanceCreate, EventSend, the
// management changes and the WorkerStore's changes of a worker's status),
// in their transactions, while the log is on.
type LifecycleStore interface {
	// LifecycleList returns a page of events matching p, in id order
	// (descending with p.Newest).
	LifecycleList(ctx context.Context, p *LifecycleListParams) ([]*LifecycleEvent, error)
	// LifecyclePrune deletes up to p.Max events older than p.Before, the
	// oldest ids first among the LifecyclePruneScan × p.Max oldest, and
	// returns how many it deleted; fewer than p.Max means none is left to
	// delete for now. A backend may keep an event past p.Before for a
	// while (SQLite keeps the newest event, so that no id is reused), never
	// delete one younger.
	LifecyclePrune(ctx context.Context, p *LifecyclePruneParams) (int, error)
	// LifecycleLastID returns the id of the newest event, 0 when there is
	// none: where a subscriber that wants only new events starts.
	LifecycleLastID(ctx context.Context) (int64, error)
	// LifecycleLogSet turns the writing of events on or off (on when the
	// store is opened). While off, transitions run no statement for it.
	LifecycleLogSet(on bool)
}
