package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Sentinel errors returned by every Store implementation. Backends map their
// driver errors onto these in one place (interpretError) so that callers never
// see driver types.
var (
	// ErrNotFound means the instance (or other row) named by the call does not exist.
	ErrNotFound = errors.New("db: not found")
	// ErrAlreadyExists means an instance with the same workflow name and id exists.
	ErrAlreadyExists = errors.New("db: already exists")
	// ErrTerminal means the instance is complete, errored or terminated and the
	// requested change is not allowed on a terminal instance.
	ErrTerminal = errors.New("db: instance is terminal")
	// ErrLeaseLost means a fenced write named a task id and version that no longer
	// match: the lease expired and was reclaimed, or the instance was terminated or
	// restarted. The write changed nothing and the caller must drop its work.
	ErrLeaseLost = errors.New("db: task lease lost")
	// ErrNotBatchable means a checkpoint given to CheckpointBatch is one the
	// batch cannot take (see CheckpointParams.Batchable); nothing was
	// written.
	ErrNotBatchable = errors.New("db: checkpoint batch items must continue, complete or error a run, consume no event and reset no lease losses")
	// ErrInvalidData means the database refused the values of a write: a
	// constraint or check failed, or a value was not valid JSON, not valid
	// text in the database's encoding, or past a size or nesting limit of
	// the database (SQLite's json_valid refuses JSON nested deeper than
	// 1000 levels; Postgres refuses invalid UTF-8). Nothing was written, and
	// the same write fails the same way every time: retrying it cannot
	// help. Backends wrap the driver's error with it, so its message says
	// what was refused.
	//
	// Every error of a Store that is none of these sentinels may be
	// transient (a lost connection, a timeout, a serialization failure, a
	// busy database): the runner retries those with backoff.
	ErrInvalidData = errors.New("db: data refused")
	// ErrUnavailable means the database could not serve the call: it cannot
	// be reached (connection refused or reset), is shutting down, starting
	// up or recovering (Postgres 57P01, 57P02, 57P03, class 08, 53300), or
	// is locked by another writer past the busy timeout (SQLite
	// SQLITE_BUSY, SQLITE_LOCKED). The same call may succeed once the
	// database is back. Backends wrap the driver's error with it in their
	// interpretError, so errors.Is finds it and the message keeps the cause.
	//
	// A write that fails with it may still have committed, when the
	// connection was lost after the commit was sent: repeat only writes that
	// are fenced or idempotent (a task's or an outbox entry's version, a
	// schedule's version, a delete by age), never one that consumes what it
	// reads.
	ErrUnavailable = errors.New("db: database unavailable")
)

// StepType says what kind of durable operation a step row records.
type StepType string

// Step types.
const (
	StepTypeDo           StepType = "do"
	StepTypeSleep        StepType = "sleep"
	StepTypeWaitForEvent StepType = "waitForEvent"
	// StepTypeInvoke is an Invoke step: it waits for its child's end as a
	// waitForEvent step waits for an event, on the reserved type
	// workflow.InvokeEventType(run, key).
	StepTypeInvoke StepType = "invoke"
)

// StepStatus is the status of one step row.
type StepStatus string

// Step statuses. A step is written only when something durable happened: it
// completed, it failed for good, it waits for a retry, or it waits for a timer
// or an event.
const (
	// StepStatusComplete means the step has a result and never runs again in this run.
	StepStatusComplete StepStatus = "complete"
	// StepStatusErrored means the step failed for good (non-retryable error,
	// exhausted retries, or a waitForEvent timeout); replay returns its error.
	StepStatusErrored StepStatus = "errored"
	// StepStatusRetrying means an attempt failed and the next one is due at NextRetryAt.
	StepStatusRetrying StepStatus = "retrying"
	// StepStatusWaiting means a sleep or waitForEvent waits until WakeAt.
	StepStatusWaiting StepStatus = "waiting"
)

// TaskKind says why a task exists. Resuming kinds are claimed before run.
type TaskKind string

// Task kinds.
const (
	TaskKindRun    TaskKind = "run"
	TaskKindResume TaskKind = "resume"
	TaskKindWake   TaskKind = "wake"
	TaskKindRetry  TaskKind = "retry"
)

// Priority is the claim priority of the kind: lower is claimed first, so
// resuming work goes before starting work.
func (k TaskKind) Priority() int {
	if k == TaskKindRun {
		return 1
	}
	return 0
}

// TaskStatus is the status of a task row.
type TaskStatus string

// Task statuses. Completed tasks are deleted, so there is no "done" status.
const (
	TaskStatusPending    TaskStatus = "pending"
	TaskStatusProcessing TaskStatus = "processing"
)

