package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/internal/polltimer"
	"github.com/duraflow/duraflow/internal/tracing"
)

// Runner claims due tasks and executes workflow code durably. It is safe to
// run many runners, in one process or many, against one database.
type Runner struct {
	cfg *Config
	// tracer traces run passes and step attempts; nil when tracing is off.
	tracer trace.Tracer

	wakeCh chan struct{}
	// slots bounds concurrent executions.
	slots chan struct{}

	mu       sync.Mutex
	started  bool
	starting bool
	stopping bool
	stopLoop context.CancelFunc
	loopDone chan struct{}
	// execCtx is the parent of every execution; cancelling it makes running
	// executions release their tasks.
	execCtx    context.Context
	execCancel context.CancelFunc
	active     sync.WaitGroup

	// timerMu guards the one timer that wakes the loop when the earliest
	// suspension this runner committed comes due, so a sleep shorter than the
	// poll interval is not late by up to a poll.
	timerMu   sync.Mutex
	wakeTimer *clock.Timer
	wakeAt    time.Time

	// observing is false when the Observer is the no-op one: the hot path
	// then does not even read the clock for it.
	observing bool

	polls atomic.Int64
	// claimed counts the tasks the runner claimed; eager counts the
	// instances it started from an eager create (see ReserveEager).
	claimed atomic.Int64
	eager   atomic.Int64
	// suspect is set while the runner executes a suspect task: its
	// quarantine, which holds at most one (see quarantine).
	suspect atomic.Bool

	commits *groupCommit

	// worker is the runner's worker row and drain (see worker.go), under mu.
	worker workerState
}

// New returns a runner for cfg. It does nothing until Start or RunDue.
func New(cfg *Config) (*Runner, error) {
	if cfg == nil {
		return nil, errors.New("runner: nil Config")
	}
	c := cfg.WithDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	execCtx, execCancel := context.WithCancel(context.Background())
	r := &Runner{
		cfg:        c,
		wakeCh:     make(chan struct{}, 1),
		slots:      make(chan struct{}, c.MaxConcurrency),
		execCtx:    execCtx,
		execCancel: execCancel,
		worker: workerState{
			drained: make(chan struct{}),
			outage:  backoff.NewOutage(c.Logger.With("runner", c.ID), "registering and heartbeating the worker", backoff.Loop),
		},
	}
	// A runner that is never started has no worker row a reaper could mark
	// offline: only its leases bound its step starts.
	r.worker.aliveUntil.Store(math.MaxInt64)
	if c.TracerProvider != nil {
		r.tracer = c.TracerProvider.Tracer(tracing.ScopeName)
	}
	_, nop := c.Observer.(nopObserver)
	r.observing = !nop
	// The group commit is a capability of the store: without it every
	// checkpoint commits on its own through Store.Checkpoint.
	if batcher, ok := c.Store.(db.BatchCheckpointer); ok && c.GroupCommitMax > 1 {
		r.commits = newGroupCommit(batcher, c.GroupCommitMax, c.GroupCommitWorkers, execCtx.Done())
	}
	return r, nil
}

// ID returns the runner's lock-owner id.
func (r *Runner) ID() string { return r.cfg.ID }

// GroupCommitStats returns how many group commits the runner made and how
// many step checkpoints they held; their ratio is the mean batch size.
func (r *Runner) GroupCommitStats() (commits, checkpoints int64) {
	if r.commits == nil {
		return 0, 0
	}
	return r.commits.commits.Load(), r.commits.checkpoints.Load()
}

// Polls returns how many times the loop has looked for due work, for tests
// and metrics.
func (r *Runner) Polls() int64 { return r.polls.Load() }

// Claimed returns how many tasks the runner has claimed from the queue, for
// tests and metrics. Eager starts are not claims (see EagerStarts).
func (r *Runner) Claimed() int64 { return r.claimed.Load() }

// EagerStarts returns how many instances the runner started from an eager
// create, without claiming them (see ReserveEager).
func (r *Runner) EagerStarts() int64 { return r.eager.Load() }

// Notify wakes the runner's loop so it claims due work at once instead of at
// its next poll. It never blocks.
func (r *Runner) Notify() {
	select {
	case r.wakeCh <- struct{}{}:
	default:
	}
}

