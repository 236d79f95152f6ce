package workflow

import "time"

// LifecycleEvent is one entry of the lifecycle event log as the API shows
// it (docs/events.md): something that happened to an instance, written in
// the transaction of the transition it records. It is not a workflow event
// (an event sent to an instance); Type is one of the lifecycle types, such
// as "instance.created" or "step.retrying".
type LifecycleEvent struct {
	// ID grows with every event written; it is the cursor of a stream.
	ID           int64  `json:"id"`
	Type         string `json:"type"`
	WorkflowName string `json:"workflowName"`
	InstanceID   string `json:"instanceId"`
	RunNumber    int    `json:"runNumber"`
	// StepKey names the step of a step event.
	StepKey string `json:"stepKey,omitempty"`
	// Attempt is the step attempt a step event records.
	Attempt int `json:"attempt,omitempty"`
	// Detail is the error of a failure, the reason of a wait or the type
	// of a received event.
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}