// Instance is one workflow instance.
type Instance struct {
	WorkflowName string
	ID           string
	Status       dftype.InstanceStatus
	Params       json.RawMessage
	// Metadata is what the engine records about the instance besides its
	// params (provenance, a flow's pinned version); nil when there is none.
	Metadata       json.RawMessage
	Output         json.RawMessage
	ErrorName      string
	ErrorMessage   string
	PauseRequested bool
	RunNumber      int
	// Namespace scopes who may see and touch the instance (see
	// InstanceRef.Namespace); ids stay unique per workflow across
	// namespaces.
	Namespace string
	// Queue is the task queue the instance runs on: only runners that serve
	// it claim its tasks.
	Queue string
	// Priority orders claims: a higher priority is claimed first.
	Priority int
	// DedupeKey, when not empty, is held by the instance while it is not
	// terminal: a create with the same key returns it instead.
	DedupeKey string
	CreatedAt time.Time
	// UpdatedAt moves when the instance changes: its status transitions
	// (create, start, suspend, wake, pause, resume, terminate, restart,
	// complete, fail) and a buffered event. A step checkpoint that leaves the
	// status as it is does not move it.
	UpdatedAt      time.Time
	StartedAt      *time.Time
	CompletedAt    *time.Time
	RetentionUntil *time.Time
	// DeadlineAt is when the instance errors with
	// workflow.ErrorNameDeadlineExceeded if it has not ended; nil means none.
	DeadlineAt *time.Time
	// RunAttempt counts the runs of the current run number that workflow
	// retries started: 1 until the first retry.
	RunAttempt int
	// Limited is true when the instance has a limited scope (a concurrency
	// or rate limit, see LimitSpec): it holds, or waits for, a slot until it
	// is terminal.
	Limited bool
	// WaitingFor, set by InstanceGet and InstanceList on a queued limited
	// instance, says which limit holds it back; nil otherwise.
	WaitingFor *WaitingFor
	// Parent is the parent step that invoked the instance (a child of an
	// Invoke step), from the columns its create recorded; nil for an
	// instance that no step invoked. Every read that returns an instance
	// carries it (the claims' fresh runs too): the runner delivers a
	// child's end to it, and to nothing else.
	Parent *ParentLink
	// TraceContext is the trace context of the caller that created the
	// instance (InstanceCreateParams.TraceContext), empty when it had none.
	// Every read that returns an instance carries it (the claims' fresh
	// runs too), so that each run pass links to the creator's trace.
	TraceContext string
	// PayloadsOmitted is set by InstanceList on an instance whose payloads
	// (Params, Metadata, Output and ErrorMessage) it did not read, past
	// the page's InstanceListParams.PayloadBudget or for
	// InstanceListParams.OmitPayloads: they are empty, whatever is stored.
	PayloadsOmitted bool
}

// CreateResult is what a create reports for one instance it created.
type CreateResult struct {
	Instance *Instance
	// LeasedTask is the instance's first task as a create with a
	// CreateLease leased it (eager start); nil when it was queued.
	LeasedTask *Task
	// Deduplicated says that Instance is an active instance that already
	// held the create's dedupe key: nothing was created.
	Deduplicated bool
}

// Step is one checkpointed step of an instance run.
type Step struct {
	// ID orders steps by creation; history pages continue after an ID.
	ID            int64
	WorkflowName  string
	InstanceID    string
	RunNumber     int
	Key           string
	Type          StepType
	Status        StepStatus
	Attempts      int
	MaxAttempts   int
	Timeout       time.Duration
	NextRetryAt   *time.Time
	WakeAt        *time.Time
	WaitEventType string
	Result        json.RawMessage
	ErrorName     string
	ErrorMessage  string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	CompletedAt   *time.Time
	// StartedAt is when the step's latest attempt started (Do steps).
	StartedAt *time.Time
	// PayloadsOmitted is set by StepList on a step whose Result and
	// ErrorMessage it did not read, past StepListParams.PayloadBudget:
	// they are empty, whatever is stored.
	PayloadsOmitted bool
}

// Event is an event sent to an instance run and buffered until a matching
// waitForEvent consumes it.
type Event struct {
	ID                int64
	WorkflowName      string
	InstanceID        string
	RunNumber         int
	Type              string
	Payload           json.RawMessage
	CreatedAt         time.Time
	DeliveredAt       *time.Time
	ConsumedByStepKey string
	// PayloadOmitted is set by EventList on an event whose Payload it did
	// not read, past EventListParams.PayloadBudget: it is empty, whatever
	// is stored.
	PayloadOmitted bool
}

// Task is a row of the durable internal queue: at most one per instance.
type Task struct {
	ID           int64
	WorkflowName string
	InstanceID   string
	RunNumber    int
	Kind         TaskKind
	RunAt        time.Time
	Status       TaskStatus
	LockOwner    string
	LockedUntil  *time.Time
	Version      int64
	Attempts     int
	LastError    string
	// RunningSteps are the step attempts the task's holder runs now, as its
	// last heartbeat at the task's current version reported them (empty
	// while pending, before the holder's first heartbeat, or after its
	// lease expired). TaskGet fills it; claims do not.
	RunningSteps []RunningStep
	// LeaseLosses counts the claims that took the task over from a holder
	// whose lease had expired, since the task's last checkpoint that made
	// progress (one that set ResetLeaseLosses, a suspend or a park) or the
	// start of its run. A step whose process dies mid-attempt makes it grow
	// by one per reclaim; from SuspectLeaseLosses the task runs in its
	// runner's quarantine, and the runner stops the loop at its
	// MaxLeaseLosses.
	LeaseLosses int
	// Queue is the task queue of the task's instance.
	Queue string
	// InstancePriority is the priority of the task's instance.
	InstancePriority int
}

