package runner

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/benbjohnson/clock"

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
	// Clock is the source of "now" for claims, leases, timers and timeouts.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives the runner's logs.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// ID identifies this runner as the lock owner of the tasks it claims.
	//
	// Defaults to "<hostname>-<pid>-<random>".
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
	out.ID = cmp.Or(out.ID, defaultID())
	out.LeaseDuration = cmp.Or(out.LeaseDuration, DefaultLeaseDuration)
	out.HeartbeatInterval = cmp.Or(out.HeartbeatInterval, out.LeaseDuration/3)
	out.PollInterval = cmp.Or(out.PollInterval, DefaultPollInterval)
	out.MaxConcurrency = cmp.Or(out.MaxConcurrency, DefaultMaxConcurrency)
	out.ShutdownGrace = cmp.Or(out.ShutdownGrace, 5*time.Second)
	out.MaxLeaseLosses = cmp.Or(out.MaxLeaseLosses, DefaultMaxLeaseLosses)
	out.GroupCommitMax = cmp.Or(out.GroupCommitMax, 64)
	out.GroupCommitWorkers = cmp.Or(out.GroupCommitWorkers, 2)
	if out.WakeFunc == nil {
		out.WakeFunc = func(string) {}
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
	if c.PollInterval <= 0 {
		return fmt.Errorf("runner: PollInterval %s must be positive", c.PollInterval)
	}
	if c.MaxConcurrency < 1 {
		return fmt.Errorf("runner: MaxConcurrency %d must be at least 1", c.MaxConcurrency)
	}
	if c.MaxLeaseLosses < 1 {
		return fmt.Errorf("runner: MaxLeaseLosses %d must be at least 1", c.MaxLeaseLosses)
	}
	if c.GroupCommitMax < 1 || c.GroupCommitWorkers < 1 {
		return fmt.Errorf("runner: GroupCommitMax %d and GroupCommitWorkers %d must be at least 1", c.GroupCommitMax, c.GroupCommitWorkers)
	}
	if len(c.ID) > 200 {
		return errors.New("runner: ID is longer than 200 characters")
	}
	return nil
}

func defaultID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", cmp.Or(host, "runner"), os.Getpid(), hex.EncodeToString(b[:]))
}