// Start registers the runner as a worker (see "Worker registry" in the
// package documentation) and starts the claim loop and the worker's
// heartbeat in the background. The registration, one round trip bounded by
// ten seconds, happens before Start returns and before any claim or eager
// start: it releases what the runner's ID held before this process started.
// A registration that fails is logged and tried again at the next worker
// heartbeat. Start returns an error if the runner was started already.
func (r *Runner) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started || r.starting {
		r.mu.Unlock()
		return errors.New("runner: already started")
	}
	if r.stopping {
		r.mu.Unlock()
		return errors.New("runner: stopped")
	}
	r.starting = true
	// From now on a reaper may release what the worker holds: no step
	// starts until a registration or heartbeat says how long it may not.
	r.worker.aliveUntil.Store(0)
	r.mu.Unlock()

	r.register(ctx, true)

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return errors.New("runner: stopped")
	}
	r.started = true
	loopCtx, cancel := context.WithCancel(ctx)
	r.stopLoop = cancel
	r.loopDone = make(chan struct{})
	r.startWorker(ctx)
	go r.loop(loopCtx)
	return nil
}

// Stop shuts the runner down gracefully: it stops claiming, waits for the
// executions it holds to finish or suspend until ctx is done, and then
// cancels the rest, which give their tasks back to the queue so another
// runner takes them at once. Last it deregisters its worker (see Drain,
// which is Stop with the worker marked draining first and a grace period).
func (r *Runner) Stop(ctx context.Context) error {
	err := r.stopExecutions(ctx)
	r.stopWorker()
	return err
}

func (r *Runner) stopExecutions(ctx context.Context) error {
	r.mu.Lock()
	stop, loopDone := r.stopLoop, r.loopDone
	// From here on no eager start is reserved: every reservation made before
	// is counted in active, so the wait below covers it.
	r.stopping = true
	r.mu.Unlock()
	if stop != nil {
		stop()
		<-loopDone
	}
	finished := make(chan struct{})
	go func() { r.active.Wait(); close(finished) }()
	select {
	case <-finished:
		r.execCancel()
		return nil
	case <-ctx.Done():
	}
	r.execCancel()
	<-finished
	return ctx.Err()
}