// Claim is one task TaskClaim leased.
type Claim struct {
	Task *Task
	// FreshRun, set only where the store can tell, is the instance of a
	// claimed run that had never started (it was queued with no started_at,
	// so no step of the run exists), as the claim left it (running): the
	// runner executes it without loading the run. Nil means the run must be
	// loaded.
	FreshRun *Instance
}

// TaskRef names a claimed task and the version its holder leased it at. Every
// fenced write carries one.
type TaskRef struct {
	ID      int64
	Version int64
}

// InstanceCreateParams are the arguments of Store.InstanceCreate.
type InstanceCreateParams struct {
	WorkflowName string
	ID           string
	Params       json.RawMessage
	// Metadata is stored with the instance as given (JSON or empty).
	Metadata json.RawMessage
	// RecordHooks records an OnWorkflowEnqueued outbox entry (reason create)
	// in the same transaction.
	RecordHooks bool
	// Now is the creation time and the run_at of the first task; nil means the
	// database clock.
	Now *time.Time
	// Lease, when set, creates the instance already started and its first
	// task already leased to Lease.Owner (eager start), in the same
	// transaction: see CreateLease. The leased task is returned in
	// CreateResult.LeasedTask. A create with a DedupeKey ignores it.
	Lease *CreateLease
	// Namespace is the instance's namespace; empty means
	// workflow.DefaultNamespace.
	Namespace string
	// Queue is the instance's task queue; empty means workflow.DefaultQueue.
	Queue string
	// Priority is the instance's claim priority (workflow.MinPriority to
	// workflow.MaxPriority; the database refuses others with
	// ErrInvalidData).
	Priority int
	// DedupeKey, when not empty, makes the create return the active
	// instance of the namespace and workflow that holds the key, with
	// CreateResult.Deduplicated set, instead of creating one.
	DedupeKey string
	// DeadlineAt, when set, is the instance's deadline (Instance.DeadlineAt),
	// written in the same transaction by a statement of its own: a create
	// without one runs no statement more.
	DeadlineAt *time.Time
	// Limits are the limited scopes of the instance, in any order. When
	// there are any, the instance is admitted under them in the same
	// transaction (a Lease is then ignored): with a free slot in every
	// scope its task is due when the rate limits allow; otherwise it stays
	// queued without a task until a slot frees (see docs/limits.md).
	// Empty costs nothing.
	Limits []LimitSpec
	// Parent, when set, records the instance as a child of the parent's
	// invoking step, in the same transaction (a statement of its own: a
	// create without one runs no statement more). A step has at most one
	// child per run: when that step already has one, the create is
	// ErrAlreadyExists whatever its ID, and changes nothing
	// (ChildStore.InstanceChildOf finds the child).
	Parent *ParentLink
	// TraceContext, when not empty, is the caller's trace context as the
	// engine encodes it (opaque to the store: the W3C trace context fields
	// as a JSON object), stored with the instance in the same transaction
	// by a statement of its own: a create without one runs no statement
	// more. A deduplicated create does not store it.
	TraceContext string
}

// CreateLease asks a create to start instances at once with their first task
// leased to a runner in the same process (eager start), so the runner runs
// them without claiming them. A leased instance is written as a claim would
// leave it: status running with started_at set, and its task processing,
// locked by Owner until LockedUntil, at version 1 with attempts 1. No wake-up
// is sent for it (there is nothing to claim). When the holder dies, the
// lease expires and any runner claims the task as it claims every expired
// lease.
type CreateLease struct {
	// Owner is the lock owner written on the leased tasks (the runner's ID).
	Owner string
	// LockedUntil is the lease expiry written on the leased tasks.
	LockedUntil time.Time
	// Max bounds how many instances of a batch create are leased: the first
	// Max items of InstanceCreateManyParams.Instances, of which those that
	// are created are leased (an item skipped because its id exists uses up
	// its share). The rest are queued as without a lease. InstanceCreate
	// ignores it.
	Max int
	// Queues are the task queues Owner serves (empty: every queue). An event
	// send (EventSendParams.Lease) and a release (CheckpointParams.
	// ReleaseLease) lease no task of another queue: they make it due for a
	// claim instead. A create does not look at them: the caller (the
	// client) creates an instance of another queue without the lease.
	Queues []string
}

// InstanceCreateManyParams are the arguments of Store.InstanceCreateMany.
type InstanceCreateManyParams struct {
	WorkflowName string
	Instances    []InstanceCreateItem
	Now          *time.Time
	// RecordHooks records an outbox entry (reason create) per created instance.
	RecordHooks bool
	// Lease, when set, starts up to Lease.Max of the created instances at
	// once with their tasks leased (see CreateLease). The caller sets none
	// for a batch with a limited item or a dedupe key (the client does not):
	// a backend may ignore it for such a batch.
	Lease *CreateLease
	// Namespace is the namespace of every instance of the batch, as in
	// InstanceCreateParams.
	Namespace string
}

