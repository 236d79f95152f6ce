package runner

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

// workerState is the runner's part in the worker registry: its row, kept
// alive by a heartbeat loop apart from the claim loop, the reaper that runs
// with it, and the drain.
type workerState struct {
	stop     context.CancelFunc
	loopDone chan struct{}
	// registered is set once a registration committed.
	registered bool

	draining   atomic.Bool
	drainOnce  sync.Once
	drained    chan struct{}
	deregister sync.Once

	completed, failed atomic.Int64
	// running counts the executions in progress: the active count.
	running atomic.Int64
	// healthySince is when the worker's registrations and heartbeats last
	// started to succeed without a failure in between; zero after a
	// failure. Under beatMu, but for Start's first registration.
	healthySince time.Time

	// beatMu serialises the registrations and heartbeats of the worker row:
	// the worker loop's, and those a step start makes when aliveUntil has
	// passed (renewWorker).
	beatMu sync.Mutex
	// aliveUntil is when, in Unix nanoseconds of the runner's clock, a
	// reaper may mark the worker offline and release its tasks: the time of
	// the last registration or heartbeat that committed, plus
	// Config.OfflineAfter, which the worker row records. No step starts at
	// or past it (see execution.mayStart). Before Start it is the end of
	// time, since a runner that never started has no worker row to reap;
	// from Start until the first registration commits it is zero.
	aliveUntil atomic.Int64
	// outage logs the registrations and heartbeats that fail because the
	// database is unavailable, once per outage. Under beatMu, but for
	// Start's first registration.
	outage *backoff.Outage
}

// aliveAt reports whether no reaper can have marked the worker offline at
// now, by the runner's clock.
func (r *Runner) aliveAt(now time.Time) bool {
	return now.UnixNano() < r.worker.aliveUntil.Load()
}

