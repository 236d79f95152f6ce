package transition

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// CheckpointPlan is what a checkpoint writes once its fence held.
type CheckpointPlan struct {
	// Status is the instance status the checkpoint sets (clearing any pause
	// request); "" leaves the instance row as it is.
	Status dftype.InstanceStatus
	// StatusIfPauseRequested replaces Status when the instance has a pause
	// requested; it equals Status when the request makes no difference.
	StatusIfPauseRequested dftype.InstanceStatus
	// Task is the write to the held task.
	Task TaskWrite
	// MayBeDue is set when the scheduled task is due at once, instead of at
	// Task.RunAt, when Task.Due says so (a suspend); a park is due at
	// Task.RunAt whatever the time.
	MayBeDue bool
	// Hook is the outbox entry recorded with the checkpoint.
	Hook HookWrite
	// Requested, set on a suspend or a park, replaces the plan when the
	// instance's pause request carries a compensation request the runner
	// has not taken up (CheckpointFacts.CompensationRequested): Compensate's
	// plan for a waiting instance, the instance queued with its pause
	// request kept and its task due now as a resume, with a resume hook
	// entry and a notification. The run that claims it takes the request up
	// (Store.CompensationTake) and compensates: a request that came as the
	// run stopped is never parked, and needs no call after the checkpoint.
	Requested *ChangePlan
}

// Checkpoint is the rule of a runner's checkpoint:
//
//   - continue writes the step rows only: the instance and its task stay as
//     they are (the heartbeat renews the lease), except that the task's
//     lease losses are reset when asked;
//   - suspend sets the instance waiting, or paused when a pause was
//     requested, and gives the task back as p.NextKind (wake when unset),
//     due at p.NextRunAt, or at once when that has come or an undelivered
//     event of one of p.WaitEventTypes is buffered; it records a hook entry
//     of reason retry (a retry's backoff) or wake;
//   - park sets the instance paused and gives the task back as p.NextKind
//     (resume when unset), due at p.NextRunAt;
//   - a suspend or park whose instance has a compensation request the
//     runner has not taken up queues it instead (CheckpointPlan.Requested);
//   - complete and error end the run (status complete or errored, with the
//     output or the error) and delete the task.
func Checkpoint(p *db.CheckpointParams) (CheckpointPlan, error) {
	switch p.Outcome {
	case db.OutcomeContinue:
		return CheckpointPlan{Task: TaskWrite{Op: TaskKeep, ResetLeaseLosses: p.ResetLeaseLosses}}, nil
	case db.OutcomeSuspend:
		kind := cmpKind(p.NextKind, db.TaskKindWake)
		reason := db.HookReasonWake
		if kind == db.TaskKindRetry {
			reason = db.HookReasonRetry
		}
		return CheckpointPlan{
			Status:                 dftype.StatusWaiting,
			StatusIfPauseRequested: dftype.StatusPaused,
			Task: TaskWrite{
				Op: TaskSchedule, Kind: kind, Priority: kind.Priority(),
				RunAt: p.NextRunAt, DueOnEvents: p.WaitEventTypes,
			},
			MayBeDue:  true,
			Hook:      hook(p.RecordHooks, reason),
			Requested: requested(p.RecordHooks),
		}, nil
	case db.OutcomePark:
		kind := cmpKind(p.NextKind, db.TaskKindResume)
		return CheckpointPlan{
			Status:                 dftype.StatusPaused,
			StatusIfPauseRequested: dftype.StatusPaused,
			Task:                   TaskWrite{Op: TaskSchedule, Kind: kind, Priority: kind.Priority(), RunAt: p.NextRunAt},
			Requested:              requested(p.RecordHooks),
		}, nil
	case db.OutcomeComplete:
		return CheckpointPlan{
			Status: dftype.StatusComplete, StatusIfPauseRequested: dftype.StatusComplete,
			Task: TaskWrite{Op: TaskDelete},
		}, nil
	case db.OutcomeError:
		return CheckpointPlan{
			Status: dftype.StatusErrored, StatusIfPauseRequested: dftype.StatusErrored,
			Task: TaskWrite{Op: TaskDelete},
		}, nil
	}
	return CheckpointPlan{}, fmt.Errorf("unknown checkpoint outcome %d", p.Outcome)
}

// requested is CheckpointPlan.Requested: Compensate's plan for a waiting
// instance (shared, read only).
func requested(recordHooks bool) *ChangePlan {
	if recordHooks {
		return &requestedHooked
	}
	return &requestedPlain
}

