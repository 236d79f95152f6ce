package duraflow

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// RunMode says whether and how a host executes workflows.
type RunMode int

const (
	// RunBackground gives the host a runner whose claim loop Start starts,
	// and a scheduler that fires due schedules in the background.
	RunBackground RunMode = iota
	// RunOnDemand gives the host a runner and a scheduler whose loops Start
	// does not start: the host program drives them (Runner().RunDue,
	// Scheduler().FireDue), as the HTTP tick route and the test harness do.
	RunOnDemand
	// RunNone gives the host no runner: it creates and manages instances
	// that runners of other processes execute. Its scheduler manages
	// schedules and fires none.
	RunNone
)

// String returns the mode's name.
func (m RunMode) String() string {
	switch m {
	case RunBackground:
		return "background"
	case RunOnDemand:
		return "on demand"
	case RunNone:
		return "none"
	}
	return fmt.Sprintf("RunMode(%d)", int(m))
}

// Config configures a Host. The sub-configurations are those of the parts'
// own packages, passed through; the fields every part shares (the store,
// the registry, the clock, the logger, the wake-ups and whether hook entries
// are recorded) are the host's, so they are left empty there and New
// reports any that is set.
type Config struct {
	// Registry holds the workflows the host creates and runs. New binds it
	// to the host's client (Registry.Bind), so its typed bindings work. A
	// registry serves one host at a time. Required.
	Registry *workflow.Registry
	// Clock supplies "now" to every part.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives the logs of every part.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// RunMode says whether the host has a runner and whether Start starts
	// it.
	//
	// Defaults to RunBackground.
	RunMode RunMode
	// EngineLimits raise or lower the engine's limits for the host's
	// client, runner, scheduler and flows: the size of a payload, the
	// steps of a run, the instances of a batch (see workflow.EngineLimits;
	// a workflow registered with workflow.WithMaxStepsPerRun has its own
	// bound on its steps). New refuses a setting outside its range. The
	// hosts of one deployment should share them.
	//
	// Defaults to workflow.DefaultEngineLimits(): 1 MiB payloads, 1024
	// steps per run, 100 instances a batch.
	EngineLimits workflow.EngineLimits
	// Runner tunes the runner (concurrency, leases, polling, group commit,
	// eager start): see runner.Config. Its Store, Registry, Clock, Logger,
	// WakeFunc, RecordHooks and EngineLimits are the host's and must be
	// left empty. With RunNone it must be nil.
	//
	// Defaults to runner.Config's defaults.
	Runner *runner.Config
	// Scheduler tunes the scheduler (PollInterval, BatchSize): see
	// schedule.Config. Its Store, Registry, Clock, Logger, WakeFunc,
	// RecordHooks, ResolveFunc and EngineLimits are the host's and must be
	// left empty.
	//
	// Defaults to schedule.Config's defaults.
	Scheduler *schedule.Config
	// DisableScheduler builds the host without a scheduler: Scheduler
	// returns nil, and schedules fire only where another host's scheduler
	// runs.
	//
	// Defaults to false.
	DisableScheduler bool
	// Hooks, when set, turns the durable hooks on (see package hook): the
	// client, the runner and the scheduler record an outbox entry with every
	// change that enqueues work, and the host delivers them to
	// Hooks.OnWorkflowEnqueued, which is required. Its Store, Clock and
	// Logger are the host's and must be left empty.
	//
	// Defaults to nil: no hooks.
	Hooks *hook.Config
	// Flows, when set, gives the host a flow registry (see package flow):
	// flows are registered in Registry beside the Go workflows, new
	// instances are pinned to a flow version, and Start loads the stored
	// flows and keeps refreshing them. Its Store, Registry, Clock, Logger and
	// WakeFunc are the host's and must be left empty; its MaxStepsPerRun
	// defaults to EngineLimits.MaxStepsPerRun.
	//
	// Defaults to nil: no flows.
	Flows *flow.Config
	// PollOnly keeps the host from listening for wake-ups from other
	// processes even when its store offers it (db.WakeListener, as Postgres
	// does): their work is then found by polling only.
	//
	// Defaults to false.
	PollOnly bool
	// Observer, when set, receives the in-memory observations of the
	// host's runner and client (claims, step durations, run ends, crash
	// loops, wake latencies, creates): *metrics.Metrics implements it. It
	// replaces Runner.Observer.
	//
	// Defaults to nil: nothing is observed.
	Observer Observer
	// TracerProvider, when set, turns OpenTelemetry tracing on for the
	// host's client and runner (see docs/tracing.md): creates store their
	// caller's trace context, and every run pass and step attempt is a
	// span that descends from it. It replaces Runner.TracerProvider.
	//
	// Defaults to nil: tracing is off, no span is started and no trace
	// context is stored.
	TracerProvider trace.TracerProvider
	// DisableLifecycleLog turns the lifecycle event log off (see
	// docs/events.md): New tells the store (db.LifecycleStore), whose
	// transitions then run no statement for it. The setting is the
	// store's, so it holds for every host over the same store value.
	//
	// Defaults to false: the log is on.
	DisableLifecycleLog bool
	// LifecycleRetention is how long lifecycle events are kept. A host
	// whose runner runs in the background (RunBackground) prunes older
	// events every LifecyclePruneInterval, in batches of 1000.
	//
	// Defaults to 30 days (DefaultLifecycleRetention).
	LifecycleRetention time.Duration
	// LifecyclePruneInterval is how often the host prunes the lifecycle
	// event log.
	//
	// Defaults to 1 minute.
	LifecyclePruneInterval time.Duration
}

