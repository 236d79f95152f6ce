package dftype

import (
	"encoding/json"
	"time"
)

// InstanceStatus is the life-cycle status of an instance.
type InstanceStatus string

// Instance statuses; complete, errored and terminated are terminal.
const (
	StatusQueued          InstanceStatus = "queued"
	StatusRunning         InstanceStatus = "running"
	StatusWaiting         InstanceStatus = "waiting"
	StatusWaitingForPause InstanceStatus = "waitingForPause"
	StatusPaused          InstanceStatus = "paused"
	StatusComplete        InstanceStatus = "complete"
	StatusErrored         InstanceStatus = "errored"
	StatusTerminated      InstanceStatus = "terminated"
	StatusUnknown         InstanceStatus = "unknown"
)

// Terminal reports whether the status is final.
func (s InstanceStatus) Terminal() bool {
	return s == StatusComplete || s == StatusErrored || s == StatusTerminated
}

// ErrorInfo is the recorded error of an errored instance or a failed step.
type ErrorInfo struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// InstanceInfo is an instance as the engine reports it, untyped.
type InstanceInfo struct {
	WorkflowName string          `json:"workflowName"`
	ID           string          `json:"id"`
	Status       InstanceStatus  `json:"status"`
	Params       json.RawMessage `json:"params,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	Error        *ErrorInfo      `json:"error,omitempty"`
	RunNumber    int             `json:"runNumber"`
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
	StartedAt    *time.Time      `json:"startedAt,omitempty"`
	CompletedAt  *time.Time      `json:"completedAt,omitempty"`
	// Namespace is the namespace the instance belongs to.
	Namespace string `json:"namespace"`
	// Queue is the task queue the instance runs on.
	Queue string `json:"queue"`
	// Priority is the instance's claim priority (higher first).
	Priority int `json:"priority"`
	// DedupeKey is the key the instance holds while it is active, if any.
	DedupeKey string `json:"dedupeKey,omitempty"`
	// Unserved is set on an instance that is not terminal and whose queue
	// no online worker serves (the workers registry, read at most every
	// couple of seconds): nothing runs it until a runner that serves the
	// queue starts. Hosts that run work only on tick (no registered
	// worker) see it on every live instance.
	Unserved bool `json:"unserved,omitempty"`
	// Deduplicated is set on the answer of a create that created nothing
	// because this active instance held the request's dedupe key.
	Deduplicated bool `json:"deduplicated,omitempty"`
	// Parent is the Invoke step that started the instance, if one did.
	Parent *ParentRef `json:"parent,omitempty"`
	// Children are the instances the instance's Invoke steps started
	// (every run), oldest first: filled by a Get of one instance, not by
	// lists.
	Children []*ChildRef `json:"children,omitempty"`
	// DeadlineAt is when the instance errors with workflow.ErrorNameDeadlineExceeded
	// if it has not ended; nil means no deadline.
	DeadlineAt *time.Time `json:"deadlineAt,omitempty"`
	// RunAttempt counts the runs of the current run number that a workflow
	// retry (workflow.WithWorkflowRetry) started: 1 until the first retry.
	RunAttempt int `json:"runAttempt,omitempty"`
	// WaitingFor, on a queued instance of a limited workflow, says which
	// concurrency or rate limit holds it back (docs/limits.md).
	WaitingFor *WaitingFor `json:"waitingFor,omitempty"`
	// Pending are the steps a waiting or paused instance waits on: an
	// event, a sleep, a step's next attempt, a child. Filled by a Get of
	// one instance, not by lists.
	Pending []*PendingStep `json:"pending,omitempty"`
}

// PendingKind is what a pending step waits for.
type PendingKind string

// The kinds of pending steps.
const (
	// PendingEvent: a WaitForEvent waits for an event of EventType, until
	// Until (its timeout) when it has one.
	PendingEvent PendingKind = "event"
	// PendingSleep: a Sleep or SleepUntil wakes at Until.
	PendingSleep PendingKind = "sleep"
	// PendingRetry: a Do step failed and its attempt Attempt runs at Until.
	PendingRetry PendingKind = "retry"
	// PendingChild: an Invoke step waits for its child Child to end, until
	// Until (its timeout) when it has one.
	PendingChild PendingKind = "child"
)

// PendingStep is a step of the current run that the instance waits on
// (InstanceInfo.Pending).
type PendingStep struct {
	// Step is the step's name.
	Step string      `json:"step"`
	Kind PendingKind `json:"kind"`
	// EventType is the type a PendingEvent step waits for.
	EventType string `json:"eventType,omitempty"`
	// Until is when the wait ends: the event's or the child's timeout, the
	// sleep's wake time, the next attempt's time; nil when it has no end.
	Until *time.Time `json:"until,omitempty"`
	// Attempt is the next attempt of a PendingRetry step, and MaxAttempts
	// its limit (workflow.UnlimitedAttempts for none).
	Attempt     int `json:"attempt,omitempty"`
	MaxAttempts int `json:"maxAttempts,omitempty"`
	// Error is the error of a PendingRetry step's last attempt.
	Error *ErrorInfo `json:"error,omitempty"`
	// Child is the instance a PendingChild step waits for.
	Child *ChildRef `json:"child,omitempty"`
}

// CreateRequest is one untyped instance to create.
type CreateRequest struct {
	// ID is the instance id; empty generates one.
	ID     string
	Params json.RawMessage
	// Metadata is recorded with the instance besides its params: where it
	// came from (a trigger's provenance) or a flow's pinned version. JSON,
	// at most the engine's payload limit (workflow.MaxPayloadBytes by default);
	// empty records none.
	Metadata json.RawMessage
	// Namespace is the namespace the instance is created in: only callers
	// of that namespace see and touch it. Empty means the client's
	// namespace (client.Client.Namespace), or workflow.DefaultNamespace.
	Namespace string
	// Queue is the task queue the instance runs on, overriding the
	// workflow's (workflow.Definition.Queue, workflow.WithQueue). Empty means the workflow's.
	Queue string
	// Priority orders claims among due tasks: higher first, workflow.MinPriority to
	// workflow.MaxPriority. Defaults to 0.
	Priority int
	// DedupeKey, when set, makes the create return the active (not
	// terminal) instance of the workflow and namespace that holds the key,
	// with InstanceInfo.Deduplicated set, instead of creating another. A
	// terminal instance frees its key.
	DedupeKey string
	// Deadline, when set, overrides the workflow's deadline (workflow.WithDeadline)
	// for this instance; it must be in the future and at most workflow.MaxSleep
	// away.
	Deadline time.Time
	// Parent, set by the engine for the child of an Invoke step, links the
	// child to the invoking step: a create whose id exists already returns
	// that instance when it is the same step's child, and fails with
	// workflow.ErrInstanceAlreadyExists otherwise.
	Parent *ParentRef
}

// WaitingFor says which limit holds a queued instance back (see
// InstanceInfo.WaitingFor).
type WaitingFor struct {
	// Kind is "concurrency" (no free slot: the instance waits until one
	// frees) or "rate" (the rate limit lets it start at Until).
	Kind string `json:"kind"`
	// Scope is the limited scope: "queue", "workflow" or "key".
	Scope string `json:"scope"`
	// Name is the queue's or workflow's name, or the concurrency key.
	Name string `json:"name"`
	// Max is the scope's max running (concurrency) or starts per period (rate).
	Max int `json:"max"`
	// Period is a rate limit's period.
	Period Duration `json:"period,omitempty"`
	// Until is when a rate limit lets the instance start.
	Until *time.Time `json:"until,omitempty"`
}