// loop claims due work until ctx is done: again as soon as a slot frees
// after a claim that filled every slot, otherwise at a wake-up or the next
// poll. While the database is unavailable it claims again with backoff
// (backoff.Loop, in real time) instead of at the next poll, so work goes
// on within moments of the database's return, and logs the outage once.
func (r *Runner) loop(ctx context.Context) {
	defer close(r.loopDone)
	poll := r.cfg.Clock.Timer(r.cfg.PollInterval)
	defer poll.Stop()
	outage := backoff.NewOutage(r.cfg.Logger.With("runner", r.cfg.ID), "claiming tasks", backoff.Loop)
	for {
		full, err := r.claimAndStart(ctx)
		r.polls.Add(1)
		if ctx.Err() != nil {
			return
		}
		if unavailable, wait := outage.Round(err); unavailable {
			select {
			case <-ctx.Done():
				return
			case <-r.wakeCh:
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			r.cfg.Logger.Warn("claiming tasks failed", "runner", r.cfg.ID, "error", err)
		}
		if full && err == nil {
			// Every free slot was filled: there may be more due work, so
			// look again as soon as a slot frees up.
			select {
			case <-ctx.Done():
				return
			case r.slots <- struct{}{}:
				<-r.slots
				continue
			}
		}
		polltimer.Reset(poll, r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-r.wakeCh:
		case <-poll.C:
		}
	}
}

// claimAndStart takes every free slot, claims as many tasks, starts
// executing them and gives back the slots it found no task for. It reports
// whether it filled every free slot. Slots are taken before the claim so
// that eager starts (ReserveEager), which take them too, can never push the
// runner past MaxConcurrency or make a claimed task wait for a slot.
func (r *Runner) claimAndStart(ctx context.Context) (bool, error) {
	free := r.takeSlots(cap(r.slots))
	if free == 0 {
		return true, nil
	}
	tasks, err := r.claim(ctx, free)
	if err != nil {
		r.giveSlots(free)
		return false, err
	}
	run, back := r.quarantine(tasks)
	r.giveSlots(free - len(run))
	if len(back) > 0 && !slices.ContainsFunc(run, func(c db.Claim) bool { return c.Task.LeaseLosses >= db.SuspectLeaseLosses }) {
		// No suspect of this claim runs here (the quarantine was taken
		// meanwhile): hand them back in the background, so that a store
		// that fails cannot hold up the loop (or Stop) while it retries.
		r.active.Add(1)
		go func() {
			defer r.active.Done()
			r.handBack(back)
		}()
	}
	for _, c := range run {
		r.active.Add(1)
		go func(c db.Claim) {
			defer r.executionDone()
			suspect := c.Task.LeaseLosses >= db.SuspectLeaseLosses
			if suspect && len(back) > 0 && !r.handBack(back) {
				// The others could not be handed back: this one does not
				// run beside them either (see handBack).
				r.handBack([]*db.Task{c.Task})
				r.leaveQuarantine(true)()
				return
			}
			r.execute(c.Task, nil, freshRun(&c), suspect)
		}(c)
	}
	return len(tasks) == free, nil
}

// quarantine splits claimed tasks into those to run and those to hand
// back, so that the runner never runs two suspect tasks at once. A suspect
// task (db.Task.LeaseLosses >= db.SuspectLeaseLosses) is one that lost its
// holder twice in a row without a checkpoint: its process died again, most
// likely killed by one of the suspects. (One loss is what every crash does
// to all the tasks of the process, so those run side by side at once.) Run
// side by side, the suspects that are innocent would die with the crasher
// again and again, and reach MaxLeaseLosses with it. Run alone among
// suspects, each innocent makes progress, which resets its count, while
// the count of the one that kills its process climbs alone.
//
// The runner keeps a suspect only when it runs none, and holds the
// quarantine until the suspect's first checkpoint that makes progress, or
// its end; meanwhile its claims exclude suspects
// (db.TaskClaimParams.ExcludeSuspects). So only a claim made with the
// quarantine free can return several suspects (the expired leases of a
// process that died): it keeps the first and hands the others back. Tasks
// that are not suspect are never held back, and a claim without suspects
// costs one comparison per task.
func (r *Runner) quarantine(tasks []db.Claim) (run []db.Claim, back []*db.Task) {
	first := -1
	for i := range tasks {
		if tasks[i].Task.LeaseLosses >= db.SuspectLeaseLosses {
			first = i
			break
		}
	}
	if first < 0 {
		return tasks, nil
	}
	run = append(make([]db.Claim, 0, len(tasks)), tasks[:first]...)
	for _, c := range tasks[first:] {
		if c.Task.LeaseLosses >= db.SuspectLeaseLosses && !r.suspect.CompareAndSwap(false, true) {
			back = append(back, c.Task)
			continue
		}
		run = append(run, c)
	}
	return run, back
}

// handBack gives suspect tasks that the quarantine kept from running back
// to the queue, due at once, without counting a lease loss (they are
// pending now, so the next claim counts none either). Other runners take
// them at once; this one excludes them from its claims until its own
// suspect leaves the quarantine. The suspect the runner keeps starts only
// once handBack has returned: should it kill the process, a suspect still
// held would die beside it, a lease loss the quarantine is there to spare
// it. handBack reports whether every task went back (or had gone already);
// when one could not, the caller gives its own suspect back too.
func (r *Runner) handBack(tasks []*db.Task) bool {
	runAt := r.now()
	ok := true
	for _, t := range tasks {
		log := r.cfg.Logger.With("workflow", t.WorkflowName, "instance", t.InstanceID, "task", t.ID)
		log.Debug("handing back a suspect task: this runner already runs one", "lease_losses", t.LeaseLosses)
		until := func() time.Time { return r.now() }
		if t.LockedUntil != nil {
			lockedUntil := *t.LockedUntil
			until = func() time.Time { return lockedUntil }
		}
		if !r.release(db.TaskRef{ID: t.ID, Version: t.Version}, runAt, "quarantined: its runner already ran another suspect task", log, until, false) {
			ok = false
		}
	}
	return ok
}

// leaveQuarantine returns a function that frees the quarantine held by the
// execution of a suspect task, once however often it is called, and wakes
// the loop to claim the next suspect; nil when suspect is false.
func (r *Runner) leaveQuarantine(suspect bool) func() {
	if !suspect {
		return nil
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.suspect.Store(false)
			r.Notify()
		})
	}
}

// takeSlots takes up to n free execution slots without waiting and returns
// how many it took.
func (r *Runner) takeSlots(n int) int {
	for i := range n {
		select {
		case r.slots <- struct{}{}:
		default:
			return i
		}
	}
	return n
}

// giveSlots gives back n slots taken by takeSlots.
func (r *Runner) giveSlots(n int) {
	for range n {
		<-r.slots
	}
}

// executionDone ends an execution started in the background: it frees its
// slot. It does not wake the loop: a loop whose last claim filled every slot
// it took waits for a slot to free and claims at once, and one whose claim
// left slots empty found no more due work, which the wake that makes work
// due (or the poll) reports. Waking it here would cost a claim round trip
// per finished execution that finds nothing, while holding every free slot,
// so that an eager start or resume in that window finds none.
func (r *Runner) executionDone() {
	<-r.slots
	r.active.Done()
}