// InstanceCreateItem is one instance of a batch create.
type InstanceCreateItem struct {
	ID       string
	Params   json.RawMessage
	Metadata json.RawMessage
	// DedupeKey, when not empty, skips the item when an active instance of
	// the namespace and workflow (or an earlier item of the batch) holds
	// the key; that instance is returned in its place, with Deduplicated
	// set.
	DedupeKey string
	// Queue and Priority place the instance as in InstanceCreateParams.
	Queue    string
	Priority int
	// DeadlineAt is the instance's deadline, as InstanceCreateParams.DeadlineAt.
	DeadlineAt *time.Time
	// Limits are the item's limited scopes (see InstanceCreateParams.Limits).
	Limits []LimitSpec
	// TraceContext is the item's creator's trace context, as
	// InstanceCreateParams.TraceContext.
	TraceContext string
}

// InstanceRef names one instance.
type InstanceRef struct {
	WorkflowName string
	ID           string
	// Namespace, when not empty, finds the instance only in that namespace:
	// an instance of another is ErrNotFound. Empty finds it in any.
	// (Used by InstanceGet; TaskGet and RunLoad ignore it.)
	Namespace string
}

// InstanceChangeParams are the arguments of the management transitions
// (pause, resume, terminate, restart).
type InstanceChangeParams struct {
	WorkflowName string
	ID           string
	Now          *time.Time
	// RecordHooks records an outbox entry when the change enqueues work:
	// resume (reason resume) and restart (reason create).
	RecordHooks bool
	// Namespace, when not empty, changes the instance only in that
	// namespace: an instance of another is ErrNotFound.
	Namespace string
}

// InstanceListParams are the arguments of Store.InstanceList. Results are
// ordered newest update first; Cursor continues after the last row of the
// previous page.
type InstanceListParams struct {
	// WorkflowName filters by workflow; empty lists every workflow.
	WorkflowName string
	// Statuses filters by status; empty means every status.
	Statuses []dftype.InstanceStatus
	// Namespace filters by namespace; empty lists every namespace.
	Namespace string
	// Queue filters by task queue; empty lists every queue.
	Queue  string
	Limit  int
	Cursor *InstanceCursor
	// OmitPayloads leaves the payloads (Params, Metadata, Output and
	// ErrorMessage) of every instance of the page unread: each comes with
	// PayloadsOmitted set.
	OmitPayloads bool
	// PayloadBudget, when positive, bounds the payload bytes the page
	// reads: an instance's payloads are read only while the payloads of
	// the instances before it in the page add up to less than the budget
	// (their lengths in bytes); the instances after it come without them,
	// PayloadsOmitted set: the store never receives their payloads (an
	// SQLite store reads only their sizes; a Postgres server reads them to
	// measure them, and sends none). The first instance
	// always carries its own, so a page holds at most the budget plus one
	// instance's payloads. Zero reads every payload.
	PayloadBudget int
}

// InstanceCursor is the keyset position after which a page starts.
type InstanceCursor struct {
	UpdatedAt    time.Time
	WorkflowName string
	ID           string
}

// EventSendParams are the arguments of Store.EventSend.
type EventSendParams struct {
	WorkflowName string
	InstanceID   string
	Type         string
	Payload      json.RawMessage
	Now          *time.Time
	// RecordHooks records an outbox entry (reason event) when the event woke
	// the instance.
	RecordHooks bool
	// Lease, when set, leases the task of a run the event wakes to
	// Lease.Owner in the same transaction, as a claim would (its version and
	// attempts go up by one, the instance becomes running), instead of
	// making it due for a claim: the eager resume of an event sent in the
	// process of a runner with a free slot. Lease.Max is ignored. No
	// notification is sent for a leased task. Only a task on one of
	// Lease.Queues is leased; another is made due for a claim.
	Lease *CreateLease
	// Namespace, when not empty, sends only to an instance of that
	// namespace: an instance of another is ErrNotFound.
	Namespace string
}

// EventSendResult says what sending an event did.
type EventSendResult struct {
	Event *Event
	// Woken is true when the instance was waiting for this type and its task
	// was made due now (or leased, with a Lease).
	Woken bool
	// LeasedTask is the woken run's task, leased to Lease.Owner, when the
	// send had a Lease and woke the run; nil otherwise.
	LeasedTask *Task
	// DeliveredTo is the key of the step the send delivered the event to,
	// or "" when it delivered it to none. Every backend follows one rule
	// (transition.DeliverAtSend): a send that wakes a run, on the caller's
	// clock, delivers the sent event when it is the run's only undelivered
	// event of its type, exactly as the run would consume it: the run's
	// first step waiting for the type completes with the event, which is
	// marked consumed by it in the send's transaction, so the resumed run
	// finds the step complete. Otherwise the resumed run consumes the
	// oldest undelivered event of the type itself.
	DeliveredTo string
}

// SuspectLeaseLosses is the LeaseLosses from which a task is a suspect,
// one that runs in a runner's quarantine (alone among suspects), and that
// TaskClaimParams.ExcludeSuspects leaves alone. It is 2, not 1: one lost
// lease is what every crash of a process (a deploy's SIGKILL, an OOM) does
// to all the tasks it held, and they recover at full speed, run side by
// side again. A second loss in a row means the task was among those that
// died again, beside whatever kills its process, so from then on it runs
// alone among suspects. An innocent that died beside a crasher thus
// reaches at most 2 losses before it runs in quarantine and makes
// progress; the quarantine saves it only when the runner's MaxLeaseLosses
// is above 2.
const SuspectLeaseLosses = 2