// DefaultLifecycleRetention is Config.LifecycleRetention's default: 30 days.
const DefaultLifecycleRetention = 30 * 24 * time.Hour

// Observer is what a host reports to (see Config.Observer): the runner's
// observations and the client's.
type Observer interface {
	runner.Observer
	client.Observer
}

// validate reports every problem of the config at once.
func (c *Config) validate() error {
	var errs []error
	if c.Registry == nil {
		errs = append(errs, errors.New("Config.Registry is required"))
	}
	if err := c.EngineLimits.Validate(); err != nil {
		// One error a setting, each named as a field of Config.
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			errs = append(errs, fmt.Errorf("Config.%w", e))
		}
	}
	switch c.RunMode {
	case RunBackground, RunOnDemand:
	case RunNone:
		if c.Runner != nil {
			errs = append(errs, errors.New("Config.Runner is set but Config.RunMode is RunNone: the host has no runner"))
		}
	default:
		errs = append(errs, fmt.Errorf("Config.RunMode %d is unknown", int(c.RunMode)))
	}
	if r := c.Runner; r != nil {
		errs = append(errs, hostOwned("Config.Runner", map[string]bool{
			"Store": r.Store != nil, "Registry": r.Registry != nil, "Clock": r.Clock != nil,
			"Logger": r.Logger != nil, "WakeFunc": r.WakeFunc != nil, "RecordHooks": r.RecordHooks,
			"EngineLimits": r.EngineLimits != workflow.EngineLimits{},
		})...)
	}
	if s := c.Scheduler; s != nil {
		if c.DisableScheduler {
			errs = append(errs, errors.New("Config.Scheduler is set but Config.DisableScheduler is true"))
		}
		errs = append(errs, hostOwned("Config.Scheduler", map[string]bool{
			"Store": s.Store != nil, "Registry": s.Registry != nil, "Clock": s.Clock != nil,
			"Logger": s.Logger != nil, "WakeFunc": s.WakeFunc != nil, "RecordHooks": s.RecordHooks,
			"ResolveFunc": s.ResolveFunc != nil, "EngineLimits": s.EngineLimits != workflow.EngineLimits{},
		})...)
	}
	if h := c.Hooks; h != nil {
		if h.OnWorkflowEnqueued == nil {
			errs = append(errs, errors.New("Config.Hooks.OnWorkflowEnqueued is required when Config.Hooks is set"))
		}
		errs = append(errs, hostOwned("Config.Hooks", map[string]bool{
			"Store": h.Store != nil, "Clock": h.Clock != nil, "Logger": h.Logger != nil,
		})...)
	}
	if f := c.Flows; f != nil {
		errs = append(errs, hostOwned("Config.Flows", map[string]bool{
			"Store": f.Store != nil, "Registry": f.Registry != nil, "Clock": f.Clock != nil,
			"Logger": f.Logger != nil, "WakeFunc": f.WakeFunc != nil,
		})...)
	}
	if c.LifecycleRetention < 0 {
		errs = append(errs, fmt.Errorf("Config.LifecycleRetention %s is negative", c.LifecycleRetention))
	}
	if c.LifecyclePruneInterval < 0 {
		errs = append(errs, fmt.Errorf("Config.LifecyclePruneInterval %s is negative", c.LifecyclePruneInterval))
	}
	return errors.Join(errs...)
}

// hostFields are the names hostOwned checks, in the order it reports them.
var hostFields = []string{"Store", "Registry", "Clock", "Logger", "WakeFunc", "RecordHooks", "ResolveFunc", "EngineLimits"}

// hostOwned reports each field of a sub-configuration that is set although
// the host sets it.
func hostOwned(section string, set map[string]bool) []error {
	var errs []error
	for _, name := range hostFields {
		if !set[name] {
			continue
		}
		why := "the host sets it"
		switch name {
		case "RecordHooks":
			why = "hook entries are recorded when Config.Hooks is set"
		case "EngineLimits":
			why = "the host sets it from Config.EngineLimits"
		}
		errs = append(errs, fmt.Errorf("%s.%s must be left empty: %s", section, name, why))
	}
	return errs
}