func (r *Runner) claim(ctx context.Context, max int) ([]db.Claim, error) {
	names := r.servedNames()
	if len(names) == 0 || max <= 0 || r.Draining() {
		return nil, nil
	}
	now := r.now()
	var start time.Time
	if r.observing {
		start = r.cfg.Clock.Now()
	}
	tasks, err := r.cfg.Store.TaskClaim(ctx, &db.TaskClaimParams{
		Owner:         r.cfg.ID,
		WorkflowNames: names,
		Queues:        r.claimQueues(),
		Max:           max,
		Now:           now,
		LockedUntil:   now.Add(r.cfg.LeaseDuration),
		// A runner that runs a suspect takes no other (see quarantine).
		ExcludeSuspects: r.suspect.Load(),
	})
	if err != nil {
		return nil, fmt.Errorf("claiming tasks: %w", err)
	}
	r.claimed.Add(int64(len(tasks)))
	if r.observing {
		r.cfg.Observer.ObserveClaim(r.cfg.Clock.Since(start), len(tasks))
	}
	return tasks, nil
}

// RunDue claims up to max due tasks, executes them and waits until each has
// completed, suspended or failed. It returns how many tasks it ran. The test
// harness drives a runner through it; it may be called while the background
// loop runs.
func (r *Runner) RunDue(ctx context.Context, max int) (int, error) {
	return r.RunDueLimited(ctx, max, 0)
}

// RunDueLimited is RunDue with a budget of new step attempts shared by the
// tasks it runs: once maxSteps attempts have started, every run suspends at
// its next step boundary with its task due at once, for the next call to pick
// up. maxSteps 0 means no budget. The HTTP tick drives a runner through it, so
// one tick stays within a platform's request time limit.
func (r *Runner) RunDueLimited(ctx context.Context, maxInstances, maxSteps int) (int, error) {
	if maxInstances <= 0 {
		maxInstances = r.cfg.MaxConcurrency
	}
	tasks, err := r.claim(ctx, maxInstances)
	if err != nil {
		return 0, err
	}
	tasks, back := r.quarantine(tasks)
	if len(back) > 0 && !r.handBack(back) {
		// The suspect kept must not run beside those still held.
		for i, c := range tasks {
			if c.Task.LeaseLosses >= db.SuspectLeaseLosses {
				r.handBack([]*db.Task{c.Task})
				r.leaveQuarantine(true)()
				tasks = slices.Delete(tasks, i, i+1)
				break
			}
		}
	}
	var budget *atomic.Int64
	if maxSteps > 0 {
		budget = new(atomic.Int64)
		budget.Store(int64(maxSteps))
	}
	var wg sync.WaitGroup
	for _, c := range tasks {
		wg.Add(1)
		r.active.Add(1)
		go func(c db.Claim) {
			defer wg.Done()
			defer r.active.Done()
			r.execute(c.Task, budget, freshRun(&c), c.Task.LeaseLosses >= db.SuspectLeaseLosses)
		}(c)
	}
	wg.Wait()
	return len(tasks), nil
}

// wakeAtTime arranges for the loop to be woken at t, unless an earlier wake is
// already arranged.
func (r *Runner) wakeAtTime(t time.Time) {
	r.timerMu.Lock()
	defer r.timerMu.Unlock()
	if r.wakeTimer != nil && !r.wakeAt.After(t) {
		return
	}
	if r.wakeTimer != nil {
		r.wakeTimer.Stop()
	}
	r.wakeAt = t
	r.wakeTimer = r.cfg.Clock.AfterFunc(r.cfg.Clock.Until(t), func() {
		r.timerMu.Lock()
		if r.wakeAt.Equal(t) {
			r.wakeTimer = nil
		}
		r.timerMu.Unlock()
		r.Notify()
	})
}

// jitter draws the random number a retry's jitter spreads its wait by
// (workflow.RetryPolicy.NextDelay): Config.JitterFunc, or a uniform draw.
func (r *Runner) jitter() float64 {
	if r.cfg.JitterFunc != nil {
		return r.cfg.JitterFunc()
	}
	return rand.Float64()
}

func (r *Runner) now() time.Time {
	return r.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
}

func (r *Runner) wake(workflowName string) {
	r.Notify()
	r.cfg.WakeFunc(workflowName)
}
