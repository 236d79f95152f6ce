package transition

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

var (
	t0    = time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	later = t0.Add(time.Hour)
)

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params db.CheckpointParams
		facts  CheckpointFacts
		plan   CheckpointPlan
		status dftype.InstanceStatus
		result db.CheckpointResult
		runAt  time.Time
	}{
		{
			name:   "ContinueWritesStepsOnly",
			params: db.CheckpointParams{Outcome: db.OutcomeContinue},
			facts:  CheckpointFacts{Status: dftype.StatusRunning},
			plan:   CheckpointPlan{Task: TaskWrite{Op: TaskKeep}},
			result: db.CheckpointResult{Status: dftype.StatusRunning},
		},
		{
			name:   "ContinueReportsAPauseRequest",
			params: db.CheckpointParams{Outcome: db.OutcomeContinue, ResetLeaseLosses: true},
			facts:  CheckpointFacts{Status: dftype.StatusWaitingForPause, PauseRequested: true},
			plan:   CheckpointPlan{Task: TaskWrite{Op: TaskKeep, ResetLeaseLosses: true}},
			result: db.CheckpointResult{Status: dftype.StatusWaitingForPause, PauseRequested: true},
		},
		{
			name:   "SuspendWaitsUntilRunAt",
			params: db.CheckpointParams{Outcome: db.OutcomeSuspend, NextRunAt: later, RecordHooks: true, WaitEventTypes: []string{"a"}},
			facts:  CheckpointFacts{Status: dftype.StatusRunning},
			plan: CheckpointPlan{
				Status: dftype.StatusWaiting, StatusIfPauseRequested: dftype.StatusPaused,
				Task:     TaskWrite{Op: TaskSchedule, Kind: db.TaskKindWake, RunAt: later, DueOnEvents: []string{"a"}},
				MayBeDue: true, Hook: HookWrite{Reason: db.HookReasonWake},
			},
			status: dftype.StatusWaiting,
			result: db.CheckpointResult{Status: dftype.StatusWaiting},
			runAt:  later,
		},
		{
			name:   "SuspendWithBufferedEventIsDue",
			params: db.CheckpointParams{Outcome: db.OutcomeSuspend, NextRunAt: later, NextKind: db.TaskKindRetry},
			facts:  CheckpointFacts{Status: dftype.StatusRunning, Due: true},
			plan: CheckpointPlan{
				Status: dftype.StatusWaiting, StatusIfPauseRequested: dftype.StatusPaused,
				Task:     TaskWrite{Op: TaskSchedule, Kind: db.TaskKindRetry, RunAt: later},
				MayBeDue: true,
			},
			status: dftype.StatusWaiting,
			result: db.CheckpointResult{Status: dftype.StatusWaiting, Due: true},
			runAt:  t0,
		},
		{
			name:   "SuspendWithPauseRequestedPausesAndIsNotDue",
			params: db.CheckpointParams{Outcome: db.OutcomeSuspend, NextRunAt: later, NextKind: db.TaskKindRetry, RecordHooks: true},
			facts:  CheckpointFacts{Status: dftype.StatusWaitingForPause, PauseRequested: true, Due: true},
			plan: CheckpointPlan{
				Status: dftype.StatusWaiting, StatusIfPauseRequested: dftype.StatusPaused,
				Task:     TaskWrite{Op: TaskSchedule, Kind: db.TaskKindRetry, RunAt: later},
				MayBeDue: true, Hook: HookWrite{Reason: db.HookReasonRetry},
			},
			status: dftype.StatusPaused,
			result: db.CheckpointResult{Status: dftype.StatusPaused},
			runAt:  t0,
		},
		{
			name:   "ParkPausesUntilRunAt",
			params: db.CheckpointParams{Outcome: db.OutcomePark, NextRunAt: t0.Add(-time.Hour), RecordHooks: true},
			facts:  CheckpointFacts{Status: dftype.StatusWaitingForPause, PauseRequested: true, Due: true},
			plan: CheckpointPlan{
				Status: dftype.StatusPaused, StatusIfPauseRequested: dftype.StatusPaused,
				Task: TaskWrite{Op: TaskSchedule, Kind: db.TaskKindResume, RunAt: t0.Add(-time.Hour)},
			},
			status: dftype.StatusPaused,
			result: db.CheckpointResult{Status: dftype.StatusPaused},
			runAt:  t0.Add(-time.Hour),
		},
		{
			name:   "CompleteDeletesTheTask",
			params: db.CheckpointParams{Outcome: db.OutcomeComplete},
			facts:  CheckpointFacts{Status: dftype.StatusWaitingForPause, PauseRequested: true},
			plan:   CheckpointPlan{Status: dftype.StatusComplete, StatusIfPauseRequested: dftype.StatusComplete, Task: TaskWrite{Op: TaskDelete}},
			status: dftype.StatusComplete,
			result: db.CheckpointResult{Status: dftype.StatusComplete},
		},
		{
			name:   "ErrorDeletesTheTask",
			params: db.CheckpointParams{Outcome: db.OutcomeError},
			facts:  CheckpointFacts{Status: dftype.StatusRunning},
			plan:   CheckpointPlan{Status: dftype.StatusErrored, StatusIfPauseRequested: dftype.StatusErrored, Task: TaskWrite{Op: TaskDelete}},
			status: dftype.StatusErrored,
			result: db.CheckpointResult{Status: dftype.StatusErrored},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := Checkpoint(&tt.params)
			require.NoError(t, err)
			tt.plan.Task.Priority = tt.plan.Task.Kind.Priority()
			if tt.plan.Task.Kind == "" {
				tt.plan.Task.Priority = 0
			}
			if o := tt.params.Outcome; o == db.OutcomeSuspend || o == db.OutcomePark {
				want, err := Compensate(dftype.StatusWaiting, tt.params.RecordHooks)
				require.NoError(t, err)
				require.Equal(t, &want, plan.Requested, "a compensation request the run never saw is queued")
			} else {
				require.Nil(t, plan.Requested)
			}
			require.False(t, plan.Compensates(tt.facts))
			got := plan
			got.Requested = nil
			require.Equal(t, tt.plan, got)
			status, res := plan.Resolve(tt.facts)
			require.Equal(t, tt.status, status)
			require.Equal(t, &tt.result, res)
			require.Equal(t, tt.runAt, plan.RunAt(t0, tt.facts.Due))
		})
	}

	_, err := Checkpoint(&db.CheckpointParams{Outcome: 42})
	require.Error(t, err)
}