// TaskClaimParams are the arguments of Store.TaskClaim.
type TaskClaimParams struct {
	// Owner identifies the claiming runner in lock_owner.
	Owner string
	// WorkflowNames limits claims to workflows the runner can execute.
	WorkflowNames []string
	// Queues limits claims to tasks on these task queues; empty claims
	// on every queue.
	Queues []string
	// Max is the most tasks to claim.
	Max int
	// Now is compared with run_at and locked_until.
	Now time.Time
	// LockedUntil is the lease expiry written on claimed tasks.
	LockedUntil time.Time
	// ExcludeSuspects claims no task that is, or whose claim makes it, a
	// suspect (LeaseLosses at least SuspectLeaseLosses): neither a pending
	// task with that many losses nor an expired lease whose claim would
	// count the loss that reaches it. A runner that runs a suspect already
	// sets it (see runner's quarantine).
	ExcludeSuspects bool
}

// TaskNextRunAtParams are the arguments of Store.TaskNextRunAt.
type TaskNextRunAtParams struct {
	// WorkflowNames are the workflows the runner can execute.
	WorkflowNames []string
	// Queues are the task queues the runner serves; empty means every
	// queue.
	Queues []string
}

// TaskHeartbeatParams are the arguments of Store.TaskHeartbeat.
type TaskHeartbeatParams struct {
	Task        TaskRef
	LockedUntil time.Time
	// RunningSteps are the step attempts the holder runs now, written on the
	// task with the lease (same statement) for history to show.
	RunningSteps []RunningStep
}

// TaskReleaseParams are the arguments of Store.TaskRelease.
type TaskReleaseParams struct {
	Task      TaskRef
	RunAt     time.Time
	LastError string
	// CountLeaseLoss adds one to the task's LeaseLosses: the holder gives
	// the task back without a checkpoint because the store kept failing,
	// which counts against the crash-loop limit as a lease that expired
	// would.
	CountLeaseLoss bool
}

// RunState is everything a runner needs to replay the current run.
type RunState struct {
	Instance *Instance
	// Steps of the current run, keyed by step key.
	Steps map[string]*Step
}

// StepWrite is a step row to insert or overwrite (keyed by workflow name,
// instance id, run number and step key) in a checkpoint.
type StepWrite struct {
	Key           string
	Type          StepType
	Status        StepStatus
	Attempts      int
	MaxAttempts   int
	Timeout       time.Duration
	NextRetryAt   *time.Time
	WakeAt        *time.Time
	WaitEventType string
	Result        json.RawMessage
	ErrorName     string
	ErrorMessage  string
	// StartedAt is when the attempt the write records started (Do steps).
	StartedAt *time.Time
}

// CheckpointOutcome says what a checkpoint does with the instance and its task.
type CheckpointOutcome int

// Checkpoint outcomes.
const (
	// OutcomeContinue keeps the instance running: it writes the step rows
	// only. It neither renews the lease (the runner's heartbeat does) nor
	// moves the instance's UpdatedAt (status transitions do).
	OutcomeContinue CheckpointOutcome = iota
	// OutcomeSuspend sets the instance waiting (or paused, when a pause was
	// requested) and releases the task until NextRunAt; a buffered event of one
	// of WaitEventTypes makes it due at once instead. When the pause request
	// carries a compensation request the runner has not taken up (the run's
	// CompensationMarkerKey step with 0 attempts), the instance is queued
	// instead, its pause request kept and its task due now as a resume with
	// a resume hook entry (RecordHooks) and a notification: the result is
	// queued and Due.
	OutcomeSuspend
	// OutcomePark sets the instance paused and releases the task; a pause
	// request that carries an untaken compensation request queues it as
	// OutcomeSuspend says.
	OutcomePark
	// OutcomeComplete completes the instance with Output and deletes the task.
	OutcomeComplete
	// OutcomeError errors the instance with ErrorName and ErrorMessage and
	// deletes the task.
	OutcomeError
)

