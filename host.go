package duraflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/schedule"
)

// Host is one process's Duraflow: a management client, a runner, a
// scheduler, a hook deliverer and a flow registry over one store, woken by
// each other's commits and, on a store that can, by other processes'. It is
// built complete by New; Start runs its background work and Stop drains it.
// Its methods are safe for concurrent use.
type Host struct {
	cfg   Config
	store db.Store

	client    *client.Client
	runner    *runner.Runner      // nil with RunNone
	scheduler *schedule.Scheduler // nil with DisableScheduler
	hooks     *hook.Deliverer     // nil without Config.Hooks
	flows     *flow.Registry      // nil without Config.Flows

	// listener is the store's wake listener when the host listens;
	// listening is closed once it first listens.
	listener    db.WakeListener
	listening   chan struct{}
	listenOnce  sync.Once
	stopListen  context.CancelFunc
	listenDone  chan struct{}
	loopRunning bool // the runner's and the scheduler's loops run (RunBackground)

	// subs are the lifecycle subscribers' wake channels; stopPrune and
	// pruneDone stop and await the lifecycle prune loop.
	subs      subscribers
	stopPrune context.CancelFunc
	pruneDone chan struct{}

	mu      sync.Mutex
	started bool
	stopped bool
}

// startFailureGrace bounds how long Start waits for the parts it started to
// stop when a later part fails to start.
const startFailureGrace = 5 * time.Second

// New builds a host over store from cfg; see Config. It starts nothing and
// does no I/O: Start does. The caller keeps the store and closes it after
// Stop.
func New(store db.Store, cfg *Config) (*Host, error) {
	if store == nil {
		return nil, errors.New("duraflow: a store is required")
	}
	if cfg == nil {
		return nil, errors.New("duraflow: a Config is required")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("duraflow: invalid Config: %w", err)
	}
	h := &Host{cfg: *cfg, store: store}
	recordHooks := cfg.Hooks != nil
	limits := cfg.EngineLimits.WithDefaults()
	if ls := h.lifecycleStore(); ls != nil {
		ls.LifecycleLogSet(!cfg.DisableLifecycleLog)
	}

	if cfg.Hooks != nil {
		hc := *cfg.Hooks
		hc.Store, hc.Clock, hc.Logger = store, cfg.Clock, cfg.Logger
		d, err := hook.NewDeliverer(&hc)
		if err != nil {
			return nil, fmt.Errorf("duraflow: building the hook deliverer: %w", err)
		}
		h.hooks = d
	}
	if cfg.Flows != nil {
		fc := *cfg.Flows
		fc.Store, fc.Registry, fc.Clock, fc.Logger, fc.WakeFunc = store, cfg.Registry, cfg.Clock, cfg.Logger, h.wake
		fc.MaxStepsPerRun = cmp.Or(fc.MaxStepsPerRun, limits.MaxStepsPerRun)
		f, err := flow.New(&fc)
		if err != nil {
			return nil, fmt.Errorf("duraflow: building the flow registry: %w", err)
		}
		h.flows = f
	}
	if cfg.RunMode != RunNone {
		var rc runner.Config
		if cfg.Runner != nil {
			rc = *cfg.Runner
		}
		rc.Store, rc.Registry, rc.Clock, rc.Logger = store, cfg.Registry, cfg.Clock, cfg.Logger
		rc.WakeFunc, rc.RecordHooks, rc.EngineLimits = h.wake, recordHooks, limits
		if cfg.Observer != nil {
			rc.Observer = cfg.Observer
		}
		if cfg.TracerProvider != nil {
			rc.TracerProvider = cfg.TracerProvider
		}
		r, err := runner.New(&rc)
		if err != nil {
			return nil, fmt.Errorf("duraflow: building the runner: %w", err)
		}
		h.runner = r
		h.loopRunning = cfg.RunMode == RunBackground
	}
	cc := &client.Config{
		Store: store, Registry: cfg.Registry, Clock: cfg.Clock, WakeFunc: h.wake, RecordHooks: recordHooks,
		EngineLimits: limits,
	}
	if cfg.Observer != nil {
		cc.Observer = cfg.Observer
	}
	cc.TracerProvider = cfg.TracerProvider
	if cc.TracerProvider == nil && cfg.Runner != nil {
		// A runner traced on its own: its creates store the context too.
		cc.TracerProvider = cfg.Runner.TracerProvider
	}
	if h.flows != nil {
		cc.MetadataFunc = h.flows.Metadata
		cc.QueueFunc = h.flows.Queue
		cc.LimitsFunc = h.flows.Limits
	}
	if h.runner != nil && (cfg.Runner == nil || !cfg.Runner.DisableEagerStart) {
		// Instances created through the client start on the runner at once
		// when it is started and has a free slot.
		cc.EagerStarter = h.runner
	}
	c, err := client.New(cc)
	if err != nil {
		return nil, fmt.Errorf("duraflow: building the client: %w", err)
	}
	h.client = c
	if !cfg.DisableScheduler {
		var sc schedule.Config
		if cfg.Scheduler != nil {
			sc = *cfg.Scheduler
		}
		sc.Store, sc.Registry, sc.Clock, sc.Logger = store, cfg.Registry, cfg.Clock, cfg.Logger
		sc.WakeFunc, sc.RecordHooks, sc.EngineLimits = h.wake, recordHooks, limits
		sc.LimitsFunc = c.LimitSpecs
		if h.flows != nil {
			sc.ResolveFunc = h.flows.Resolve
		}
		s, err := schedule.New(&sc)
		if err != nil {
			return nil, fmt.Errorf("duraflow: building the scheduler: %w", err)
		}
		h.scheduler = s
	}
	// Wake-ups from other processes matter to a runner that claims in the
	// background and to the hook deliverer.
	if wl, ok := store.(db.WakeListener); ok && !cfg.PollOnly && (h.loopRunning || h.hooks != nil) {
		h.listener, h.listening = wl, make(chan struct{})
	}
	cfg.Registry.Bind(h.client)
	return h, nil
}