func TestCheckpointWithAnUntakenCompensationRequest(t *testing.T) {
	t.Parallel()
	requested := CheckpointFacts{Status: dftype.StatusRunning, PauseRequested: true, CompensationRequested: true}
	for _, o := range []db.CheckpointOutcome{db.OutcomeSuspend, db.OutcomePark} {
		plan, err := Checkpoint(&db.CheckpointParams{Outcome: o, NextRunAt: later})
		require.NoError(t, err)
		require.True(t, plan.Compensates(requested), o)
		status, res := plan.Resolve(requested)
		require.Equal(t, dftype.StatusQueued, status, o)
		require.Equal(t, &db.CheckpointResult{Status: dftype.StatusQueued, Due: true}, res, o)
		require.Equal(t, TaskWrite{Op: TaskRequeue, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()}, plan.Requested.Task)
		require.True(t, plan.Requested.PauseRequested, "the next run takes the request up")

		noPause := requested
		noPause.PauseRequested = false
		require.False(t, plan.Compensates(noPause), "a request always comes with a pause request")
	}
	for _, o := range []db.CheckpointOutcome{db.OutcomeContinue, db.OutcomeComplete, db.OutcomeError} {
		plan, err := Checkpoint(&db.CheckpointParams{Outcome: o})
		require.NoError(t, err)
		require.False(t, plan.Compensates(requested), o)
	}
}

