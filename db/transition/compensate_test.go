package transition_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/workflow"
)

func TestCompensate(t *testing.T) {
	t.Parallel()
	requeue := transition.TaskWrite{Op: transition.TaskRequeue, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()}
	for _, tc := range []struct {
		from workflow.InstanceStatus
		want transition.ChangePlan
	}{
		{workflow.StatusRunning, transition.ChangePlan{Status: workflow.StatusRunning, PauseRequested: true}},
		{workflow.StatusWaitingForPause, transition.ChangePlan{Status: workflow.StatusRunning, PauseRequested: true}},
		{workflow.StatusQueued, transition.ChangePlan{Status: workflow.StatusQueued, PauseRequested: true, Task: requeue, Notify: true}},
		{workflow.StatusWaiting, transition.ChangePlan{Status: workflow.StatusQueued, PauseRequested: true, Task: requeue, Notify: true}},
		{workflow.StatusPaused, transition.ChangePlan{Status: workflow.StatusQueued, PauseRequested: true, Task: requeue, Notify: true}},
	} {
		got, err := transition.Compensate(tc.from, false)
		require.NoError(t, err, tc.from)
		require.Equal(t, tc.want, got, tc.from)
	}
	withHook, err := transition.Compensate(workflow.StatusWaiting, true)
	require.NoError(t, err)
	require.Equal(t, db.HookReasonResume, withHook.Hook.Reason)
	for _, s := range []workflow.InstanceStatus{workflow.StatusComplete, workflow.StatusErrored, workflow.StatusTerminated} {
		_, err := transition.Compensate(s, false)
		require.ErrorIs(t, err, db.ErrTerminal, s)
	}
}