// wake tells every part of the host that work of the workflow became due
// ("" when any may have). It never blocks.
func (h *Host) wake(workflowName string) {
	if h.runner != nil {
		h.runner.Notify()
	}
	if h.hooks != nil {
		h.hooks.Notify(workflowName)
	}
	if h.flows != nil {
		h.flows.Notify(workflowName)
	}
	h.wakeSubscribers()
}

// Client returns the management client: create, inspect and control
// instances. Config.Registry's typed bindings go through it.
func (h *Host) Client() *client.Client { return h.client }

// Runner returns the runner, or nil with RunNone.
func (h *Host) Runner() *runner.Runner { return h.runner }

// Scheduler returns the scheduler, or nil with Config.DisableScheduler.
func (h *Host) Scheduler() *schedule.Scheduler { return h.scheduler }

// Hooks returns the hook deliverer, or nil without Config.Hooks.
func (h *Host) Hooks() *hook.Deliverer { return h.hooks }

// Flows returns the flow registry, or nil without Config.Flows.
func (h *Host) Flows() *flow.Registry { return h.flows }

// Listening returns a channel that is closed once the host receives
// wake-ups from other processes, so a caller can make sure none is missed;
// it stays closed across reconnections. It is nil when the host does not
// listen: its store offers no db.WakeListener, Config.PollOnly is set, or
// the host has neither a runner in the background nor hooks.
func (h *Host) Listening() <-chan struct{} {
	if h.listening == nil {
		return nil
	}
	return h.listening
}