func TestTaskWriteDue(t *testing.T) {
	t.Parallel()
	w := TaskWrite{RunAt: later}
	require.False(t, w.Due(t0, false))
	require.True(t, w.Due(t0, true), "a buffered event makes it due")
	require.True(t, w.Due(later, false), "its time has come")
}

func TestSteps(t *testing.T) {
	t.Parallel()
	p := &db.CheckpointParams{
		Steps:        []db.StepWrite{{Key: "a"}, {Key: "wait"}},
		ConsumeEvent: &db.ConsumeEvent{Type: "x", StepKey: "wait"},
	}
	require.Equal(t, p.Steps, Steps(p, false), "nothing consumed: every write")
	require.Equal(t, []db.StepWrite{{Key: "a"}}, Steps(p, true))
	require.Len(t, p.Steps, 2, "the params are left alone")
}

func TestChanges(t *testing.T) {
	t.Parallel()
	requeue := func(kind db.TaskKind, reset bool) TaskWrite {
		return TaskWrite{Op: TaskRequeue, Kind: kind, Priority: kind.Priority(), ResetAttempts: reset}
	}
	tests := []struct {
		name   string
		rule   ChangeFunc
		status dftype.InstanceStatus
		plan   ChangePlan
		err    error
	}{
		{"PauseRunningRequestsAPause", Pause, dftype.StatusRunning, ChangePlan{Status: dftype.StatusWaitingForPause, PauseRequested: true, Event: db.LifecyclePaused}, nil},
		{"PauseQueued", Pause, dftype.StatusQueued, ChangePlan{Status: dftype.StatusPaused, Event: db.LifecyclePaused}, nil},
		{"PauseWaiting", Pause, dftype.StatusWaiting, ChangePlan{Status: dftype.StatusPaused, Event: db.LifecyclePaused}, nil},
		{"PausePausedIsANoop", Pause, dftype.StatusPaused, ChangePlan{}, nil},
		{"PausePausingIsANoop", Pause, dftype.StatusWaitingForPause, ChangePlan{}, nil},
		{"PauseTerminal", Pause, dftype.StatusComplete, ChangePlan{}, db.ErrTerminal},
		{"ResumePaused", Resume, dftype.StatusPaused, ChangePlan{
			Status: dftype.StatusQueued, Task: requeue(db.TaskKindResume, false),
			Hook: HookWrite{Reason: db.HookReasonResume}, Notify: true, Event: db.LifecycleResumed,
		}, nil},
		{"ResumeRunningIsANoop", Resume, dftype.StatusRunning, ChangePlan{}, nil},
		{"ResumeTerminalIsANoop", Resume, dftype.StatusTerminated, ChangePlan{}, nil},
		{"TerminateWaiting", Terminate, dftype.StatusWaiting, ChangePlan{Status: dftype.StatusTerminated, Task: TaskWrite{Op: TaskDelete}, Event: db.LifecycleTerminated}, nil},
		{"TerminateTerminal", Terminate, dftype.StatusErrored, ChangePlan{}, db.ErrTerminal},
		{"RestartAnything", Restart, dftype.StatusComplete, ChangePlan{
			Status: dftype.StatusQueued, NewRun: true, Task: requeue(db.TaskKindRun, true),
			Hook: HookWrite{Reason: db.HookReasonCreate}, Notify: true, Event: db.LifecycleRestarted,
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := tt.rule(tt.status, true)
			require.ErrorIs(t, err, tt.err)
			require.Equal(t, tt.plan, plan)
			plan, _ = tt.rule(tt.status, false)
			require.False(t, plan.Hook.Record(), "no hook entry unless hooks are recorded")
		})
	}
}

