package runner

import (
	"github.com/duraflow/duraflow/db"
)

// ReserveEager reserves up to n of the runner's free execution slots for
// instances of workflowName that the caller is about to create (eager start:
// see client.EagerStarter). It never blocks. It returns the lease to create
// them with, whose Max is the number of slots reserved, or nil when it
// reserved none: eager start is disabled, the workflow is not registered on
// this runner (or not one of Config.Workflows), the runner is not started,
// is stopping or is draining, or every slot is busy. Eager reservations and
// claims share the same MaxConcurrency slots.
//
// The lease's Queues are the runner's (Config.Queues): the caller creates an
// instance of another queue without it, and a send leases a woken task of
// another queue to no one.
//
// Every non-nil lease must be handed back to StartEager exactly once.
func (r *Runner) ReserveEager(workflowName string, n int) *db.CreateLease {
	if n <= 0 {
		return nil
	}
	return r.eagerLease(workflowName, func() int {
		granted := r.takeSlots(n)
		// Counted as active under mu, so a Stop that begins after this
		// waits for the executions the reservation starts.
		r.active.Add(granted)
		return granted
	})
}

// handoffLease is the lease a limited run's end offers its release when
// ReserveEager found no free slot: the slot of the execution that ends,
// which runs the instance the release starts with it next (see
// execution.handoff) instead of freeing the slot, so the runner stays
// within MaxConcurrency. It reserves nothing, and is nil when an eager
// start could not be made anyway (disabled, a workflow this runner does
// not run, a runner not started, stopping or draining).
func (r *Runner) handoffLease(workflowName string) *db.CreateLease {
	return r.eagerLease(workflowName, func() int { return 1 })
}

// eagerLease is this runner's lease for an eager start of instances of
// workflowName in the number of slots slots returns (called under mu),
// or nil when that is none or the runner cannot start one now: eager
// start is disabled, the runner does not run the workflow, or it is not
// started, is stopping or is draining.
func (r *Runner) eagerLease(workflowName string, slots func() int) *db.CreateLease {
	if r.cfg.DisableEagerStart || !r.serves(workflowName) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.stopping || r.worker.draining.Load() {
		return nil
	}
	n := slots()
	if n == 0 {
		return nil
	}
	return &db.CreateLease{Owner: r.cfg.ID, LockedUntil: r.now().Add(r.cfg.LeaseDuration), Max: n, Queues: r.claimQueues()}
}

// StartEager executes, each in a slot lease reserved, the created instances
// whose first task the create leased to this runner
// (db.CreateResult.LeasedTask), without claiming them or loading their run,
// and frees the slots that were not used. created is nil when the create
// failed. A nil lease does nothing.
func (r *Runner) StartEager(lease *db.CreateLease, created []db.CreateResult) {
	if lease == nil || lease.Max <= 0 {
		return
	}
	used := 0
	for _, c := range created {
		task := c.LeasedTask
		if used == lease.Max || task == nil || task.LockOwner != r.cfg.ID {
			continue
		}
		used++
		r.eager.Add(1)
		run := *c.Instance
		state := &db.RunState{Instance: &run, Steps: map[string]*db.Step{}}
		go func() {
			defer r.executionDone()
			r.execute(task, nil, state, false)
		}()
	}
	r.unreserve(lease.Max - used)
}

// ResumeEager executes, in a slot lease reserved (ReserveEager with n = 1),
// the run whose task an event sent in this process leased to this runner
// (db.EventSendResult.LeasedTask): the eager resume, without a claim. It
// loads the run first, as after a claim. task is nil when the send woke
// nothing, leased nothing or failed; then the slot is freed. A nil lease
// does nothing.
func (r *Runner) ResumeEager(lease *db.CreateLease, task *db.Task) {
	if lease == nil || lease.Max <= 0 {
		return
	}
	used := 0
	if task != nil && task.LockOwner == r.cfg.ID {
		if task.LeaseLosses >= db.SuspectLeaseLosses {
			// A suspect (its holders died twice in a row, the last while
			// the run was woken, and the send woke it again): it goes
			// through the quarantine as a claimed one does.
			if _, back := r.quarantine([]db.Claim{{Task: task}}); len(back) > 0 {
				r.active.Add(1) // before unreserve, so Stop's wait covers it
				r.unreserve(lease.Max)
				go func() {
					defer r.active.Done()
					r.handBack(back)
				}()
				return
			}
		}
		used = 1
		r.eager.Add(1)
		go func() {
			defer r.executionDone()
			r.execute(task, nil, nil, task.LeaseLosses >= db.SuspectLeaseLosses)
		}()
	}
	r.unreserve(lease.Max - used)
}

// unreserve frees n slots that an eager reservation did not use. Like
// executionDone it does not wake the loop: a loop that claimed while the
// slots were reserved and filled every other slot waits for one to free.
func (r *Runner) unreserve(n int) {
	if n <= 0 {
		return
	}
	r.giveSlots(n)
	r.active.Add(-n)
}