// CheckpointParams are the arguments of Store.Checkpoint: every state change a
// runner makes, committed in one transaction fenced by Task.
type CheckpointParams struct {
	Task         TaskRef
	WorkflowName string
	InstanceID   string
	RunNumber    int
	Now          time.Time
	Steps        []StepWrite
	// ConsumeEvent, when set, marks the oldest undelivered event of the type as
	// consumed by the step key and writes that step complete with the event as
	// its result (see CheckpointResult.Event).
	ConsumeEvent *ConsumeEvent
	Outcome      CheckpointOutcome
	// NextRunAt and NextKind describe the task after OutcomeSuspend or OutcomePark.
	NextRunAt time.Time
	NextKind  TaskKind
	// WaitEventTypes are the event types the instance waits for after OutcomeSuspend.
	WaitEventTypes []string
	Output         json.RawMessage
	ErrorName      string
	ErrorMessage   string
	// RecordHooks records an outbox entry after OutcomeSuspend (reason retry
	// when NextKind is retry, else wake; RunAt is when the task is due).
	RecordHooks bool
	// ResetLeaseLosses sets the task's LeaseLosses back to zero in the same
	// transaction: the runner sets it on its first checkpoint of a task it
	// claimed with lease losses. (A suspend or park resets them anyway, and
	// a run that ends deletes its task.)
	ResetLeaseLosses bool
	// RetryRun, only with OutcomeSuspend, starts the next attempt of a failed
	// run (a workflow retry): see RunRetry.
	RetryRun *RunRetry
	// ReleaseLimits gives back, in the same transaction, the slots the
	// instance holds in its limited scopes and admits the oldest waiting
	// instances of those scopes: set it on a checkpoint that completes or
	// errors a limited instance (Instance.Limited). Such a checkpoint is
	// Batchable: a group commit releases the slots of all its ending
	// items together, and a fenced-out item releases nothing.
	ReleaseLimits bool
	// ReleaseLease, with ReleaseLimits, starts the first waiting instance
	// of the same workflow, on one of ReleaseLease.Queues, that the release
	// admits at once, with its task leased to ReleaseLease.Owner (the
	// runner whose slot the ending instance frees; Max is ignored), as an
	// eager start does: it comes back in CheckpointResult.Leased, with every
	// column a claim's fresh run carries (its deadline and placement
	// included), and is not made due for a claim.
	ReleaseLease *CreateLease
	// NotifyParent, only with OutcomeComplete or OutcomeError, delivers
	// the end of a child's run to its parent in the same transaction (see
	// ParentNotify). Only children set it.
	NotifyParent *ParentNotify
}

// Batchable reports whether CheckpointBatch can take the checkpoint: one that
// continues its run (OutcomeContinue) or ends it (OutcomeComplete,
// OutcomeError, with or without ReleaseLimits), consumes no event, resets
// no lease losses and notifies no parent. Suspend and Park give the task
// back to the queue and may notify, a consume makes its step's result from
// what it reads, a reset writes the task row (rare: the first checkpoint
// after a reclaim), and a child's end is an event send to its parent, so
// those commit through Checkpoint on their own.
func (p *CheckpointParams) Batchable() bool {
	switch p.Outcome {
	case OutcomeContinue, OutcomeComplete, OutcomeError:
		if p.ConsumeEvent != nil || p.ResetLeaseLosses || p.NotifyParent != nil {
			return false
		}
		// A failed attempt is kept as a row of its own (StepAttempt), which
		// the group commit does not write: a failure is rare, and commits
		// alone.
		for i := range p.Steps {
			if p.Steps[i].RecordsFailedAttempt() {
				return false
			}
		}
		return true
	}
	return false
}

// ConsumeEvent asks a checkpoint to consume the oldest undelivered event of a type.
type ConsumeEvent struct {
	Type    string
	StepKey string
	// StepType is the type the step is written with when it has no row
	// yet: StepTypeWaitForEvent (when empty) or StepTypeInvoke. A step
	// that has a row keeps its type.
	StepType StepType
}

// StepTypeOrWait is t, or StepTypeWaitForEvent when t is empty.
func StepTypeOrWait(t StepType) StepType {
	if t == "" {
		return StepTypeWaitForEvent
	}
	return t
}

// CheckpointResult is what a committed checkpoint reports back.
type CheckpointResult struct {
	// PauseRequested is true when a pause was requested and the instance is
	// still running; the runner parks it at the next step boundary.
	PauseRequested bool
	// Event is the consumed event, when ConsumeEvent was set and one was found.
	// When none was found the checkpoint still commits the other writes.
	Event *Event
	// Due is true when the task is due now after the checkpoint (for example a
	// suspend that found a buffered event), so the caller should wake a runner.
	Due bool
	// Status is the instance status after the checkpoint.
	Status dftype.InstanceStatus
	// Admitted names the workflows of the waiting instances a checkpoint
	// with ReleaseLimits admitted and made due now (each once), so the
	// caller wakes runners for them. In a group commit, the first item
	// that released slots carries those of the whole batch.
	Admitted []string
	// Leased is the instance a ReleaseLease started, with its leased task;
	// nil when none was.
	Leased *CreateResult
	// ParentWoken is true when a NotifyParent made the parent's task due,
	// so the caller wakes runners of the parent's workflow.
	ParentWoken bool
}

// CheckpointBatchResult is the outcome of one item of BatchCheckpointer.CheckpointBatch.
type CheckpointBatchResult struct {
	// Result is set when the item committed.
	Result *CheckpointResult
	// Err is ErrLeaseLost when the item's fence failed.
	Err error
}

// StepListParams are the arguments of Store.StepList.
type StepListParams struct {
	WorkflowName string
	InstanceID   string
	RunNumber    int
	// AfterID continues a page after the step with this ID; 0 starts at the first.
	AfterID int64
	// Limit is the page length; 0 lists every step.
	Limit int
	// Statuses filters by status; empty lists every status.
	Statuses []StepStatus
	// PayloadBudget, when positive, bounds the payload bytes (Result and
	// ErrorMessage) the page reads, as InstanceListParams.PayloadBudget
	// does: the steps past it come with PayloadsOmitted set (every one of
	// them when Limit is 0). Zero reads every payload.
	PayloadBudget int
}