// beatAt records a registration or heartbeat that committed with Now at:
// the worker's row is safe from reapers until at + OfflineAfter.
func (r *Runner) beatAt(at time.Time) {
	until := at.Add(r.cfg.OfflineAfter).UnixNano()
	for {
		old := r.worker.aliveUntil.Load()
		if old >= until || r.worker.aliveUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// renewWorker makes sure no reaper can mark the worker offline for a while
// before a step starts: when aliveUntil has passed (the process was
// stopped, or its heartbeats failed), it heartbeats the worker row at once,
// or registers it again when it was marked offline or never registered. It
// reports whether the worker is alive after that. A worker that was marked
// offline comes back, but the tasks it held then were released: the caller
// checks its own task's lease too.
func (r *Runner) renewWorker(ctx context.Context) bool {
	r.worker.beatMu.Lock()
	defer r.worker.beatMu.Unlock()
	if r.aliveAt(r.now()) {
		return true
	}
	r.mu.Lock()
	registered := r.worker.registered
	r.mu.Unlock()
	if !registered {
		r.register(ctx, false)
		return r.aliveAt(r.now())
	}
	now := r.now()
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.WorkerHeartbeatInterval)
	res, err := r.cfg.Store.WorkerHeartbeat(callCtx, &db.WorkerHeartbeatParams{
		ID: r.cfg.ID, ActiveCount: int(r.worker.running.Load()),
		CompletedTotal: r.worker.completed.Load(), FailedTotal: r.worker.failed.Load(), Now: now,
	})
	cancel()
	switch {
	case errors.Is(err, db.ErrNotFound) || (err == nil && res.Offline):
		r.cfg.Logger.Warn("the worker was marked offline while its heartbeats were late; registering again", "runner", r.cfg.ID)
		r.register(ctx, false)
	case err != nil:
		r.worker.healthySince = time.Time{}
		if unavailable, _ := r.worker.outage.Round(err); !unavailable {
			r.cfg.Logger.Warn("renewing the worker's heartbeat before a step failed", "runner", r.cfg.ID, "error", err)
		}
		return false
	default:
		r.worker.outage.Round(nil)
		r.beatAt(now)
	}
	return r.aliveAt(r.now())
}

// Drained returns a channel that is closed once the runner drained: a
// drain (Drain, or one requested through the store and seen at a worker
// heartbeat) finished or released the work it held and deregistered the
// worker. A host waits on it to exit after a remote drain.
func (r *Runner) Drained() <-chan struct{} { return r.worker.drained }

// Draining reports whether the runner is draining or drained: it claims
// nothing new.
func (r *Runner) Draining() bool { return r.worker.draining.Load() }

// Drain drains the runner: it claims nothing new and reserves no eager
// start from now on, marks its worker draining, lets the executions it
// holds finish for up to Config.DrainGrace (or until ctx is done), cancels
// those still running, which hand their tasks back to the queue, and
// deregisters the worker. Drained is closed when it returns. It returns
// ctx's error, or context.DeadlineExceeded when the grace ran out, when
// executions had to be cancelled. A runner that was never started has
// nothing to drain: Drain returns an error. Draining twice waits for the
// first drain.
func (r *Runner) Drain(ctx context.Context) error {
	r.mu.Lock()
	if !r.started {
		r.mu.Unlock()
		return errors.New("runner: not started")
	}
	r.worker.draining.Store(true)
	r.mu.Unlock()
	var err error
	first := false
	r.worker.drainOnce.Do(func() {
		first = true
		log := r.cfg.Logger.With("runner", r.cfg.ID)
		log.Info("draining: claiming nothing new", "grace", r.cfg.DrainGrace)
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, derr := r.cfg.Store.WorkerDrain(callCtx, &db.WorkerDrainParams{ID: r.cfg.ID, Now: r.now()}); derr != nil && !errors.Is(derr, db.ErrWorkerOffline) {
			log.Warn("marking the worker draining failed", "error", derr)
		}
		cancel()
		graceCtx, cancelGrace := context.WithTimeout(ctx, r.cfg.DrainGrace)
		defer cancelGrace()
		err = r.Stop(graceCtx)
		if err != nil {
			log.Warn("drained: executions still running at the end of the grace period were handed back", "error", err)
		} else {
			log.Info("drained")
		}
		close(r.worker.drained)
	})
	if !first {
		select {
		case <-r.worker.drained:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// startWorker starts the worker's heartbeat loop, under mu, after the
// first registration.
func (r *Runner) startWorker(ctx context.Context) {
	loopCtx, cancel := context.WithCancel(ctx)
	r.worker.stop = cancel
	r.worker.loopDone = make(chan struct{})
	// The ticker starts with the runner, so the first heartbeat is due one
	// interval after Start.
	ticker := r.cfg.Clock.Ticker(r.cfg.WorkerHeartbeatInterval)
	go r.workerLoop(loopCtx, ticker)
}

// register writes the worker row. first releases what the id still holds
// (an earlier life's tasks): only before the first claim.
func (r *Runner) register(ctx context.Context, first bool) {
	host, _ := os.Hostname()
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now := r.now()
	_, err := r.cfg.Store.WorkerRegister(callCtx, &db.WorkerRegisterParams{
		ID:             r.cfg.ID,
		Hostname:       host,
		PID:            os.Getpid(),
		Version:        r.cfg.Version,
		Labels:         r.cfg.Labels,
		Queues:         r.cfg.Queues,
		Workflows:      r.workflowNames(),
		MaxConcurrency: r.cfg.MaxConcurrency,
		Now:            now,
		OfflineAfter:   r.cfg.OfflineAfter,
		ReleaseHeld:    first,
	})
	if unavailable, _ := r.worker.outage.Round(err); err != nil {
		if !unavailable {
			r.cfg.Logger.Warn("registering the worker failed; trying again at the next worker heartbeat", "runner", r.cfg.ID, "error", err)
		}
		r.worker.healthySince = time.Time{}
		return
	}
	r.beatOK()
	r.beatAt(now)
	r.mu.Lock()
	r.worker.registered = true
	r.mu.Unlock()
}

// workflowNames are the workflows the runner serves: Config.Workflows, or
// every registered one.
func (r *Runner) workflowNames() []string {
	if len(r.cfg.Workflows) > 0 {
		return r.cfg.Workflows
	}
	return r.cfg.Registry.Names()
}

// workerLoop heartbeats the worker row and reaps silent workers every
// WorkerHeartbeatInterval until ctx is done.
func (r *Runner) workerLoop(ctx context.Context, t *clock.Ticker) {
	defer close(r.worker.loopDone)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.workerTick(ctx)
	}
}

// workerTick is one beat of the worker loop: the heartbeat, then the reap.
func (r *Runner) workerTick(ctx context.Context) {
	log := r.cfg.Logger.With("runner", r.cfg.ID)
	r.mu.Lock()
	registered := r.worker.registered
	r.mu.Unlock()
	completed, failed := r.worker.completed.Load(), r.worker.failed.Load()
	r.worker.beatMu.Lock()
	if !registered {
		r.register(ctx, false)
	} else {
		now := r.now()
		callCtx, cancel := context.WithTimeout(ctx, r.cfg.WorkerHeartbeatInterval)
		res, err := r.cfg.Store.WorkerHeartbeat(callCtx, &db.WorkerHeartbeatParams{
			ID: r.cfg.ID, ActiveCount: int(r.worker.running.Load()), CompletedTotal: completed, FailedTotal: failed, Now: now,
		})
		cancel()
		unavailable := false
		if ctx.Err() == nil {
			unavailable, _ = r.worker.outage.Round(err)
		}
		switch {
		case errors.Is(err, db.ErrNotFound) || (err == nil && res.Offline):
			// Marked offline (its heartbeats were late): the tasks it held
			// were released and its writes through them fail. It comes back.
			log.Warn("the worker was marked offline: its heartbeats were late; registering again")
			r.register(ctx, false)
		case err != nil:
			r.worker.healthySince = time.Time{}
			if ctx.Err() == nil && !unavailable {
				log.Warn("worker heartbeat failed", "error", err)
			}
		default:
			r.beatOK()
			r.beatAt(now)
			if res.DrainRequested && !r.Draining() {
				log.Info("a drain was requested")
				go func() { _ = r.Drain(context.Background()) }()
			}
		}
	}
	h := r.worker.healthySince
	r.worker.beatMu.Unlock()
	// Reap only after this worker's own heartbeats have succeeded for a
	// whole threshold: after a database outage every worker's heartbeat is
	// old, and the first to get through must give the others the time to
	// get through too instead of taking their work.
	if h.IsZero() || r.now().Sub(h) < r.cfg.OfflineAfter {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.WorkerHeartbeatInterval)
	res, err := r.cfg.Store.WorkerReap(callCtx, &db.WorkerReapParams{Now: r.now(), OfflineAfter: r.cfg.OfflineAfter})
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reaping workers failed", "error", err)
		}
		return
	}
	if len(res.WorkerIDs) > 0 {
		log.Warn("workers stopped heartbeating: marked offline and their tasks released",
			"workers", res.WorkerIDs, "tasks", res.ReleasedTasks, "offline_after", r.cfg.OfflineAfter)
		if res.ReleasedTasks > 0 {
			r.Notify()
		}
	}
}

// beatOK records a registration or heartbeat that succeeded.
func (r *Runner) beatOK() {
	if r.worker.healthySince.IsZero() {
		r.worker.healthySince = r.now()
	}
}

// stopWorker stops the heartbeat loop and deregisters the worker, once.
func (r *Runner) stopWorker() {
	r.mu.Lock()
	stop, done, registered := r.worker.stop, r.worker.loopDone, r.worker.registered
	r.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
	if !registered {
		return
	}
	r.worker.deregister.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownGrace)
		defer cancel()
		if _, err := r.cfg.Store.WorkerDeregister(ctx, &db.WorkerDeregisterParams{ID: r.cfg.ID, Now: r.now()}); err != nil {
			r.cfg.Logger.Warn("deregistering the worker failed; the reaper marks it offline", "runner", r.cfg.ID, "error", err)
		}
	})
}

// countRun counts a run the runner ended, for the worker's totals.
func (r *Runner) countRun(outcome db.CheckpointOutcome) {
	switch outcome {
	case db.OutcomeComplete:
		r.worker.completed.Add(1)
	case db.OutcomeError:
		r.worker.failed.Add(1)
	}
}

// observeEnd reports a run the runner ended to the observer: its end, and
// whether it was a crash loop the runner stopped.
func (r *Runner) observeEnd(workflowName string, p *db.CheckpointParams) {
	switch p.Outcome {
	case db.OutcomeComplete:
		r.cfg.Observer.ObserveRunEnd(workflowName, false)
	case db.OutcomeError:
		r.cfg.Observer.ObserveRunEnd(workflowName, true)
		if p.ErrorName == ErrorNameRunnerLost {
			r.cfg.Observer.ObserveCrashLoop(workflowName)
		}
	}
}
