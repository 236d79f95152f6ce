package runner

import (
	"github.com/duraflow/duraflow/db"
)

// ReserveEager reserves up to n of the runner's free execution slots for
// instances of workflowName that the caller is about to create (eager start:
// see client.EagerStarter). It never blocks. It returns the lease to create
// them with, whose Max is the number of slots reserved, or nil when it
// reserved none: eager start is disabled, the workflow is not registered on
// this runner, the runner is not started or is stopping, or every slot is
// busy. Eager reservations and claims share the same MaxConcurrency slots.
//
// Every non-nil lease must be handed back to StartEager exactly once.
func (r *Runner) ReserveEager(workflowName string, n int) *db.CreateLease {
	if r.cfg.DisableEagerStart || n <= 0 {
		return nil
	}
	if _, ok := r.cfg.Registry.Lookup(workflowName); !ok {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.stopping {
		return nil
	}
	granted := r.takeSlots(n)
	if granted == 0 {
		return nil
	}
	// Counted as active under mu, so a Stop that begins after this waits for
	// the executions the reservation starts.
	r.active.Add(granted)
	return &db.CreateLease{Owner: r.cfg.ID, LockedUntil: r.now().Add(r.cfg.LeaseDuration), Max: granted}
}

// StartEager executes, each in a slot lease reserved, the created instances
// whose first task the create leased to this runner (db.Instance.LeasedTask),
// without claiming them or loading their run, and frees the slots that were
// not used. created is nil when the create failed. A nil lease does nothing.
func (r *Runner) StartEager(lease *db.CreateLease, created []*db.Instance) {
	if lease == nil || lease.Max <= 0 {
		return
	}
	used := 0
	for _, inst := range created {
		task := inst.LeasedTask
		if used == lease.Max || task == nil || task.LockOwner != r.cfg.ID {
			continue
		}
		used++
		r.eager.Add(1)
		run := *inst
		run.LeasedTask = nil
		state := &db.RunState{Instance: &run, Steps: map[string]*db.Step{}}
		go func() {
			defer r.executionDone()
			r.execute(task, nil, state)
		}()
	}
	if unused := lease.Max - used; unused > 0 {
		r.giveSlots(unused)
		r.active.Add(-unused)
		// A slot came free: queued work may wait for it.
		r.Notify()
	}
}
