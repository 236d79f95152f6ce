package runner

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/workflow"
)

// Config configures a Runner.
type Config struct {
	// Store is the database. Required.
	Store db.Store
	// Registry holds the workflows this runner executes; it claims only tasks
	// of registered workflows. Required.
	Registry *workflow.Registry
	// Queues are the task queues this runner serves: it claims only tasks
	// of instances on one of them. AllQueues alone serves every queue (the
	// test harness's runner does).
	//
	// Defaults to workflow.DefaultQueue alone.
	Queues []string
	// Workflows, when set, limits the runner to these of the registered
	// workflows: it claims no task of any other.
	//
	// Defaults to every registered workflow.
	Workflows []string
	// Clock is the source of "now" for claims, leases, timers and timeouts.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives the runner's logs.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// ID identifies this runner as the lock owner of the tasks it claims
	// and as its worker (see WorkerRegister): it must be unique among the
	// live runners of a database. A runner that starts registers its id and
	// releases what the id still holds, which it takes for an earlier,
	// dead life of itself.
	//
	// Defaults to "<hostname>-<pid>" for the process's first runner and
	// "<hostname>-<pid>-<n>" for its n-th, so that a restart of the same
	// host and pid registers the same worker again. Hosts must have
	// distinct hostnames (containers and pods do).
	ID string
	// LeaseDuration is how long a claimed task stays locked without a
	// heartbeat or a checkpoint; after it a crashed runner's work is reclaimed.
	//
	// Defaults to 30 seconds.
	LeaseDuration time.Duration
	// HeartbeatInterval is how often a running instance renews its lease.
	//
	// Defaults to a third of LeaseDuration.
	HeartbeatInterval time.Duration
	// PollInterval is how often the runner looks for due work when nothing
	// woke it. A lost wake-up delays work by at most this much.
	//
	// Defaults to 1 second.
	PollInterval time.Duration
	// MaxConcurrency is how many instances the runner executes at once.
	// Instances waiting in a sleep or for an event hold no slot; a slot is
	// a goroutine running workflow code, and the more run at once the more
	// checkpoints share each group commit.
	//
	// Defaults to 64.
	MaxConcurrency int
	// MaxLeaseLosses is how many times in a row a task's lease may expire
	// without a checkpoint (its runner died, or stalled past its lease,
	// while a step ran) before the runner that claims it next errors the
	// instance instead of running the step again: with the message `step
	// "X" lost its runner N times`, X being the first step the run would
	// start, and ErrorNameRunnerLost. A checkpoint that makes progress
	// starts the count again. It bounds the crash loop of a step that kills
	// its process on every attempt.
	//
	// From db.SuspectLeaseLosses (2) losses a task runs in quarantine, alone
	// among suspects (see Runner), so that tasks that only died beside such
	// a step make progress and reset their count before they reach this
	// limit. That saves them only when MaxLeaseLosses is above 2: at 1 or 2
	// they error with the crasher, as they would without the quarantine.
	//
	// Defaults to 5.
	MaxLeaseLosses int
	// MaxInvokeDepth bounds the nesting of Invoke steps: an instance with
	// this many parents fails its Invoke with workflow.ErrInvokeDepth
	// instead of starting a child (a cycle of workflows invoking each
	// other stops there).
	//
	// Defaults to workflow.DefaultMaxInvokeDepth (16).
	MaxInvokeDepth int
	// EngineLimits bound the payloads the runner stores (step results,
	// outputs, the params of Invoke steps) and the steps of a run (see
	// workflow.EngineLimits); a workflow registered with
	// workflow.WithMaxStepsPerRun has its own bound on its steps. The
	// runners of one deployment should share them: a run replayed by a
	// runner with a lower MaxStepsPerRun fails at the step past it, even
	// one it recorded before.
	//
	// Defaults to workflow.DefaultEngineLimits(): 1 MiB payloads, 1024
	// steps per run.
	EngineLimits workflow.EngineLimits
	// ShutdownGrace is how long a suspended or cancelled run's code may take
	// to return after its context is cancelled before the runner stops
	// waiting for it. When the runner stops, it is also the longest it
	// retries giving a task back through a store that fails.
	//
	// Defaults to 5 seconds.
	ShutdownGrace time.Duration
	// WakeFunc is called after a checkpoint made a task due now (for example a
	// wait that found its event buffered), so other runners can be told.
	//
	// Defaults to nothing; the runner always wakes itself.
	WakeFunc func(workflowName string)
	// GroupCommitMax is how many step checkpoints of different instances may
	// commit together in one transaction (group commit). A step's result is
	// still durable before its workflow goes on: each execution waits for the
	// commit that holds its checkpoint. Checkpoints queue while a commit is in
	// flight, so batching adds no delay. 1 commits every checkpoint on its own.
	//
	// Defaults to 64.
	GroupCommitMax int
	// GroupCommitWorkers is how many group commits may be in flight at once.
	//
	// Defaults to 2.
	GroupCommitWorkers int
	// RecordHooks records an OnWorkflowEnqueued outbox entry (reason retry or
	// wake) in the same transaction as every suspension.
	//
	// Defaults to false.
	RecordHooks bool
	// Labels are free-form key/value pairs recorded with the runner's
	// worker row (see "Worker registry" in the package documentation), for
	// operators: a zone, a deployment, a pool.
	//
	// Defaults to none.
	Labels map[string]string
	// Version is the version of the program, recorded with the worker row.
	//
	// Defaults to the main module's version from the binary's build
	// information ("(devel)" for a development build), or "" without it.
	Version string
	// WorkerHeartbeatInterval is how often the runner writes its worker
	// row's heartbeat (its active count and totals) and reaps the workers
	// whose heartbeat stopped. It is one write (and one reap) per interval
	// per runner, apart from the per-task heartbeats of HeartbeatInterval.
	//
	// Defaults to 5 seconds, or HeartbeatInterval when that is shorter.
	WorkerHeartbeatInterval time.Duration
	// OfflineAfter is how long the runner's worker may go without a
	// heartbeat before another runner's reaper marks it offline and
	// releases the tasks it holds at once, without waiting for their
	// leases to expire. The worker row records it, and every reaper keeps
	// to each worker's own (rows an older version wrote, without one, get
	// the reaper's). The runner starts no step once OfflineAfter has passed
	// since its last heartbeat that committed, as it starts none once a
	// task's lease has passed: a process that was stopped (SIGSTOP, a long
	// pause) renews first, or drops the run. Every runner reaps on its own
	// clock, so the clocks of the hosts must agree to well within it, as
	// for leases. A runner reaps only once its own heartbeats have
	// succeeded for OfflineAfter, so that after a database outage it does
	// not take the work of runners that have not got through yet. It must
	// be at least twice WorkerHeartbeatInterval.
	//
	// Defaults to three times WorkerHeartbeatInterval.
	OfflineAfter time.Duration
	// DrainGrace is how long a drain (Drain, or a drain requested through
	// the store and seen at a worker heartbeat) lets the executions the
	// runner holds finish before it cancels them, which hands their tasks
	// back to the queue.
	//
	// Defaults to 30 seconds.
	DrainGrace time.Duration
	// DisableEagerStart turns eager start off: ReserveEager reserves nothing,
	// so a client attached to this runner (client.Config.EagerStarter)
	// queues every instance it creates for a claim. With eager start on, an
	// instance created through such a client while the runner is started,
	// has the workflow registered and has a free slot is created already
	// running with its task leased to this runner, and runs at once without
	// a claim.
	//
	// Defaults to false: eager start is on.
	DisableEagerStart bool
	// JitterFunc returns the draw in [0, 1) that spreads a retry's wait
	// (workflow.RetryPolicy.NextDelay): tests set it to make the jitter
	// exact. The wait it gives is recorded, so replay never draws again.
	//
	// Defaults to a uniform random draw.
	JitterFunc func() float64
	// StepOverrideFunc, when set, is asked before every attempt of a Do
	// step that runs (never for one whose recorded result is replayed) for
	// a function to run instead of the step's own, given the workflow and
	// the step name; nil keeps the step's. The replacement runs exactly as
	// the step's own would: with the attempt in its context
	// (workflow.StepInfoFromContext), under the step's timeout and retry
	// policy, and its result goes through the same encoding. The test
	// harness's step mocks (testharness.Harness.OnStep) use it.
	//
	// Defaults to nil: every step runs its own function.
	StepOverrideFunc func(workflowName, step string) workflow.StepFunc
	// Observer receives the runner's in-memory observations (claims, step
	// durations, run ends, crash loops, wake latencies) for metrics: see
	// Observer and package metrics. It adds no database statement.
	//
	// Defaults to an observer that does nothing.
	Observer Observer
	// TracerProvider, when set, traces the runner's work with
	// OpenTelemetry: a span per run pass (a child of the trace context the
	// instance's create stored) and a span per step attempt under it (see
	// docs/tracing.md). It adds no database statement.
	//
	// Defaults to nil: tracing is off and no span is started.
	TracerProvider trace.TracerProvider
}

