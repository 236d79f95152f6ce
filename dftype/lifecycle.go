package dftype

import "time"

// LifecycleEvent is one entry of the lifecycle event log as the API shows
// it (docs/events.md): something that happened to an instance, or to a
// worker, written in the transaction of the transition it records. It is
// not a workflow event (an event sent to an instance); Type is one of the
// lifecycle types, such as "instance.created", "step.retrying" or
// "worker.online".
type LifecycleEvent struct {
	// ID grows with every event written; it is the cursor of a stream.
	ID   int64  `json:"id"`
	Type string `json:"type"`
	// WorkflowName is the instance's workflow; empty for a worker event
	// (worker.*).
	WorkflowName string `json:"workflowName"`
	// InstanceID is the instance's id; empty for a worker event.
	InstanceID string `json:"instanceId"`
	// RunNumber is the instance's run; 0 for a worker event.
	RunNumber int `json:"runNumber"`
	// StepKey names the step of a step event.
	StepKey string `json:"stepKey,omitempty"`
	// Attempt is the step attempt a step event records.
	Attempt int `json:"attempt,omitempty"`
	// Detail is the error of a failure, the reason of a wait or the type
	// of a received event.
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
	// WorkerID names the worker of a worker event (worker.online,
	// worker.draining, worker.offline).
	WorkerID string `json:"workerId,omitempty"`
}
