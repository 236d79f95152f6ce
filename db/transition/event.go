package transition

import (
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// SendPlan is what sending an event writes besides buffering it for the
// instance's current run.
type SendPlan struct {
	// Wake is set when the send wakes the run, should a step of the run
	// wait for the event's type and its task be pending: Task is then
	// applied, Hook recorded and runners notified when Notify is set.
	Wake bool
	// Task makes the pending task due now (never later than it was) as a
	// resume, or leases it to the send's lease owner when Leased.
	Task TaskWrite
	// Leased says the woken task is leased to the send's lease owner (an
	// eager resume) instead of being made due.
	Leased bool
	// Hook is the event entry recorded when the send wakes the run.
	Hook HookWrite
	// Notify says runners are notified when the send wakes the run: the
	// task became due and is not leased.
	Notify bool
}

// Send is the rule of an event send to an instance in status: the event is
// buffered for the current run of a live instance (a terminal one is
// db.ErrTerminal), and a run that is neither paused nor pausing is woken
// when one of its steps waits for the type (see SendPlan). With an eager
// lease the woken task is leased, as a claim would (version and attempts
// up by one, the instance running), and no one is notified.
func Send(status dftype.InstanceStatus, recordHooks, leased bool) (SendPlan, error) {
	if status.Terminal() {
		return SendPlan{}, db.ErrTerminal
	}
	if !Wakes(status) {
		return SendPlan{}, nil
	}
	return WakePlan(recordHooks, leased), nil
}

// WakePlan is the plan of a send that wakes its run, whatever the
// instance's status: the writes Send returns for a status that Wakes. A
// backend that decides in one statement whether the send wakes (the status
// it reads under lock is one of WakeStatuses) binds this plan without
// reading the status first.
func WakePlan(recordHooks, leased bool) SendPlan {
	return SendPlan{
		Wake:   true,
		Task:   TaskWrite{Op: TaskWake, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()},
		Leased: leased,
		Hook:   hook(recordHooks, db.HookReasonEvent),
		Notify: !leased,
	}
}

// Wakes reports whether an event sent to an instance in status may wake
// its run: it is live and neither paused nor pausing.
func Wakes(status dftype.InstanceStatus) bool {
	return !status.Terminal() && status != dftype.StatusPaused && status != dftype.StatusWaitingForPause
}

// allStatuses are every instance status.
var allStatuses = []dftype.InstanceStatus{
	dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause,
	dftype.StatusPaused, dftype.StatusComplete, dftype.StatusErrored, dftype.StatusTerminated, dftype.StatusUnknown,
}

// WakeStatuses are the statuses in which Wakes holds, as text: a backend
// that decides the wake inside a statement binds them as its parameter.
func WakeStatuses() []string {
	var list []string
	for _, s := range allStatuses {
		if Wakes(s) {
			list = append(list, string(s))
		}
	}
	return list
}

// DeliverAtSend is the event-delivery rule of a send that woke a run. The
// send delivers the event it buffered itself, in its own transaction and
// exactly as the run would consume it (the run's first step waiting for
// the type, oldest first, completes with EventStepResult of the event, and
// the event is marked consumed by that step), only when
//
//   - the send carries the caller's clock (db.EventSendParams.Now): the
//     step result holds the event's time, which the send must know before
//     it writes; and
//   - the sent event is the run's only undelivered event of its type
//     (undelivered counts them, the sent one included): the one the run
//     would consume first.
//
// Otherwise the resumed run consumes the oldest undelivered event itself
// (db.CheckpointParams.ConsumeEvent). A backend may check the second
// condition inside its statement, as it reads the count atomically.
func DeliverAtSend(hasClock bool, undelivered int) bool {
	return hasClock && undelivered == 1
}
