package transition_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

func TestCompensate(t *testing.T) {
	t.Parallel()
	requeue := transition.TaskWrite{Op: transition.TaskRequeue, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()}
	for _, tc := range []struct {
		from dftype.InstanceStatus
		want transition.ChangePlan
	}{
		{dftype.StatusRunning, transition.ChangePlan{Status: dftype.StatusRunning, PauseRequested: true}},
		{dftype.StatusWaitingForPause, transition.ChangePlan{Status: dftype.StatusRunning, PauseRequested: true}},
		{dftype.StatusQueued, transition.ChangePlan{Status: dftype.StatusQueued, PauseRequested: true, Task: requeue, Notify: true}},
		{dftype.StatusWaiting, transition.ChangePlan{Status: dftype.StatusQueued, PauseRequested: true, Task: requeue, Notify: true}},
		{dftype.StatusPaused, transition.ChangePlan{Status: dftype.StatusQueued, PauseRequested: true, Task: requeue, Notify: true}},
	} {
		got, err := transition.Compensate(tc.from, false)
		require.NoError(t, err, tc.from)
		require.Equal(t, tc.want, got, tc.from)
	}
	withHook, err := transition.Compensate(dftype.StatusWaiting, true)
	require.NoError(t, err)
	require.Equal(t, db.HookReasonResume, withHook.Hook.Reason)
	for _, s := range []dftype.InstanceStatus{dftype.StatusComplete, dftype.StatusErrored, dftype.StatusTerminated} {
		_, err := transition.Compensate(s, false)
		require.ErrorIs(t, err, db.ErrTerminal, s)
	}
}
