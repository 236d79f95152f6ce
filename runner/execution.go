package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Error names the runner records for failures of its own (the ErrorName of
// a step or instance error).
const (
	// ErrorNameStoreRefused is the error of a step whose result the store
	// refused (db.ErrInvalidData: for example JSON nested deeper than the
	// database accepts), or of a run whose output or last checkpoint it
	// refused. Retrying could not help, so the step fails for good.
	ErrorNameStoreRefused = "StoreRefusedError"
	// ErrorNameRunnerLost is the error of an instance whose task lost its
	// lease without a checkpoint Config.MaxLeaseLosses times: a step that
	// kills its process (or outlives its lease) on every attempt.
	ErrorNameRunnerLost = "RunnerLostError"
)

// Causes with which an execution's context is cancelled.
var (
	errCauseFinished  = errors.New("run suspended or finished")
	errCauseLeaseLost = errors.New("task lease lost")
	errCauseStore     = errors.New("store error")
)

// wait is something a suspended run waits for.
type wait struct {
	at        time.Time
	kind      db.TaskKind
	eventType string
}

type runOutcome struct {
	out json.RawMessage
	err error
}

// execution is one claimed task being replayed. The workflow's goroutines
// (through step methods) and the execution's own loop share its state under
// mu; checkpoints are serialised by commitMu.
type execution struct {
	r      *Runner
	log    *slog.Logger
	ref    db.TaskRef
	inst   *db.Instance
	ctx    context.Context
	cancel context.CancelCauseFunc
	// handoff is the instance the release of this limited run's slots
	// started with its task leased to this runner in this execution's own
	// slot (see Runner.handoffLease): execute runs it next, in the slot.
	handoff *db.CreateResult

	commitMu sync.Mutex

	mu      sync.Mutex
	steps   map[string]*db.Step
	active  map[string]bool
	counted map[string]bool
	// maxSteps bounds counted: the workflow's WithMaxStepsPerRun, else
	// the runner's EngineLimits.MaxStepsPerRun.
	maxSteps int
	// used are the step names workflow code reached in this pass (see
	// useName).
	used map[string]bool
	// running are the step attempts in progress, which the lease heartbeat
	// reports for history (db.TaskHeartbeatParams.RunningSteps).
	running map[string]db.RunningStep
	// deadlineHit is set when the instance's deadline passed while it ran.
	deadlineHit atomic.Bool
	// stepCtx is the parent of every step attempt's context: ctx, or a
	// child the deadline cancels first, with cause ErrDeadlineExceeded.
	stepCtx     context.Context
	cancelSteps context.CancelCauseFunc
	// inflight counts step work that may still commit (running callbacks and
	// checkpoints); the run is suspended only once it drops to zero.
	inflight int
	// blocked counts goroutines parked inside a step until the run suspends.
	blocked int
	waits   []wait
	writes  []db.StepWrite
	// park is set when a checkpoint reported a pause request: no new step
	// starts, and the run is parked at this boundary.
	park bool
	// closed is set once the run was suspended, finished or abandoned: from
	// then on no step starts or commits.
	closed  bool
	changed chan struct{}
	// budget, when set, counts the new step attempts this execution and the
	// others of one RunDueLimited call may still start.
	budget *atomic.Int64

	// leaseUntil is the lease expiry the runner last wrote on the task (at
	// the claim, then at each heartbeat), in Unix nanoseconds of the
	// runner's clock: retries of store calls stop there.
	leaseUntil atomic.Int64
	// leaseLosses is the task's db.Task.LeaseLosses at the claim.
	leaseLosses int
	// resetLosses, under commitMu, asks the next checkpoint to reset the
	// task's lease losses; cleared once one did.
	resetLosses bool
	// lossLimit, under mu, is set when the run lost its runner
	// MaxLeaseLosses times: the first step attempt it would start errors the
	// instance instead; cleared with resetLosses.
	lossLimit bool
	// leaveQuarantine, set when the task is a suspect that holds the
	// runner's quarantine, frees it; called once the task's lease losses
	// are reset, as the run is then no longer suspect.
	leaveQuarantine func()

	// wokenAt is the run_at of a resume task (an event's send made it due
	// then), zero for other kinds: a wait the send completed at or after
	// it is resumed by this execution (see ObserveWake).
	wokenAt time.Time

	// saga, under mu, holds the compensations of the completed steps and
	// whether they run (see compensation.go).
	saga saga

	// span is the run pass's span; nil when tracing is off.
	span trace.Span
}

// leaseDeadline is when the lease the runner last wrote expires.
func (e *execution) leaseDeadline() time.Time { return time.Unix(0, e.leaseUntil.Load()) }

// holdsLease reports whether, at now by the runner's clock, no other
// runner can hold the task: its lease has not run out, and no reaper can
// have released it (Runner.aliveAt).
func (e *execution) holdsLease(now time.Time) bool {
	return now.Before(e.leaseDeadline()) && e.r.aliveAt(now)
}

// mayStart is asked on a step attempt's goroutine immediately before its
// callback runs, and reports whether it may run, with the time it checked.
// While the runner holds the task it answers at once. Past the lease, or
// past the time a reaper may release the worker's tasks (the process was
// stopped and has just resumed: SIGSTOP, a long pause of the whole
// process, a suspended laptop; or its heartbeats failed), it renews before
// anything starts: the worker's heartbeat when a reaper may have marked it
// offline, then the task's, which fails when another runner took the task
// over. Whatever it cannot renew, the run is dropped as when a heartbeat
// finds the lease lost: nothing starts and nothing is written.
func (e *execution) mayStart(key string) (time.Time, bool) {
	now := e.r.now()
	if e.holdsLease(now) {
		return now, true
	}
	e.log.Info("the lease may have run out before a step started; renewing it", "step", key,
		"lease_until", e.leaseDeadline(), "worker_alive_until", time.Unix(0, e.r.worker.aliveUntil.Load()))
	if !e.r.aliveAt(now) && !e.r.renewWorker(e.ctx) {
		e.log.Info("the worker could not be renewed before a step started; dropping the run", "step", key)
		e.cancel(errCauseLeaseLost)
		return now, false
	}
	until := e.r.now().Add(e.r.cfg.LeaseDuration)
	ctx, cancel := context.WithTimeout(e.ctx, e.r.cfg.HeartbeatInterval)
	err := e.r.cfg.Store.TaskHeartbeat(ctx, &db.TaskHeartbeatParams{Task: e.ref, LockedUntil: until, RunningSteps: e.runningSteps()})
	cancel()
	if err == nil {
		e.leaseUntil.Store(until.UnixNano())
	}
	if now = e.r.now(); err != nil || !e.holdsLease(now) {
		e.log.Info("the lease could not be renewed before a step started; dropping the run", "step", key, "error", err)
		e.cancel(errCauseLeaseLost)
		return now, false
	}
	e.log.Info("lease renewed; the step starts", "step", key, "lease_until", until)
	return now, true
}

// freshRun is the run a claim returned with its task because it never
// started (db.Claim.FreshRun): its instance and no steps; nil when the run
// must be loaded.
func freshRun(c *db.Claim) *db.RunState {
	if c.FreshRun == nil {
		return nil
	}
	return &db.RunState{Instance: c.FreshRun, Steps: map[string]*db.Step{}}
}

// execute runs a held task. state is the run to replay when the caller has
// it already (an eager start, or a claim of a run that never started: the
// instance, with no steps); nil loads it from the store. suspect says that
// the task is a suspect that holds the runner's quarantine (see
// quarantine): it is freed at the run's first checkpoint that makes
// progress, or when execute returns.
//
// When the end of a limited run handed its slot to an instance its
// release admitted (execution.handoff), execute runs that one next, in the
// same slot, as an eager start runs a created one: without a claim.
func (r *Runner) execute(task *db.Task, budget *atomic.Int64, state *db.RunState, suspect bool) {
	for {
		next := r.executeOne(task, budget, state, suspect)
		if next == nil {
			return
		}
		r.eager.Add(1)
		run := *next.Instance
		task, state, suspect = next.LeasedTask, &db.RunState{Instance: &run, Steps: map[string]*db.Step{}}, false
	}
}

// executeOne is execute of one task; it returns the instance the run's
// end handed its slot to, or nil.
func (r *Runner) executeOne(task *db.Task, budget *atomic.Int64, state *db.RunState, suspect bool) (next *db.CreateResult) {
	r.worker.running.Add(1)
	defer r.worker.running.Add(-1)
	leave := r.leaveQuarantine(suspect)
	if leave != nil {
		defer leave()
	}
	log := r.cfg.Logger.With("workflow", task.WorkflowName, "instance", task.InstanceID, "task", task.ID)
	ref := db.TaskRef{ID: task.ID, Version: task.Version}
	leaseUntil := r.now().Add(r.cfg.LeaseDuration)
	if task.LockedUntil != nil {
		leaseUntil = *task.LockedUntil
	}
	until := func() time.Time { return leaseUntil }
	wf, maxSteps, ok := wfcore.LookupRun(r.cfg.Registry, task.WorkflowName)
	if !ok {
		r.release(ref, r.now(), "workflow not registered on this runner", log, until, false)
		return
	}
	if state == nil {
		err := r.retryStore(r.execCtx, until, "loading run", log, func() error {
			var err error
			state, err = r.cfg.Store.RunLoad(r.execCtx, db.InstanceRef{WorkflowName: task.WorkflowName, ID: task.InstanceID})
			return err
		})
		if err != nil {
			log.Error("loading run failed", "error", err)
			r.release(ref, r.now().Add(r.cfg.PollInterval), fmt.Sprintf("loading run: %v", err), log, until, !errors.Is(err, db.ErrUnavailable))
			return
		}
	}
	if state.Instance.Status.Terminal() {
		return
	}
	e := &execution{
		r:        r,
		log:      log,
		ref:      ref,
		inst:     state.Instance,
		steps:    state.Steps,
		active:   map[string]bool{},
		counted:  map[string]bool{},
		maxSteps: cmp.Or(maxSteps, r.cfg.EngineLimits.MaxStepsPerRun),
		running:  map[string]db.RunningStep{},
		changed:  make(chan struct{}, 1),
		budget:   budget,

		leaseLosses: task.LeaseLosses,
		resetLosses: task.LeaseLosses > 0,
		lossLimit:   task.LeaseLosses >= r.cfg.MaxLeaseLosses,

		leaveQuarantine: leave,
	}
	defer func() { next = e.handoff }()
	if task.Kind == db.TaskKindResume {
		e.wokenAt = task.RunAt
	}
	e.leaseUntil.Store(leaseUntil.UnixNano())
	if e.steps == nil {
		e.steps = map[string]*db.Step{}
	}
	runCtx, span := r.startRunSpan(r.execCtx, task, e.inst)
	e.span = span
	defer e.endRunSpan()
	e.ctx, e.cancel = context.WithCancelCause(runCtx)
	defer e.cancel(errCauseFinished)
	e.stepCtx = e.ctx
	var cancelSteps context.CancelCauseFunc
	if e.inst.DeadlineAt != nil {
		e.stepCtx, cancelSteps = context.WithCancelCause(e.ctx)
		defer cancelSteps(nil)
	}
	e.cancelSteps = cancelSteps

	e.takeRequestAtStart()
	if e.inst.Status == dftype.StatusPaused || e.inst.PauseRequested {
		// Paused (or asked to pause) before any step ran: park it now.
		e.finish(&db.CheckpointParams{Outcome: db.OutcomePark, NextRunAt: r.now(), NextKind: db.TaskKindResume})
		return
	}
	if d := e.inst.DeadlineAt; d != nil && !r.now().Before(*d) {
		// Claimed at or past its deadline (its task was due at it at the
		// latest: see suspend): it ends here, whatever it waited for.
		e.finish(deadlineEnd(*d))
		return
	}
	if e.leaseLosses > r.cfg.MaxLeaseLosses {
		// It reached the limit before and still died before it could start
		// a step (in workflow code or replay): end it without running it.
		e.finish(&db.CheckpointParams{
			Outcome: db.OutcomeError, ErrorName: ErrorNameRunnerLost,
			ErrorMessage: fmt.Sprintf("the run lost its runner %d times", e.leaseLosses),
		})
		return
	}
	e.run(wf)
	return
}

func (e *execution) run(wf wfcore.Runnable) {
	hbStop := make(chan struct{})
	hbDone := make(chan struct{})
	go e.heartbeat(hbStop, hbDone)
	defer func() { close(hbStop); <-hbDone }()
	if d := e.inst.DeadlineAt; d != nil {
		t := e.r.cfg.Clock.AfterFunc(d.Sub(e.r.now()), func() {
			e.deadlineHit.Store(true)
			e.cancelSteps(workflow.ErrDeadlineExceeded)
			e.signal()
		})
		defer t.Stop()
	}

	done := make(chan runOutcome, 1)
	go func() {
		var o runOutcome
		defer func() {
			if p := recover(); p != nil {
				o = runOutcome{err: &panicError{value: p, stack: string(debug.Stack())}}
			}
			done <- o
		}()
		o.out, o.err = wf.Execute(e.ctx, wfcore.RawEvent{
			Payload:      e.inst.Params,
			Timestamp:    e.inst.CreatedAt,
			InstanceID:   e.inst.ID,
			WorkflowName: e.inst.WorkflowName,
			RunNumber:    e.inst.RunNumber,
			Metadata:     e.inst.Metadata,

			MaxPayloadBytes: e.r.cfg.EngineLimits.MaxPayloadBytes,
		}, &step{e: e})
	}()

	var result *runOutcome
	for {
		select {
		case o := <-done:
			result = &o
		case <-e.changed:
		case <-e.ctx.Done():
		}
		if cause := context.Cause(e.ctx); cause != nil {
			e.abandon(cause)
			return
		}
		if e.deadlineHit.Load() {
			// The deadline passed while the run ran: it ends now, and what
			// its steps still do is never committed.
			e.finish(deadlineEnd(*e.inst.DeadlineAt))
			if result == nil {
				e.awaitReturn(done)
			}
			return
		}
		e.mu.Lock()
		inflight, blocked, park := e.inflight, e.blocked, e.park
		e.mu.Unlock()
		switch {
		case result != nil && (!errors.Is(result.err, workflow.ErrSuspended) || (blocked == 0 && !park)):
			// Run returned on its own: the instance is complete or errored,
			// unless the compensations of its steps run first.
			if next := e.end(*result); next != nil {
				done, result = next, nil
				continue
			}
			return
		case (result != nil || blocked > 0 || park) && inflight == 0:
			if next := e.startRequestedSaga(); next != nil {
				// A caller asked for the compensation and the workflow code
				// stopped at its step boundaries.
				done, result = next, nil
				continue
			}
			// Every goroutine that can still make progress is parked in a
			// step: record the waits and release the task until the earliest.
			e.suspend()
			if result == nil {
				e.awaitReturn(done)
			}
			return
		}
	}
}

// suspend commits the recorded waits and releases the task until the
// earliest of them (or parks the instance when a pause was requested).
func (e *execution) suspend() {
	e.mu.Lock()
	waits, writes := e.waits, e.writes
	e.mu.Unlock()
	now := e.r.now()
	p := &db.CheckpointParams{Outcome: db.OutcomeSuspend, Steps: writes, NextRunAt: now, NextKind: db.TaskKindResume}
	for i, w := range waits {
		if i == 0 || w.at.Before(p.NextRunAt) {
			p.NextRunAt, p.NextKind = w.at, w.kind
		}
		if w.eventType != "" {
			p.WaitEventTypes = append(p.WaitEventTypes, w.eventType)
		}
	}
	if d := e.inst.DeadlineAt; d != nil && d.Before(p.NextRunAt) {
		// Due at the deadline at the latest, whatever it waits for: the
		// claim then ends it (see execute).
		p.NextRunAt, p.NextKind = *d, db.TaskKindWake
	}
	e.finish(p)
}

// deadlineEnd is the checkpoint that ends a run whose deadline passed.
func deadlineEnd(d time.Time) *db.CheckpointParams {
	return &db.CheckpointParams{
		Outcome: db.OutcomeError, ErrorName: workflow.ErrorNameDeadlineExceeded,
		ErrorMessage: fmt.Sprintf("the instance's deadline %s passed", d.UTC().Format(time.RFC3339Nano)),
	}
}

// complete records what Run returned.
func (e *execution) complete(out json.RawMessage, runErr error) {
	if runErr == nil {
		e.finish(&db.CheckpointParams{Outcome: db.OutcomeComplete, Output: out})
		return
	}
	if p := e.retryRun(runErr); p != nil {
		e.finish(p)
		return
	}
	e.finish(errorEnd(runErr))
}

// retryRun is the checkpoint of a workflow retry of a run that failed with
// runErr (WithWorkflowRetry), or nil when the run is not retried: the
// workflow has no retry policy, its attempts are spent, the error is
// non-retryable, or the next attempt would start at or past the deadline.
// The run suspends as a retry due after the policy's backoff; the failed
// steps' rows go, so the next attempt replays the completed steps and runs
// those again.
func (e *execution) retryRun(runErr error) *db.CheckpointParams {
	if errors.Is(runErr, workflow.ErrSuspended) {
		return nil
	}
	def, ok := e.r.cfg.Registry.Definition(e.inst.WorkflowName)
	if !ok {
		return nil
	}
	settings, err := def.SettingsOf(e.ctx, e.inst.Metadata)
	if err != nil {
		e.log.Warn("reading the workflow retry policy failed; the run is not retried", "error", err)
		return nil
	}
	if settings.Retry == nil {
		return nil
	}
	policy, name := *settings.Retry, workflow.ErrorName(runErr)
	attempt := max(e.inst.RunAttempt, 1)
	if workflow.IsNonRetryable(runErr) || policy.IsNonRetryable(name) || policy.Exhausted(attempt) {
		return nil
	}
	next := e.r.now().Add(policy.NextDelay(attempt, e.r.jitter()))
	if d := e.inst.DeadlineAt; d != nil && !next.Before(*d) {
		return nil
	}
	e.mu.Lock()
	var reset []string
	for key, st := range e.steps {
		if st.Status == db.StepStatusErrored {
			reset = append(reset, key)
		}
	}
	e.mu.Unlock()
	slices.Sort(reset)
	e.log.Warn("retrying the failed run", "run_attempt", attempt+1, "at", next, "error", name)
	return &db.CheckpointParams{
		Outcome: db.OutcomeSuspend, NextRunAt: next, NextKind: db.TaskKindRetry,
		RetryRun: &db.RunRetry{ResetSteps: reset, ErrorName: name, ErrorMessage: runErr.Error()},
	}
}

// finish commits the execution's last checkpoint and closes it.
func (e *execution) finish(p *db.CheckpointParams) {
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	res, err := e.checkpoint(p)
	if errors.Is(err, db.ErrInvalidData) {
		res, err = e.checkpoint(refusedEnd(p, err))
	}
	e.cancel(errCauseFinished)
	if err != nil {
		if !errors.Is(err, db.ErrLeaseLost) {
			// The store kept failing (or refused even the error that ends
			// the run): a lease loss, unless the runner is stopping and cut
			// the checkpoint short, or the database was unavailable, which
			// is no fault of the run's.
			storeFailed := !errors.Is(err, errRunnerStopped) && e.r.execCtx.Err() == nil && !errors.Is(err, db.ErrUnavailable)
			e.r.release(e.ref, e.r.now().Add(e.r.cfg.PollInterval), err.Error(), e.log, e.leaseDeadline, storeFailed)
		}
		return
	}
	e.r.countRun(p.Outcome)
	e.r.observeEnd(e.inst.WorkflowName, p)
	if p.Outcome == db.OutcomeError {
		e.log.Warn("instance errored", "run", e.inst.RunNumber, "error_name", p.ErrorName, "error", p.ErrorMessage)
	}
	e.traceOutcome(p)
	// The waiting instances the end of a limited run admitted have tasks
	// due now (those leased to this runner excepted): tell the runners.
	for _, name := range res.Admitted {
		e.r.wake(name)
	}
	if res.ParentWoken && p.NotifyParent != nil {
		e.r.wake(p.NotifyParent.WorkflowName)
	}
	switch {
	case res.Due:
		e.r.wake(e.inst.WorkflowName)
	case p.Outcome == db.OutcomeSuspend && res.Status == dftype.StatusWaiting:
		e.r.wakeAtTime(p.NextRunAt)
	}
	e.log.Debug("run checkpointed", "outcome", p.Outcome, "status", res.Status)
}

// abandon ends an execution whose context was cancelled from outside: a lost
// lease (nothing may be written), a store error or a shutdown (the task goes
// back to the queue).
func (e *execution) abandon(cause error) {
	e.commitMu.Lock()
	e.mu.Lock()
	wasClosed := e.closed
	e.closed = true
	e.mu.Unlock()
	e.commitMu.Unlock()
	if wasClosed || errors.Is(cause, errCauseFinished) {
		return
	}
	e.traceAbandon(cause)
	if errors.Is(cause, errCauseLeaseLost) {
		return
	}
	runAt := e.r.now()
	storeFailed := errors.Is(cause, errCauseStore)
	if storeFailed {
		runAt = runAt.Add(e.r.cfg.PollInterval)
	}
	// An outage of the database is no fault of the run's: its hand-back
	// counts no lease loss.
	e.r.release(e.ref, runAt, cause.Error(), e.log, e.leaseDeadline, storeFailed && !errors.Is(cause, db.ErrUnavailable))
}

// refusedEnd is the checkpoint that ends a run whose last checkpoint p the
// store refused (db.ErrInvalidData): the instance errors with what was
// refused, and nothing of p's is written.
func refusedEnd(p *db.CheckpointParams, err error) *db.CheckpointParams {
	what := "storing the run's last steps"
	switch p.Outcome {
	case db.OutcomeComplete:
		what = "storing the run's output"
	case db.OutcomeError:
		what = "storing the run's error"
	}
	return &db.CheckpointParams{
		Outcome: db.OutcomeError, ErrorName: ErrorNameStoreRefused,
		ErrorMessage: fmt.Sprintf("%s: %v", what, err),
	}
}

// awaitReturn gives the workflow code a grace period to return after its
// context was cancelled, so its goroutines don't outlive the execution.
func (e *execution) awaitReturn(done <-chan runOutcome) {
	t := time.NewTimer(e.r.cfg.ShutdownGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		e.log.Warn("workflow code did not return after its run was suspended; it should return step errors", "grace", e.r.cfg.ShutdownGrace)
	}
}

// checkpoint fills the fencing and identity fields and commits p. The caller
// holds commitMu and has checked that the execution is not closed. A
// transient store error is retried with backoff while the lease may still be
// held (retryStore), so an outage of the database delays the run by about as
// long as it lasts; a checkpoint that consumes an event is not, as it is
// not safe to repeat. A lost lease, or a store error that outlived the
// retries, cancels the execution. Data the store refuses
// (db.ErrInvalidData) is returned to the caller, which fails the step or
// the run, and cancels nothing.
func (e *execution) checkpoint(p *db.CheckpointParams) (*db.CheckpointResult, error) {
	now := e.r.now()
	p.Task = e.ref
	p.WorkflowName = e.inst.WorkflowName
	p.InstanceID = e.inst.ID
	p.RunNumber = e.inst.RunNumber
	p.Now = now
	p.RecordHooks = e.r.cfg.RecordHooks && p.Outcome == db.OutcomeSuspend
	p.ResetLeaseLosses = e.resetLosses
	// A limited instance gives its slots back in the checkpoint that ends
	// it; an unlimited one's checkpoint is unchanged (and batchable).
	p.ReleaseLimits = e.inst.Limited && (p.Outcome == db.OutcomeComplete || p.Outcome == db.OutcomeError)
	handoff := false
	if p.ReleaseLimits {
		// The instance its end admits may start at once in a free slot of
		// this runner, without a claim (the eager start of a release), or
		// with every other slot busy in this execution's own, which its
		// end frees.
		p.ReleaseLease = e.r.ReserveEager(e.inst.WorkflowName, 1)
		if p.ReleaseLease == nil {
			p.ReleaseLease = e.r.handoffLease(e.inst.WorkflowName)
			handoff = p.ReleaseLease != nil
		}
	}
	if p.Outcome == db.OutcomeComplete || p.Outcome == db.OutcomeError {
		// A child's end goes to its parent in the same transaction.
		p.NotifyParent = e.parentNotify(p)
	}
	cleanErrorText(p)
	// A checkpoint must not be cut short by the execution's own cancellation:
	// it either commits whole or not at all, so it runs on the runner's
	// context; only the retries stop when the execution is cancelled.
	var res *db.CheckpointResult
	commit := func() error {
		var err error
		if e.r.commits != nil && p.Batchable() {
			res, err = e.r.commits.commit(p)
		} else {
			res, err = e.r.cfg.Store.Checkpoint(context.WithoutCancel(e.ctx), p)
		}
		return err
	}
	var err error
	if p.ConsumeEvent != nil {
		// Not retried: a commit whose answer was lost would consume the
		// next event too. The run is given back instead, and its replay
		// finds what was committed.
		err = commit()
	} else {
		// Every other checkpoint is safe to repeat, because each of its
		// writes is idempotent: a step row is an upsert (StepUpsert, ON
		// CONFLICT DO UPDATE), written again as it was. A suspend, park or
		// end that committed before its answer was lost changed the task's
		// version, so its repetition is fenced out (ErrLeaseLost); an
		// OutcomeContinue leaves the version as it was, so its repetition
		// commits again: a write added to Continue checkpoints must be
		// idempotent too.
		err = e.r.retryStore(e.ctx, e.leaseDeadline, "checkpoint", e.log, commit)
	}
	if p.ReleaseLease != nil {
		var leased []db.CreateResult
		if err == nil && res != nil && res.Leased != nil {
			leased = []db.CreateResult{*res.Leased}
		}
		switch {
		case !handoff:
			e.r.StartEager(p.ReleaseLease, leased)
		case len(leased) > 0 && leased[0].LeasedTask != nil && leased[0].LeasedTask.LockOwner == e.r.cfg.ID:
			e.handoff = &leased[0]
		}
	}
	switch {
	case errors.Is(err, db.ErrLeaseLost):
		e.log.Info("lease lost; dropping the run", "version", e.ref.Version)
		e.cancel(errCauseLeaseLost)
		return nil, err
	case errors.Is(err, db.ErrInvalidData):
		e.log.Error("the store refused a checkpoint", "error", err)
		return nil, err
	case err != nil:
		e.log.Error("checkpoint failed", "error", err)
		e.cancel(fmt.Errorf("%w: %w", errCauseStore, err))
		return nil, err
	}
	if p.ResetLeaseLosses {
		// The run made progress: the step that lost its runners is past.
		e.resetLosses = false
		e.mu.Lock()
		e.lossLimit = false
		e.mu.Unlock()
		if e.leaveQuarantine != nil {
			e.leaveQuarantine()
		}
	}
	return res, nil
}

// cleanErrorText makes the error names and messages of p valid UTF-8
// without NUL characters, which a database's text columns may refuse: an
// error's text comes from any code, and must not keep its run from ending.
func cleanErrorText(p *db.CheckpointParams) {
	p.ErrorName, p.ErrorMessage = cleanText(p.ErrorName), cleanText(p.ErrorMessage)
	for i := range p.Steps {
		w := &p.Steps[i]
		w.ErrorName, w.ErrorMessage = cleanText(w.ErrorName), cleanText(w.ErrorMessage)
	}
}

func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func (e *execution) heartbeat(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := e.r.cfg.Clock.Ticker(e.r.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		err := e.r.retryStore(e.ctx, e.leaseDeadline, "heartbeat", e.log, func() error {
			until := e.r.now().Add(e.r.cfg.LeaseDuration)
			err := e.r.cfg.Store.TaskHeartbeat(e.ctx, &db.TaskHeartbeatParams{Task: e.ref, LockedUntil: until, RunningSteps: e.runningSteps()})
			if err == nil {
				e.leaseUntil.Store(until.UnixNano())
			}
			return err
		})
		switch {
		case errors.Is(err, db.ErrLeaseLost):
			e.mu.Lock()
			closed := e.closed
			e.mu.Unlock()
			if !closed {
				e.log.Info("lease lost during heartbeat; dropping the run")
				e.cancel(errCauseLeaseLost)
			}
			return
		case err != nil && e.ctx.Err() == nil:
			e.log.Warn("heartbeat failed", "error", err)
		}
	}
}

// runningSteps is what the heartbeat reports as running: the attempts in
// progress, by key.
func (e *execution) runningSteps() []db.RunningStep {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.running) == 0 {
		return nil
	}
	out := make([]db.RunningStep, 0, len(e.running))
	for _, st := range e.running {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b db.RunningStep) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func (e *execution) signal() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// release gives a claimed task back to the queue, due at runAt. A transient
// store error is retried until the lease could have expired (after which
// any runner claims the task anyway) or, once the runner is stopping, for at
// most ShutdownGrace. storeFailed counts the hand-back as a lease loss (the
// run ends without a checkpoint because the store kept failing), so that a
// store error that is not transient after all cannot make the run loop
// forever: it meets MaxLeaseLosses like a crash. Callers leave it unset
// when the database was unavailable (db.ErrUnavailable): an outage is no
// fault of the run's, and must not count it down towards MaxLeaseLosses.
// It reports whether the task went back, or was no longer held (another
// runner took it over, or a write of its holder ended it).
func (r *Runner) release(ref db.TaskRef, runAt time.Time, reason string, log *slog.Logger, until func() time.Time, storeFailed bool) bool {
	ctx := context.Background()
	if r.execCtx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.ShutdownGrace)
		defer cancel()
	}
	err := r.retryStore(ctx, until, "releasing task", log, func() error {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return r.cfg.Store.TaskRelease(callCtx, &db.TaskReleaseParams{Task: ref, RunAt: runAt, LastError: reason, CountLeaseLoss: storeFailed})
	})
	if err != nil && !errors.Is(err, db.ErrLeaseLost) {
		log.Warn("releasing task failed; it is retried when its lease expires", "error", err)
		return false
	}
	return true
}

// panicError is what a panic in workflow code or a step callback becomes.
type panicError struct {
	value any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

func (p *panicError) ErrorName() string { return "PanicError" }