// Start starts the host's background work: it loads the stored flows, then
// starts the hook deliverer, the flow refresh, with RunBackground the
// runner's claim loop and the scheduler, and the wake listener. It returns
// once they run; they run until Stop, not until ctx is done (ctx bounds
// loading the flows), so that Stop can drain them. When a part fails to
// start, the parts started before are stopped again.
//
// A database that is unavailable (db.ErrUnavailable) does not fail Start:
// every part retries with backoff until the database is back, and the
// flows load in the background meanwhile, so Ready reports the host not
// ready until they are loaded. Any other error loading the flows fails
// Start.
func (h *Host) Start(ctx context.Context) (err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return errors.New("duraflow: host stopped")
	}
	if h.started {
		return errors.New("duraflow: host already started")
	}
	h.started = true
	defer func() {
		if err != nil {
			h.stopped = true
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startFailureGrace)
			defer cancel()
			_ = h.stop(stopCtx)
		}
	}()
	bg := context.WithoutCancel(ctx)
	if h.flows != nil {
		if _, err := h.flows.Load(ctx); err != nil {
			if !errors.Is(err, db.ErrUnavailable) || ctx.Err() != nil {
				return fmt.Errorf("duraflow: loading flows: %w", err)
			}
			// The flow refresh loads them once the database is back.
			h.logger().Info("duraflow: starting while the database is unavailable; the stored flows load once it is back")
		}
	}
	if h.hooks != nil {
		if err := h.hooks.Start(bg); err != nil {
			return fmt.Errorf("duraflow: starting the hook deliverer: %w", err)
		}
	}
	if h.flows != nil {
		if err := h.flows.Start(bg); err != nil {
			return fmt.Errorf("duraflow: starting the flow refresh: %w", err)
		}
	}
	if h.loopRunning {
		if err := h.runner.Start(bg); err != nil {
			return fmt.Errorf("duraflow: starting the runner: %w", err)
		}
		// Schedules fire wherever a runner runs; every due time fires once
		// however many hosts race for it.
		if h.scheduler != nil {
			if err := h.scheduler.Start(bg); err != nil {
				return fmt.Errorf("duraflow: starting the scheduler: %w", err)
			}
		}
	}
	if h.loopRunning && h.lifecycleStore() != nil {
		pruneCtx, cancel := context.WithCancel(bg)
		h.stopPrune, h.pruneDone = cancel, make(chan struct{})
		go h.pruneLoop(pruneCtx)
	}
	if h.listener != nil {
		listenCtx, cancel := context.WithCancel(bg)
		h.stopListen, h.listenDone = cancel, make(chan struct{})
		go h.listen(listenCtx)
	}
	return nil
}

// Ready reports whether the host can do all its work: nil once its
// database answers and, with Config.Flows, the stored flows are loaded
// (which Start leaves to the background while the database is
// unavailable); an error that says what is missing otherwise. It is meant
// for a readiness check (httpapi.Config.Ready): a host that is not ready
// keeps running and retrying, and becomes ready by itself.
func (h *Host) Ready(ctx context.Context) error {
	if err := h.store.Ping(ctx); err != nil {
		return fmt.Errorf("duraflow: %w", err)
	}
	if h.flows != nil {
		select {
		case <-h.flows.Loaded():
		default:
			return errors.New("duraflow: the stored flows are not loaded yet")
		}
	}
	return nil
}

// listen runs the store's wake listener until ctx is done.
func (h *Host) listen(ctx context.Context) {
	defer close(h.listenDone)
	_ = h.listener.WakeListen(ctx, &db.WakeListenParams{
		WakeFunc: func(workflowName string) {
			if workflowName == "" {
				h.listenOnce.Do(func() { close(h.listening) })
			}
			h.wake(workflowName)
		},
		Logger: h.logger(),
	})
}

func (h *Host) logger() *slog.Logger {
	if h.cfg.Logger != nil {
		return h.cfg.Logger
	}
	return slog.Default()
}

// Stop drains the host: it stops the scheduler and the flow refresh, lets
// the runner's executions finish or suspend until ctx is done and hands the
// rest back to the queue (see runner.Runner.Stop), then stops the hook
// deliverer and the wake listener. It returns ctx's error when work was
// handed back or a part did not stop in time. A stopped host cannot be
// started again; Stop may be called on a host that was never started, and
// more than once.
func (h *Host) Stop(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	return h.stop(ctx)
}

// stop stops every part; h.mu is held.
func (h *Host) stop(ctx context.Context) error {
	var errs []error
	if h.scheduler != nil {
		if err := h.scheduler.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the scheduler: %w", err))
		}
	}
	if h.flows != nil {
		if err := h.flows.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the flow refresh: %w", err))
		}
	}
	if h.runner != nil {
		if err := h.runner.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the runner: %w", err))
		}
	}
	if h.hooks != nil {
		if err := h.hooks.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the hook deliverer: %w", err))
		}
	}
	if h.stopPrune != nil {
		h.stopPrune()
		<-h.pruneDone
		h.stopPrune = nil
	}
	if h.stopListen != nil {
		h.stopListen()
		<-h.listenDone
		h.stopListen = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("duraflow: %w", err)
	}
	return nil
}