// EventListParams are the arguments of Store.EventList.
type EventListParams struct {
	WorkflowName string
	InstanceID   string
	// RunNumber filters by run; 0 lists every run.
	RunNumber int
	// AfterID continues a page after the event with this ID; 0 starts at the first.
	AfterID int64
	// Limit is the page length; 0 lists every event.
	Limit int
	// PayloadBudget, when positive, bounds the payload bytes the page
	// reads, as InstanceListParams.PayloadBudget does: the events past it
	// come with PayloadOmitted set (every one of them when Limit is 0).
	// Zero reads every payload.
	PayloadBudget int
}

// HookReason says why a workflow was enqueued, in an OnWorkflowEnqueued hook.
type HookReason string

// Hook reasons. A restart is recorded as create: a new run was created.
const (
	HookReasonCreate HookReason = "create"
	HookReasonEvent  HookReason = "event"
	HookReasonResume HookReason = "resume"
	HookReasonRetry  HookReason = "retry"
	HookReasonWake   HookReason = "wake"
)

// OutboxEntry is one recorded hook call waiting for delivery: written in the
// same transaction as the change it reports, delivered after commit, retried
// until delivered.
type OutboxEntry struct {
	ID           int64
	WorkflowName string
	InstanceID   string
	Reason       HookReason
	// RunAt is when the enqueued work is due (now, or a timer's or retry's time).
	RunAt     time.Time
	CreatedAt time.Time
	// Attempts counts delivery attempts so far.
	Attempts  int
	LastError string
	// NextAttemptAt is when the entry may next be claimed for delivery.
	NextAttemptAt time.Time
	LockedUntil   *time.Time
	// Version is the fencing token of a claim, as for tasks.
	Version     int64
	DeliveredAt *time.Time
}

// OutboxClaimParams are the arguments of Store.OutboxClaim.
type OutboxClaimParams struct {
	Now         time.Time
	LockedUntil time.Time
	Max         int
}

// OutboxDeliveredParams are the arguments of Store.OutboxDelivered.
type OutboxDeliveredParams struct {
	ID      int64
	Version int64
	Now     time.Time
}

// OutboxRetryParams are the arguments of Store.OutboxRetry.
type OutboxRetryParams struct {
	ID            int64
	Version       int64
	NextAttemptAt time.Time
	LastError     string
}

// OutboxPruneParams are the arguments of Store.OutboxPrune.
type OutboxPruneParams struct {
	// DeliveredBefore prunes entries delivered before this time.
	DeliveredBefore time.Time
	// Max bounds how many rows one call deletes.
	Max int
}