func TestCreate(t *testing.T) {
	t.Parallel()
	insert := TaskWrite{Op: TaskInsert, Kind: db.TaskKindRun, Priority: db.TaskKindRun.Priority()}
	require.Equal(t, CreatePlan{Status: dftype.StatusQueued, Task: insert, Hook: HookWrite{Reason: db.HookReasonCreate}, Notify: true}, Create(false, true))
	require.Equal(t, CreatePlan{Status: dftype.StatusRunning, Task: insert, Leased: true}, Create(true, false))
}

func TestSend(t *testing.T) {
	t.Parallel()
	wake := TaskWrite{Op: TaskWake, Kind: db.TaskKindResume, Priority: db.TaskKindResume.Priority()}
	tests := []struct {
		name   string
		status dftype.InstanceStatus
		leased bool
		plan   SendPlan
		err    error
	}{
		{"WaitingWakes", dftype.StatusWaiting, false, SendPlan{Wake: true, Task: wake, Hook: HookWrite{Reason: db.HookReasonEvent}, Notify: true}, nil},
		{"LeasedWakeNotifiesNoOne", dftype.StatusWaiting, true, SendPlan{Wake: true, Task: wake, Leased: true, Hook: HookWrite{Reason: db.HookReasonEvent}}, nil},
		{"PausedBuffersOnly", dftype.StatusPaused, false, SendPlan{}, nil},
		{"PausingBuffersOnly", dftype.StatusWaitingForPause, false, SendPlan{}, nil},
		{"TerminalRefuses", dftype.StatusTerminated, false, SendPlan{}, db.ErrTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := Send(tt.status, true, tt.leased)
			require.ErrorIs(t, err, tt.err)
			require.Equal(t, tt.plan, plan)
		})
	}
	require.Equal(t, []string{"queued", "running", "waiting", "unknown"}, WakeStatuses())
	// The plan a backend binds without reading the status is Send's for
	// every status that wakes.
	for _, status := range WakeStatuses() {
		for _, leased := range []bool{false, true} {
			plan, err := Send(dftype.InstanceStatus(status), true, leased)
			require.NoError(t, err)
			require.Equal(t, WakePlan(true, leased), plan, status)
		}
	}
}

func TestDeliverAtSend(t *testing.T) {
	t.Parallel()
	require.True(t, DeliverAtSend(true, 1), "the only undelivered event, on the caller's clock")
	require.False(t, DeliverAtSend(true, 2), "an older event goes first: the run consumes it")
	require.False(t, DeliverAtSend(false, 1), "on the database clock the send cannot encode the step result")
}

func TestEventStepResult(t *testing.T) {
	t.Parallel()
	res, err := EventStepResult(&db.Event{Type: "approve", CreatedAt: t0.In(time.FixedZone("x", 3600))})
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"approve","payload":null,"timestamp":"2041-03-04T10:00:00Z"}`, string(res))
	res, err = EventStepResult(&db.Event{Type: "a", Payload: json.RawMessage(`{"ok": true}`), CreatedAt: t0})
	require.NoError(t, err)
	require.Equal(t, `{"type":"a","payload":{"ok":true},"timestamp":"2041-03-04T10:00:00Z"}`, string(res))
}

func TestFire(t *testing.T) {
	t.Parallel()
	plan := Fire(&db.ScheduleFireParams{RecordHooks: true, Instances: []db.InstanceCreateItem{{ID: "a"}, {ID: "b"}}})
	require.Equal(t, "b", *plan.LastInstanceID, "the last instance started")
	require.Equal(t, Create(false, true), plan.Create, "a firing's instances are created queued")
	require.Nil(t, Fire(&db.ScheduleFireParams{}).LastInstanceID, "no instance keeps the schedule's")
}

func TestWorkerDrain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status db.WorkerStatus
		err    error
	}{
		{db.WorkerStatusOnline, nil},
		{db.WorkerStatusDraining, nil},
		{db.WorkerStatusOffline, db.ErrWorkerOffline},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			err := WorkerDrain("w1", tc.status)
			if tc.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.err)
		})
	}
}