var requestedPlain, requestedHooked = mustCompensateWaiting(false), mustCompensateWaiting(true)

// mustCompensateWaiting is Compensate's plan for a waiting instance.
func mustCompensateWaiting(recordHooks bool) ChangePlan {
	plan, err := Compensate(dftype.StatusWaiting, recordHooks)
	if err != nil {
		panic(err)
	}
	return plan
}

// cmpKind is kind, or fallback when kind is unset.
func cmpKind(kind, fallback db.TaskKind) db.TaskKind {
	if kind == "" {
		return fallback
	}
	return kind
}

// CheckpointFacts are what a backend reads, under the checkpoint's fence,
// to resolve a plan.
type CheckpointFacts struct {
	// Status is the instance's status as the fence found it.
	Status dftype.InstanceStatus
	// PauseRequested is the instance's pause request as the fence found
	// it.
	PauseRequested bool
	// Due is Task.Due for a plan that MayBeDue: the task is due at once.
	Due bool
	// CompensationRequested is set when the run has a compensation request
	// the runner has not taken up (its step db.CompensationMarkerKey has 0
	// attempts). A backend reads it only for a plan with Requested, when
	// PauseRequested is set (a request always comes with a pause request),
	// so an ordinary checkpoint pays nothing for it.
	CompensationRequested bool
}

// Compensates reports whether the facts select the plan's Requested branch.
func (c *CheckpointPlan) Compensates(f CheckpointFacts) bool {
	return c.Requested != nil && f.PauseRequested && f.CompensationRequested
}

// Resolve picks the branches of the plan the facts select: the status
// written ("" when none) and what the checkpoint reports. The result is
// Due (and the caller notifies runners) when the task is due at once and
// no pause was requested: an instance that takes StatusIfPauseRequested
// is not claimable, so nothing is woken for it. When the facts select
// Requested (Compensates), the status is Requested's and the result is Due.
// Postgres' CheckpointSuspend and CheckpointPark apply the same conditions
// in SQL.
func (c *CheckpointPlan) Resolve(f CheckpointFacts) (dftype.InstanceStatus, *db.CheckpointResult) {
	if c.Status == "" {
		return "", &db.CheckpointResult{Status: f.Status, PauseRequested: f.PauseRequested}
	}
	if c.Compensates(f) {
		return c.Requested.Status, &db.CheckpointResult{Status: c.Requested.Status, Due: true}
	}
	status := c.Status
	if f.PauseRequested {
		status = c.StatusIfPauseRequested
	}
	return status, &db.CheckpointResult{Status: status, Due: c.MayBeDue && f.Due && !f.PauseRequested}
}

// RunAt is when the scheduled task is due after the resolved checkpoint:
// now when it is due at once, else Task.RunAt.
func (c *CheckpointPlan) RunAt(now time.Time, due bool) time.Time {
	if c.MayBeDue && due {
		return now
	}
	return c.Task.RunAt
}

// Steps are the step rows a checkpoint writes besides the consuming step: a
// write in p.Steps for the key of p.ConsumeEvent is dropped when an event
// was consumed (the step is complete with the event).
func Steps(p *db.CheckpointParams, consumed bool) []db.StepWrite {
	if !consumed || p.ConsumeEvent == nil {
		return p.Steps
	}
	key := p.ConsumeEvent.StepKey
	if !slices.ContainsFunc(p.Steps, func(w db.StepWrite) bool { return w.Key == key }) {
		return p.Steps
	}
	return slices.DeleteFunc(slices.Clone(p.Steps), func(w db.StepWrite) bool { return w.Key == key })
}

// EventStepResult is the JSON result a waitForEvent step records for the
// event it consumed. It is exactly json.Marshal of {type, payload,
// timestamp} (payload compacted, a missing one null, timestamp in UTC RFC
// 3339 with nanoseconds): the runner encodes the event the same way on the
// first run, so the first run and every replay decode the same bytes. The
// event row itself keeps the payload as sent.
func EventStepResult(ev *db.Event) (json.RawMessage, error) {
	payload := ev.Payload
	if len(payload) == 0 {
		payload = json.RawMessage("null")
	}
	return json.Marshal(struct {
		Type      string          `json:"type"`
		Payload   json.RawMessage `json:"payload"`
		Timestamp time.Time       `json:"timestamp"`
	}{ev.Type, payload, ev.CreatedAt.UTC()})
}
