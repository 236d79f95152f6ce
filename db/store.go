package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"

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
)

// StepType says what kind of durable operation a step row records.
type StepType string

// Step types.
const (
	StepTypeDo           StepType = "do"
	StepTypeSleep        StepType = "sleep"
	StepTypeWaitForEvent StepType = "waitForEvent"
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
	Status       workflow.InstanceStatus
	Params       json.RawMessage
	// Metadata is what the engine records about the instance besides its
	// params (provenance, a flow's pinned version); nil when there is none.
	Metadata       json.RawMessage
	Output         json.RawMessage
	ErrorName      string
	ErrorMessage   string
	PauseRequested bool
	RunNumber      int
	CreatedAt      time.Time
	// UpdatedAt moves when the instance changes: its status transitions
	// (create, start, suspend, wake, pause, resume, terminate, restart,
	// complete, fail) and a buffered event. A step checkpoint that leaves the
	// status as it is does not move it.
	UpdatedAt      time.Time
	StartedAt      *time.Time
	CompletedAt    *time.Time
	RetentionUntil *time.Time
}

// CreateResult is what a create reports for one instance it created.
type CreateResult struct {
	Instance *Instance
	// LeasedTask is the instance's first task as a create with a
	// CreateLease leased it (eager start); nil when it was queued.
	LeasedTask *Task
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
	// LeaseLosses counts the claims that took the task over from a holder
	// whose lease had expired, since the task's last checkpoint that made
	// progress (one that set ResetLeaseLosses, a suspend or a park) or the
	// start of its run. A step whose process dies mid-attempt makes it grow
	// by one per reclaim; from SuspectLeaseLosses the task runs in its
	// runner's quarantine, and the runner stops the loop at its
	// MaxLeaseLosses.
	LeaseLosses int
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
	// CreateResult.LeasedTask.
	Lease *CreateLease
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
}

// InstanceCreateManyParams are the arguments of Store.InstanceCreateMany.
type InstanceCreateManyParams struct {
	WorkflowName string
	Instances    []InstanceCreateItem
	Now          *time.Time
	// RecordHooks records an outbox entry (reason create) per created instance.
	RecordHooks bool
	// Lease, when set, starts up to Lease.Max of the created instances at
	// once with their tasks leased (see CreateLease).
	Lease *CreateLease
}

// InstanceCreateItem is one instance of a batch create.
type InstanceCreateItem struct {
	ID       string
	Params   json.RawMessage
	Metadata json.RawMessage
}

// InstanceRef names one instance.
type InstanceRef struct {
	WorkflowName string
	ID           string
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
}

// InstanceListParams are the arguments of Store.InstanceList. Results are
// ordered newest update first; Cursor continues after the last row of the
// previous page.
type InstanceListParams struct {
	// WorkflowName filters by workflow; empty lists every workflow.
	WorkflowName string
	// Statuses filters by status; empty means every status.
	Statuses []workflow.InstanceStatus
	Limit    int
	Cursor   *InstanceCursor
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
	// notification is sent for a leased task.
	Lease *CreateLease
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

// TaskHeartbeatParams are the arguments of Store.TaskHeartbeat.
type TaskHeartbeatParams struct {
	Task        TaskRef
	LockedUntil time.Time
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
	// of WaitEventTypes makes it due at once instead.
	OutcomeSuspend
	// OutcomePark sets the instance paused and releases the task.
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
}

// Batchable reports whether CheckpointBatch can take the checkpoint: one that
// continues its run (OutcomeContinue) or ends it (OutcomeComplete,
// OutcomeError), consumes no event and resets no lease losses. Suspend and
// Park give the task back to the queue and may notify, a consume makes its
// step's result from what it reads, and a reset writes the task row (rare:
// the first checkpoint after a reclaim), so those commit through Checkpoint
// on their own.
func (p *CheckpointParams) Batchable() bool {
	switch p.Outcome {
	case OutcomeContinue, OutcomeComplete, OutcomeError:
		return p.ConsumeEvent == nil && !p.ResetLeaseLosses
	}
	return false
}

// ConsumeEvent asks a checkpoint to consume the oldest undelivered event of a type.
type ConsumeEvent struct {
	Type    string
	StepKey string
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
	Status workflow.InstanceStatus
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

	// InstanceCreate inserts a queued instance and its first task (kind run, due
	// now), or with p.Lease a running instance whose task is leased to
	// p.Lease.Owner (see CreateLease). It returns ErrAlreadyExists when the id
	// is taken.
	InstanceCreate(ctx context.Context, p *InstanceCreateParams) (CreateResult, error)
	// InstanceCreateMany inserts the instances whose ids are free, with their
	// tasks, and returns only those, in input order; existing ids are
	// skipped. With p.Lease, those of the first p.Lease.Max items that are
	// created are started with their tasks leased (see CreateLease).
	InstanceCreateMany(ctx context.Context, p *InstanceCreateManyParams) ([]CreateResult, error)
	// InstanceGet returns one instance or ErrNotFound.
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
	// task. It returns ErrTerminal for terminal instances.
	InstanceTerminate(ctx context.Context, p *InstanceChangeParams) (*Instance, error)
	// InstanceRestart starts a new run (run_number + 1) of any instance: status
	// queued, output, error and pause cleared, a new task version due now so
	// that a runner still holding the old run is fenced out.
	InstanceRestart(ctx context.Context, p *InstanceChangeParams) (*Instance, error)

	// EventSend buffers an event for the instance's current run and, when the
	// instance waits for that type and is not paused, makes its task due now.
	// It returns ErrNotFound or ErrTerminal.
	EventSend(ctx context.Context, p *EventSendParams) (*EventSendResult, error)
	// EventList returns the events of an instance, oldest first.
	EventList(ctx context.Context, p *EventListParams) ([]*Event, error)
	// StepList returns the steps of one run of an instance in creation order.
	StepList(ctx context.Context, p *StepListParams) ([]*Step, error)

	// TaskClaim leases up to Max due tasks of the named workflows: pending tasks
	// with run_at <= Now and processing tasks whose lease expired, resuming work
	// first, then oldest run_at. Tasks of paused and terminal instances are never
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
	// TaskNextRunAt returns the earliest run_at of claimable pending tasks of the
	// named workflows, or nil when there is none.
	TaskNextRunAt(ctx context.Context, workflowNames []string) (*time.Time, error)

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
