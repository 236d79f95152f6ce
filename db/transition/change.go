package transition

import (
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// ChangePlan is what a management transition (pause, resume, terminate,
// restart) writes to an instance it holds locked.
type ChangePlan struct {
	// Status is the status the change sets; "" leaves the instance as it
	// is and writes nothing at all.
	Status dftype.InstanceStatus
	// PauseRequested is the pause request written with Status: set when a
	// running instance is asked to pause at its next step boundary.
	PauseRequested bool
	// NewRun starts a new run: the run number moves on, and the output,
	// error, start and completion times and pause request clear.
	NewRun bool
	// Task is the write to the instance's task.
	Task TaskWrite
	// Hook is the outbox entry recorded with the change.
	Hook HookWrite
	// Notify is set when the change makes a task due now: runners are told.
	Notify bool
	// Event is the lifecycle event the change logs (see ChangeEvent); ""
	// logs none.
	Event db.LifecycleEventType
}

// ChangeFunc is the rule of one management transition: given the status of
// the instance, locked, what the change writes, or db.ErrTerminal when the
// change is refused.
type ChangeFunc func(status dftype.InstanceStatus, recordHooks bool) (ChangePlan, error)

// Pause is the rule of InstancePause: queued and waiting become paused at
// once, running becomes waitingForPause with a pause requested (the runner
// parks it at its next step boundary), paused and waitingForPause stay as
// they are. A terminal instance is db.ErrTerminal.
func Pause(status dftype.InstanceStatus, _ bool) (ChangePlan, error) {
	switch status {
	case dftype.StatusRunning:
		return ChangePlan{Status: dftype.StatusWaitingForPause, PauseRequested: true, Event: db.LifecyclePaused}, nil
	case dftype.StatusQueued, dftype.StatusWaiting:
		return ChangePlan{Status: dftype.StatusPaused, Event: db.LifecyclePaused}, nil
	}
	if status.Terminal() {
		return ChangePlan{}, db.ErrTerminal
	}
	return ChangePlan{}, nil
}

// Resume is the rule of InstanceResume: a paused instance becomes queued,
// its task pending and due now as a resume with a new version (which fences
// out a runner that loaded the paused instance and is about to park it), a
// resume hook entry is recorded and runners are notified. Every other
// status, terminal ones included, is left alone.
func Resume(status dftype.InstanceStatus, recordHooks bool) (ChangePlan, error) {
	if status != dftype.StatusPaused {
		return ChangePlan{}, nil
	}
	return ChangePlan{
		Status: dftype.StatusQueued,
		Task:   TaskWrite{Op: TaskRequeue, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()},
		Hook:   hook(recordHooks, db.HookReasonResume),
		Notify: true,
		Event:  db.LifecycleResumed,
	}, nil
}

// Terminate is the rule of InstanceTerminate: a live instance becomes
// terminated and its task is deleted, so a runner still holding it is
// fenced out. A terminal instance is db.ErrTerminal.
func Terminate(status dftype.InstanceStatus, _ bool) (ChangePlan, error) {
	if status.Terminal() {
		return ChangePlan{}, db.ErrTerminal
	}
	return ChangePlan{Status: dftype.StatusTerminated, Task: TaskWrite{Op: TaskDelete}, Event: db.LifecycleTerminated}, nil
}

// Restart is the rule of InstanceRestart, for an instance in any status: a
// new run (run number + 1) queued with output, error, start and pause
// cleared, its task pending and due now as kind run with a new version and
// its attempts, last error and lease losses cleared, a create hook entry
// (a new run was created) and a notification.
func Restart(_ dftype.InstanceStatus, recordHooks bool) (ChangePlan, error) {
	return ChangePlan{
		Status: dftype.StatusQueued,
		NewRun: true,
		Task: TaskWrite{
			Op: TaskRequeue, Kind: db.TaskKindRun, Priority: db.TaskKindRun.Priority(),
			ResetAttempts: true,
		},
		Hook:   hook(recordHooks, db.HookReasonCreate),
		Notify: true,
		Event:  db.LifecycleRestarted,
	}, nil
}

// CreatePlan is what creating one instance writes.
type CreatePlan struct {
	// Status is the new instance's: queued, or running (started) when its
	// first task is leased.
	Status dftype.InstanceStatus
	// Task inserts the first task: kind run, due now, leased when Leased.
	Task TaskWrite
	// Leased says the first task is leased to the create's lease owner
	// (an eager start).
	Leased bool
	// Hook is the create entry.
	Hook HookWrite
	// Notify is set when the task is claimable (not leased).
	Notify bool
}

// Create is the rule of creating an instance (InstanceCreate,
// InstanceCreateMany, a schedule's firing): queued with a first task of
// kind run due now and runners notified, or, with an eager lease, started
// (running) with the task leased to the lease's owner at version 1 with
// attempts 1 and no notification (nothing is there to claim). A create
// hook entry is recorded either way.
func Create(leased, recordHooks bool) CreatePlan {
	p := CreatePlan{
		Status: dftype.StatusQueued,
		Task:   TaskWrite{Op: TaskInsert, Kind: db.TaskKindRun, Priority: db.TaskKindRun.Priority()},
		Leased: leased,
		Hook:   hook(recordHooks, db.HookReasonCreate),
		Notify: !leased,
	}
	if leased {
		p.Status = dftype.StatusRunning
	}
	return p
}

// FirePlan is what one firing of a schedule writes.
type FirePlan struct {
	// LastInstanceID is the schedule's new last instance id: that of the
	// last instance the firing starts; nil (none) keeps the schedule's.
	LastInstanceID *string
	// Create is the rule of each instance the firing creates (never leased).
	Create CreatePlan
}

// Fire is the rule of a schedule's firing (ScheduleFire): the schedule
// advances, fenced by its version, and records the last instance it
// starts; each instance is created as Create says, and an id that exists
// already refuses the whole firing (db.ErrAlreadyExists, rolled back).
func Fire(p *db.ScheduleFireParams) FirePlan {
	plan := FirePlan{Create: Create(false, p.RecordHooks)}
	if n := len(p.Instances); n > 0 {
		plan.LastInstanceID = &p.Instances[n-1].ID
	}
	return plan
}