// Store is the persistence of the engine. Every method is safe for concurrent
// use, and every method that changes more than one row does so in one
// transaction. Methods that compare with "now" take it as a parameter so a fake
// clock moves the database's notion of time too.
type Store interface {
	ScheduleStore
	FlowStore
	AttemptStore
	LimitStore
	WorkerStore
	ChildStore
	StatsStore

	// InstanceCreate inserts a queued instance and its first task (kind run, due
	// now), or with p.Lease a running instance whose task is leased to
	// p.Lease.Owner (see CreateLease). It returns ErrAlreadyExists when the id
	// is taken, or when p.Parent names a step that has a child already.
	InstanceCreate(ctx context.Context, p *InstanceCreateParams) (CreateResult, error)
	// InstanceCreateMany inserts the instances whose ids are free, with their
	// tasks, and returns only those, in input order; existing ids are
	// skipped. With p.Lease, those of the first p.Lease.Max items that are
	// created are started with their tasks leased (see CreateLease).
	InstanceCreateMany(ctx context.Context, p *InstanceCreateManyParams) ([]CreateResult, error)
	// InstanceGet returns one instance or ErrNotFound (also when
	// ref.Namespace is set and the instance is in another namespace).
	InstanceGet(ctx context.Context, ref InstanceRef) (*Instance, error)
	// InstanceList returns a page of instances, newest update first.
	InstanceList(ctx context.Context, p *InstanceListParams) ([]*Instance, error)
	// InstancePause pauses an instance: queued and waiting become paused at
	// once, running becomes waitingForPause, paused stays paused. It returns
	// ErrTerminal for terminal instances.
	InstancePause(ctx context.Context, p *InstanceChangeParams) (*Instance, error)
	// InstanceResume turns a paused instance into a queued one with a task due
	// now; any other status, terminal ones included, is left alone.
	InstanceResume(ctx context.Context, p *InstanceChangeParams) (*Instance, error)
	// InstanceTerminate terminates a non-terminal instance and deletes its
	// task, and in the same transaction its children with
	// ParentPolicyTerminate that have not ended, recursively. It returns
	// ErrTerminal for terminal instances.
	InstanceTerminate(ctx context.Context, p *InstanceChangeParams) (*Instance, error)
	// InstanceCompensate asks for the compensation of a live instance's
	// current run, as transition.Compensate says: it records the request
	// (the step CompensationMarkerKey) and asks a running instance to stop
	// at its next step boundary (a pause request the runner takes up with
	// CompensationTake); any other live instance is queued with its task
	// due now. A second request changes nothing; a terminal instance is
	// ErrTerminal. A suspend or park that commits before the runner took
	// the request up queues the instance instead of pausing it (see
	// OutcomeSuspend), so a user's pause asked for while the request waits
	// is dropped.
	InstanceCompensate(ctx context.Context, p *InstanceCompensateParams) (*Instance, error)
	// CompensationTake, fenced by the held task, takes up the compensation
	// request of the run: when one was made and not taken yet, it clears
	// the pause request that carried it (a waitingForPause instance is
	// running again), marks the request taken and returns true.
	CompensationTake(ctx context.Context, p *CompensationTakeParams) (bool, error)
	// InstanceRestart starts a new run (run_number + 1) of any instance: status
	// queued, output, error and pause cleared, a new task version due now so
	// that a runner still holding the old run is fenced out. In the same
	// transaction it terminates the children of the earlier runs with
	// ParentPolicyTerminate that have not ended, recursively.
	InstanceRestart(ctx context.Context, p *InstanceChangeParams) (*Instance, error)

	// EventSend buffers an event for the instance's current run and, when the
	// instance waits for that type and is not paused, makes its task due now.
	// It returns ErrNotFound or ErrTerminal.
	EventSend(ctx context.Context, p *EventSendParams) (*EventSendResult, error)
	// EventList returns the events of an instance, oldest first.
	EventList(ctx context.Context, p *EventListParams) ([]*Event, error)
	// StepList returns the steps of one run of an instance in creation order.
	StepList(ctx context.Context, p *StepListParams) ([]*Step, error)

	// TaskClaim leases up to Max due tasks of the named workflows on the
	// named queues: pending tasks with run_at <= Now and processing tasks
	// whose lease expired, higher instance priority first, then resuming
	// work, then oldest run_at. Tasks of paused and terminal instances are never
	// claimed. Claiming increments each task's version and marks the instance
	// running.
	TaskClaim(ctx context.Context, p *TaskClaimParams) ([]Claim, error)
	// TaskHeartbeat extends a lease; ErrLeaseLost when the version moved on.
	TaskHeartbeat(ctx context.Context, p *TaskHeartbeatParams) error
	// TaskRelease gives a claimed task back to the queue (pending, due at RunAt)
	// without other changes; ErrLeaseLost when the version moved on.
	TaskRelease(ctx context.Context, p *TaskReleaseParams) error
	// TaskGet returns the task of an instance, or ErrNotFound when it has none.
	TaskGet(ctx context.Context, ref InstanceRef) (*Task, error)
	// TaskNextRunAt returns the earliest run_at of claimable pending tasks
	// (or lease expiry of processing ones) of the named workflows on the
	// named queues, or nil when there is none.
	TaskNextRunAt(ctx context.Context, p *TaskNextRunAtParams) (*time.Time, error)

	// RunLoad returns the instance and the steps of its current run.
	RunLoad(ctx context.Context, ref InstanceRef) (*RunState, error)
	// Checkpoint commits a runner's transition in one transaction, fenced by
	// p.Task; it returns ErrLeaseLost and changes nothing when the fence fails,
	// and ErrInvalidData and changes nothing when the database refuses a
	// value (a step's result, the output, an error message).
	Checkpoint(ctx context.Context, p *CheckpointParams) (*CheckpointResult, error)

	// OutboxClaim leases up to Max undelivered outbox entries whose
	// NextAttemptAt has come (or whose lease expired), oldest first, each with
	// a new version and Attempts + 1.
	OutboxClaim(ctx context.Context, p *OutboxClaimParams) ([]*OutboxEntry, error)
	// OutboxDelivered marks a claimed entry delivered; ErrLeaseLost when the
	// version moved on.
	OutboxDelivered(ctx context.Context, p *OutboxDeliveredParams) error
	// OutboxRetry releases a claimed entry until NextAttemptAt, recording the
	// error; ErrLeaseLost when the version moved on.
	OutboxRetry(ctx context.Context, p *OutboxRetryParams) error
	// OutboxPrune deletes up to Max entries delivered before DeliveredBefore
	// and returns how many it deleted.
	OutboxPrune(ctx context.Context, p *OutboxPruneParams) (int, error)

	// Ping checks that the database answers.
	Ping(ctx context.Context) error

	// Close releases the store's resources.
	Close() error
}

// BatchCheckpointer is the group commit a Store may offer as a capability:
// a runner that finds it (by interface assertion) commits the checkpoints
// of many instances at once, and commits them one by one through
// Store.Checkpoint otherwise. Both backends offer it.
type BatchCheckpointer interface {
	// CheckpointBatch commits several checkpoints of different instances in
	// one transaction: the group commit of the runner's hot path. Every item
	// must be Batchable (else ErrNotBatchable, and nothing is written); each
	// does what Checkpoint would. Each item is fenced on its
	// own: one whose lease was lost changes nothing and reports ErrLeaseLost in
	// its Err, while the others commit. The returned error is for the batch as
	// a whole (nothing committed): ErrInvalidData when the database refused a
	// value of any item, which the caller finds by committing the items one
	// by one.
	CheckpointBatch(ctx context.Context, ps []*CheckpointParams) ([]CheckpointBatchResult, error)
}

// CreatePlacement returns the namespace and queue a create writes: the given
// ones, or workflow.DefaultNamespace and workflow.DefaultQueue when empty.
func CreatePlacement(namespace, queue string) (string, string) {
	if namespace == "" {
		namespace = workflow.DefaultNamespace
	}
	if queue == "" {
		queue = workflow.DefaultQueue
	}
	return namespace, queue
}
