package transition

import (
	"time"

	"github.com/duraflow/duraflow/db"
)

// TaskOp says what a transition does with the instance's task row.
type TaskOp int

// Task operations.
const (
	// TaskKeep leaves the task row as it is.
	TaskKeep TaskOp = iota
	// TaskSchedule gives the held task back to the queue: pending, unlocked,
	// as Kind with Priority, due at RunAt (or now, when the plan's due
	// condition holds), its lease losses reset (a suspend or park is
	// progress).
	TaskSchedule
	// TaskDelete deletes the task: the run ended or the instance was
	// terminated, and a holder of it is fenced out.
	TaskDelete
	// TaskRequeue makes the task pending and due now as Kind with a new
	// version (inserting it when there is none), so that whoever still holds
	// an older version is fenced out.
	TaskRequeue
	// TaskWake makes a pending task due now (never later than it was) as
	// Kind, or leases it to the send's lease owner as a claim would.
	TaskWake
	// TaskInsert inserts the first task of a new instance, kind run, due
	// now (or leased, with a lease).
	TaskInsert
)

// TaskWrite is what a transition writes to the instance's task.
type TaskWrite struct {
	// Op is what happens to the task row.
	Op TaskOp
	// Kind is the kind a scheduled, requeued, woken or inserted task
	// takes.
	Kind db.TaskKind
	// Priority is Kind's claim priority (db.TaskKind.Priority).
	Priority int
	// RunAt is when a scheduled task is due, unless it is due at once.
	RunAt time.Time
	// DueOnEvents are the event types of which one buffered, undelivered
	// event makes a scheduled task due at once (see Due).
	DueOnEvents []string
	// ResetAttempts clears the attempts, last error and lease losses of a
	// requeued task: a new run.
	ResetAttempts bool
	// ResetLeaseLosses sets a kept task's lease losses back to zero: the
	// first progress after a claim that took over an expired lease.
	ResetLeaseLosses bool
}

// Due reports whether a scheduled task is due at once rather than at
// RunAt: RunAt has come by now, or an undelivered event of one of
// DueOnEvents is buffered for the run (eventBuffered).
func (w *TaskWrite) Due(now time.Time, eventBuffered bool) bool {
	return eventBuffered || !w.RunAt.After(now)
}

// HookWrite is the OnWorkflowEnqueued outbox entry a transition records;
// the zero value records none. The entry is due when the task is.
type HookWrite struct {
	Reason db.HookReason
}

// Record reports whether an entry is recorded.
func (h HookWrite) Record() bool { return h.Reason != "" }

// hook is the entry of reason when hooks are recorded.
func hook(record bool, reason db.HookReason) HookWrite {
	if !record {
		return HookWrite{}
	}
	return HookWrite{Reason: reason}
}
