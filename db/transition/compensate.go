package transition

import (
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// Compensate is the rule of InstanceCompensate (the backend records the
// request besides): a running (or pausing) instance stays running with a
// pause request, which stops it at its next step boundary, where the runner
// takes the request up and runs the compensations instead of parking; a
// queued, waiting or paused instance becomes queued with the pause request
// set and its task due now as a resume, with a resume hook entry and a
// notification, so that a runner starts the compensations at once. A
// terminal instance is db.ErrTerminal.
func Compensate(status dftype.InstanceStatus, recordHooks bool) (ChangePlan, error) {
	switch status {
	case dftype.StatusRunning, dftype.StatusWaitingForPause:
		return ChangePlan{Status: dftype.StatusRunning, PauseRequested: true}, nil
	case dftype.StatusQueued, dftype.StatusWaiting, dftype.StatusPaused:
		return ChangePlan{
			Status:         dftype.StatusQueued,
			PauseRequested: true,
			Task:           TaskWrite{Op: TaskRequeue, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()},
			Hook:           hook(recordHooks, db.HookReasonResume),
			Notify:         true,
		}, nil
	}
	return ChangePlan{}, db.ErrTerminal
}
