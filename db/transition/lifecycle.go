package transition

import (
	"strings"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// The lifecycle events a transition writes to the log are part of its
// plan: each rule's events are computed here, once, and each backend
// writes them in the transaction of the transition (docs/events.md).

// CheckpointEvents returns the lifecycle events of checkpoint p, whose step
// writes (after transition.Steps) are steps and whose consumed event, if
// any, is consumed: for each step write, step.started when it records an
// attempt's start (at that time) and then step.completed, step.failed or
// step.retrying as its status says; step.completed for the step that
// consumed an event; and one instance event for the outcome (waiting,
// paused, completed or errored; none for a continue). At is p.Now (zero:
// the database's clock).
func CheckpointEvents(p *db.CheckpointParams, steps []db.StepWrite, consumed bool) []db.LifecycleEvent {
	var out []db.LifecycleEvent
	ev := func(t db.LifecycleEventType, key string, attempt int, detail string, at time.Time) {
		out = append(out, db.LifecycleEvent{
			Type: t, WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, RunNumber: p.RunNumber,
			StepKey: key, Attempt: attempt, Detail: detail, At: at,
		})
	}
	if consumed && p.ConsumeEvent != nil {
		ev(db.LifecycleStepCompleted, p.ConsumeEvent.StepKey, 0, "event:"+p.ConsumeEvent.Type, p.Now)
	}
	for i := range steps {
		w := &steps[i]
		if w.StartedAt != nil {
			ev(db.LifecycleStepStarted, w.Key, w.Attempts, "", *w.StartedAt)
		}
		switch w.Status {
		case db.StepStatusComplete:
			ev(db.LifecycleStepCompleted, w.Key, w.Attempts, "", p.Now)
		case db.StepStatusErrored:
			ev(db.LifecycleStepFailed, w.Key, w.Attempts, errorDetail(w.ErrorName, w.ErrorMessage), p.Now)
		case db.StepStatusRetrying:
			ev(db.LifecycleStepRetrying, w.Key, w.Attempts, errorDetail(w.ErrorName, w.ErrorMessage), p.Now)
		}
	}
	switch p.Outcome {
	case db.OutcomeSuspend:
		ev(db.LifecycleWaiting, "", 0, waitDetail(p), p.Now)
	case db.OutcomePark:
		ev(db.LifecyclePaused, "", 0, "parked", p.Now)
	case db.OutcomeComplete:
		ev(db.LifecycleCompleted, "", 0, "", p.Now)
	case db.OutcomeError:
		ev(db.LifecycleErrored, "", 0, errorDetail(p.ErrorName, p.ErrorMessage), p.Now)
	}
	return out
}

// waitDetail says what a suspended run waits for.
func waitDetail(p *db.CheckpointParams) string {
	switch {
	case p.NextKind == db.TaskKindRetry:
		return "retry"
	case len(p.WaitEventTypes) > 0:
		return "event:" + strings.Join(p.WaitEventTypes, ",")
	}
	return "sleep"
}

// errorDetail is an error's name and message as one detail.
func errorDetail(name, message string) string {
	switch {
	case name == "":
		return message
	case message == "":
		return name
	}
	return name + ": " + message
}

// CreateEvents returns the lifecycle events of creating instance id of
// workflowName by plan at now (zero: the database's clock):
// instance.created, then instance.started when the create started it
// eagerly (its task leased), or instance.waiting when a limit holds it
// back (waiting, the admission's db.WaitingFor; nil when none does: see
// LimitWaitEvent).
func CreateEvents(plan *CreatePlan, workflowName, id string, waiting *db.WaitingFor, now time.Time) []db.LifecycleEvent {
	created := db.LifecycleEvent{Type: db.LifecycleCreated, WorkflowName: workflowName, InstanceID: id, RunNumber: 1, At: now}
	switch {
	case plan.Leased:
		started := created
		started.Type = db.LifecycleStarted
		return []db.LifecycleEvent{created, started}
	case waiting != nil:
		return []db.LifecycleEvent{created, LimitWaitEvent(workflowName, id, 1, waiting, now)}
	}
	return []db.LifecycleEvent{created}
}

// StartedEvent returns the instance.started of run of instance id of
// workflowName, started at at: a claim of a run that never started logs it
// in its transaction, and so does a release that starts a waiting
// instance's run with its lease (an eager start logs it with CreateEvents).
func StartedEvent(workflowName, id string, run int, at time.Time) db.LifecycleEvent {
	return db.LifecycleEvent{Type: db.LifecycleStarted, WorkflowName: workflowName, InstanceID: id, RunNumber: run, At: at}
}

// LimitWaitEvent returns the instance.waiting of run of an instance that
// starts waiting for a limit (w, as db.Instance.WaitingFor says it) in the
// transaction that admits it: at a create, or a restart of an ended
// instance. Detail is "limit:<scope>" when a concurrency limit has no free
// slot for it, "rate:<scope>" when a rate limit put its start at a later
// window ("queue:<name>", "workflow:<name>" or "key:<workflow>:<key>").
// An instance that already waits and goes on waiting (a release that
// admits it into a later rate window, a resume, a restart of a waiting
// instance) logs none.
func LimitWaitEvent(workflowName, id string, run int, w *db.WaitingFor, now time.Time) db.LifecycleEvent {
	detail := "limit:" + w.Scope
	if w.Kind == db.LimitKindRate {
		detail = "rate:" + w.Scope
	}
	return db.LifecycleEvent{
		Type: db.LifecycleWaiting, WorkflowName: workflowName, InstanceID: id, RunNumber: run, Detail: detail, At: now,
	}
}

// ChangeEvent returns the lifecycle event of a management change of plan
// (plan.Event) to an instance whose run after the change is run; ok is
// false when the plan logs none. A pause of a running instance, which only
// asks it to pause, has Detail "requested"; the park that follows logs
// instance.paused again with Detail "parked" (CheckpointEvents).
func ChangeEvent(plan *ChangePlan, workflowName, id string, run int, now time.Time) (db.LifecycleEvent, bool) {
	if plan.Event == "" {
		return db.LifecycleEvent{}, false
	}
	e := db.LifecycleEvent{Type: plan.Event, WorkflowName: workflowName, InstanceID: id, RunNumber: run, At: now}
	if plan.Status == dftype.StatusWaitingForPause {
		e.Detail = "requested"
	}
	return e, true
}

// SendEvent returns the lifecycle event of an event of eventType sent to
// an instance's run: event.received.
func SendEvent(workflowName, id string, run int, eventType string, now time.Time) db.LifecycleEvent {
	return db.LifecycleEvent{
		Type: db.LifecycleEventReceived, WorkflowName: workflowName, InstanceID: id, RunNumber: run,
		Detail: eventType, At: now,
	}
}