// Defaults of Config. Hosts that expose these settings (the command line's
// flags) default to the same constants.
const (
	// DefaultLeaseDuration is the default of Config.LeaseDuration.
	DefaultLeaseDuration = 30 * time.Second
	// DefaultPollInterval is the default of Config.PollInterval.
	DefaultPollInterval = time.Second
	// DefaultMaxConcurrency is the default of Config.MaxConcurrency.
	DefaultMaxConcurrency = 64
	// DefaultMaxLeaseLosses is the default of Config.MaxLeaseLosses.
	DefaultMaxLeaseLosses = 5
	// DefaultWorkerHeartbeatInterval is the default of
	// Config.WorkerHeartbeatInterval (unless HeartbeatInterval is shorter).
	DefaultWorkerHeartbeatInterval = 5 * time.Second
	// DefaultDrainGrace is the default of Config.DrainGrace.
	DefaultDrainGrace = 30 * time.Second
)

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *Config) WithDefaults() *Config {
	out := *c
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	if len(out.Queues) == 0 {
		out.Queues = []string{workflow.DefaultQueue}
	}
	out.ID = cmp.Or(out.ID, defaultID())
	out.LeaseDuration = cmp.Or(out.LeaseDuration, DefaultLeaseDuration)
	out.HeartbeatInterval = cmp.Or(out.HeartbeatInterval, out.LeaseDuration/3)
	out.WorkerHeartbeatInterval = cmp.Or(out.WorkerHeartbeatInterval, min(DefaultWorkerHeartbeatInterval, out.HeartbeatInterval))
	out.OfflineAfter = cmp.Or(out.OfflineAfter, 3*out.WorkerHeartbeatInterval)
	out.DrainGrace = cmp.Or(out.DrainGrace, DefaultDrainGrace)
	out.Version = cmp.Or(out.Version, buildVersion())
	out.PollInterval = cmp.Or(out.PollInterval, DefaultPollInterval)
	out.MaxConcurrency = cmp.Or(out.MaxConcurrency, DefaultMaxConcurrency)
	out.ShutdownGrace = cmp.Or(out.ShutdownGrace, 5*time.Second)
	out.MaxLeaseLosses = cmp.Or(out.MaxLeaseLosses, DefaultMaxLeaseLosses)
	out.MaxInvokeDepth = cmp.Or(out.MaxInvokeDepth, workflow.DefaultMaxInvokeDepth)
	out.EngineLimits = out.EngineLimits.WithDefaults()
	out.GroupCommitMax = cmp.Or(out.GroupCommitMax, 64)
	out.GroupCommitWorkers = cmp.Or(out.GroupCommitWorkers, 2)
	if out.WakeFunc == nil {
		out.WakeFunc = func(string) {}
	}
	if out.Observer == nil {
		out.Observer = nopObserver{}
	}
	return &out
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("runner: Config.Store is required")
	}
	if c.Registry == nil {
		return errors.New("runner: Config.Registry is required")
	}
	if c.LeaseDuration < time.Second {
		return fmt.Errorf("runner: LeaseDuration %s is shorter than 1 second", c.LeaseDuration)
	}
	if c.HeartbeatInterval <= 0 || c.HeartbeatInterval >= c.LeaseDuration {
		return fmt.Errorf("runner: HeartbeatInterval %s must be positive and shorter than LeaseDuration %s", c.HeartbeatInterval, c.LeaseDuration)
	}
	if c.WorkerHeartbeatInterval <= 0 {
		return fmt.Errorf("runner: WorkerHeartbeatInterval %s must be positive", c.WorkerHeartbeatInterval)
	}
	if c.OfflineAfter < 2*c.WorkerHeartbeatInterval {
		return fmt.Errorf("runner: OfflineAfter %s must be at least twice WorkerHeartbeatInterval %s", c.OfflineAfter, c.WorkerHeartbeatInterval)
	}
	if c.DrainGrace < 0 {
		return fmt.Errorf("runner: DrainGrace %s must not be negative", c.DrainGrace)
	}
	if c.PollInterval <= 0 {
		return fmt.Errorf("runner: PollInterval %s must be positive", c.PollInterval)
	}
	if c.MaxConcurrency < 1 {
		return fmt.Errorf("runner: MaxConcurrency %d must be at least 1", c.MaxConcurrency)
	}
	if c.MaxLeaseLosses < 1 {
		return fmt.Errorf("runner: MaxLeaseLosses %d must be at least 1", c.MaxLeaseLosses)
	}
	if c.MaxInvokeDepth < 1 {
		return fmt.Errorf("runner: MaxInvokeDepth %d must be at least 1", c.MaxInvokeDepth)
	}
	if err := c.EngineLimits.Validate(); err != nil {
		return fmt.Errorf("runner: Config.%w", err)
	}
	if c.GroupCommitMax < 1 || c.GroupCommitWorkers < 1 {
		return fmt.Errorf("runner: GroupCommitMax %d and GroupCommitWorkers %d must be at least 1", c.GroupCommitMax, c.GroupCommitWorkers)
	}
	for _, q := range c.Queues {
		if q == AllQueues && len(c.Queues) == 1 {
			continue
		}
		if err := workflow.ValidateQueueName(q); err != nil {
			return fmt.Errorf("runner: Config.Queues: %w", err)
		}
	}
	for _, name := range c.Workflows {
		if err := workflow.ValidateWorkflowName(name); err != nil {
			return fmt.Errorf("runner: Config.Workflows: %w", err)
		}
	}
	if len(c.ID) > 200 {
		return errors.New("runner: ID is longer than 200 characters")
	}
	return nil
}

// runnersInProcess numbers the runners of this process that take the
// default ID.
var runnersInProcess atomic.Int64

// defaultID is "<hostname>-<pid>" for the first runner of the process that
// takes the default and "<hostname>-<pid>-<n>" for the n-th after it, so
// that a restart of the same host and pid (a container's pid 1) gets the
// same ids again and registers the same worker rows (see WorkerRegister),
// while runners of one process never share one.
func defaultID() string {
	host, _ := os.Hostname()
	id := fmt.Sprintf("%s-%d", cmp.Or(host, "runner"), os.Getpid())
	if n := runnersInProcess.Add(1); n > 1 {
		id = fmt.Sprintf("%s-%d", id, n)
	}
	return id
}

// buildVersion is the main module's version from the build information.
func buildVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		return info.Main.Version
	}
	return ""
}
