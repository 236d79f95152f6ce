// Package admission admits limited instances and gives their slots back,
// written once over Tx, the few statements each backend offers inside the
// transaction of the change (create, terminal checkpoint, management
// change). The decisions are transition.Admit's; this package orders the
// reads and writes: every transaction locks all the limit rows it needs in
// one statement, in scope order, so two of them never deadlock on limit
// rows, and a release locks the instances it would admit with SKIP LOCKED
// before any limit row, so it never waits on an instance while it holds
// limit rows. It must not know which backend runs it.
package admission

import (
	"context"
	"slices"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/transition"
)

// Member states.
const (
	StateWaiting  = "waiting"
	StateHolding  = "holding"
	StateReleased = "released"
)

// Member is one limited scope of an instance and where the instance stands in it.
type Member struct {
	Ref   db.InstanceRef
	Scope string
	State string
}

// MemberWrite is the state to write for one scope of an instance.
type MemberWrite struct {
	Scope   string
	State   string
	Blocked bool
	// RateUntil is when a rate limit lets the admitted instance start, when later than now.
	RateUntil *time.Time
}

// Tx is what a backend offers inside one write transaction.
type Tx interface {
	// Ensure creates the rows of scopes that do not exist, without limits
	// and without locking the rows that do.
	Ensure(ctx context.Context, scopes []string, now time.Time) error
	// Define writes the limits of specs (those with Define set) on their
	// rows, which the transaction holds locked.
	Define(ctx context.Context, specs []db.LimitSpec, now time.Time) error
	// Lock locks and returns the rows of scopes, in scope order.
	Lock(ctx context.Context, scopes []string) ([]*db.LimitRow, error)
	// LockSkip locks and returns the rows of scopes that no other
	// transaction holds, in scope order, without waiting.
	LockSkip(ctx context.Context, scopes []string) ([]*db.LimitRow, error)
	// Update writes back Running and RateWindow of rows.
	Update(ctx context.Context, rows []*db.LimitRow) error
	// Members returns the members of the instances, those of one instance
	// together.
	Members(ctx context.Context, refs []db.InstanceRef) ([]Member, error)
	// WriteMembers upserts an instance's members.
	WriteMembers(ctx context.Context, ref db.InstanceRef, ws []MemberWrite, now time.Time) error
	// WriteMembersMany upserts the members of several instances (of one
	// workflow or more).
	WriteMembersMany(ctx context.Context, ws []InstanceWrites, now time.Time) error
	// SetLimited marks new instances of one workflow limited.
	SetLimited(ctx context.Context, refs []db.InstanceRef) error
	// Waiting returns up to max of the first waiting instances of each
	// scope, highest priority then oldest first (in that order across the
	// scopes too).
	Waiting(ctx context.Context, scopes []string, max int) ([]db.InstanceRef, error)
	// LockWaiters locks the instances no other transaction holds and
	// returns those.
	LockWaiters(ctx context.Context, refs []db.InstanceRef) ([]db.InstanceRef, error)
	// TaskAdmit gives an admitted instance its run task, due at runAt
	// (or moves the run-at of the task it has), and wakes runners when it
	// is due now.
	TaskAdmit(ctx context.Context, ref db.InstanceRef, runAt time.Time, due bool) error
	// TaskAdmitLeased starts an admitted instance at once with its task
	// leased (see db.CheckpointParams.ReleaseLease), when the instance is
	// queued and its run never started; nil, nil otherwise (the caller
	// then gives it a task with TaskAdmit).
	TaskAdmitLeased(ctx context.Context, ref db.InstanceRef, lease *db.CreateLease, now time.Time) (*db.CreateResult, error)
	// TaskDelete deletes an instance's task.
	TaskDelete(ctx context.Context, ref db.InstanceRef) error
}

// InstanceWrites are the member writes of one instance.
type InstanceWrites struct {
	Ref    db.InstanceRef
	Writes []MemberWrite
}

// Item is one new instance to admit and its limited scopes.
type Item struct {
	Ref   db.InstanceRef
	Specs []db.LimitSpec
}

// Result is what admitting an instance decided.
type Result struct {
	Admitted bool
	// RunAt is when the admitted instance's task is due.
	RunAt time.Time
	// Waiting says what holds the instance back, as InstanceGet reports
	// it: the concurrency limit with no free slot when it was not
	// admitted, the rate limit that put RunAt after now when it was; nil
	// when it may start now. The instance starts waiting in the caller's
	// transaction, which logs it (transition.LimitWaitEvent).
	Waiting *db.WaitingFor
}

// Create admits a new instance under specs: it writes the scopes' rows,
// locks them, and records the instance as holding (the caller then gives
// it its task, due at Result.RunAt) or waiting (the caller gives it none).
func Create(ctx context.Context, tx Tx, ref db.InstanceRef, specs []db.LimitSpec, now time.Time) (Result, error) {
	res, err := CreateMany(ctx, tx, []Item{{Ref: ref, Specs: specs}}, now)
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// CreateMany admits new instances of one workflow in order, as Create
// does one, with a fixed number of statements whatever their number: the
// rows of every scope of the batch are created first without a lock, then
// locked in scope order in one statement, and only then are a
// definition's limits written on them, so a create never holds one limit
// row while it waits for another out of order.
func CreateMany(ctx context.Context, tx Tx, items []Item, now time.Time) ([]Result, error) {
	var all []string
	for _, it := range items {
		for _, s := range it.Specs {
			all = append(all, s.Scope)
		}
	}
	all = sortedUnique(all)
	if err := tx.Ensure(ctx, all, now); err != nil {
		return nil, err
	}
	rows, err := tx.Lock(ctx, all)
	if err != nil {
		return nil, err
	}
	byScope := make(map[string]*db.LimitRow, len(rows))
	for _, r := range rows {
		byScope[r.Scope] = r
	}
	var defs []db.LimitSpec
	for _, it := range items {
		for _, s := range it.Specs {
			r := byScope[s.Scope]
			period := s.RatePeriod.Truncate(time.Millisecond)
			if !s.Define || r == nil || (r.MaxRunning == s.MaxRunning && r.RateLimit == s.RateLimit && r.RatePeriod == period) {
				continue
			}
			r.MaxRunning, r.RateLimit, r.RatePeriod = s.MaxRunning, s.RateLimit, period
			defs = append(defs, s)
		}
	}
	if len(defs) > 0 {
		if err := tx.Define(ctx, defs, now); err != nil {
			return nil, err
		}
	}
	refs := make([]db.InstanceRef, len(items))
	for i := range items {
		refs[i] = items[i].Ref
	}
	if err := tx.SetLimited(ctx, refs); err != nil {
		return nil, err
	}
	results := make([]Result, len(items))
	writes := make([]InstanceWrites, len(items))
	for i, it := range items {
		scopes := make([]string, len(it.Specs))
		for j := range it.Specs {
			scopes[j] = it.Specs[j].Scope
		}
		scopes = sortedUnique(scopes)
		mine := make([]*db.LimitRow, 0, len(scopes))
		for _, s := range scopes {
			mine = append(mine, byScope[s])
		}
		plan := transition.Admit(mine, now)
		results[i] = Result{Admitted: plan.Admitted, RunAt: plan.RunAt, Waiting: waitingFor(mine, &plan, now)}
		writes[i] = InstanceWrites{Ref: it.Ref, Writes: memberWrites(mine, &plan, now)}
	}
	if err := tx.WriteMembersMany(ctx, writes, now); err != nil {
		return nil, err
	}
	if err := tx.Update(ctx, rows); err != nil {
		return nil, err
	}
	return results, nil
}

// admit locks the rows of scopes, decides, and writes the decision.
func admit(ctx context.Context, tx Tx, ref db.InstanceRef, scopes []string, now time.Time) (Result, error) {
	rows, err := tx.Lock(ctx, sortedUnique(scopes))
	if err != nil {
		return Result{}, err
	}
	return decide(ctx, tx, ref, rows, now)
}

// decide decides on the locked rows and writes the decision.
func decide(ctx context.Context, tx Tx, ref db.InstanceRef, rows []*db.LimitRow, now time.Time) (Result, error) {
	plan := transition.Admit(rows, now)
	if plan.Admitted {
		if err := tx.Update(ctx, rows); err != nil {
			return Result{}, err
		}
	}
	if err := tx.WriteMembers(ctx, ref, memberWrites(rows, &plan, now), now); err != nil {
		return Result{}, err
	}
	return Result{Admitted: plan.Admitted, RunAt: plan.RunAt, Waiting: waitingFor(rows, &plan, now)}, nil
}

// waitingFor is what holds an instance back after plan over its rows, as
// InstanceGet reports it (see Result.Waiting); nil when nothing does.
func waitingFor(rows []*db.LimitRow, plan *transition.AdmitPlan, now time.Time) *db.WaitingFor {
	for _, r := range rows {
		switch {
		case !plan.Admitted && r.Scope == plan.Blocked:
			return &db.WaitingFor{Kind: db.LimitKindConcurrency, Scope: r.Scope, Max: r.MaxRunning}
		case plan.Admitted && r.Scope == plan.RateScope && plan.RunAt.After(now):
			until := plan.RunAt
			return &db.WaitingFor{Kind: db.LimitKindRate, Scope: r.Scope, Max: r.RateLimit, Period: r.RatePeriod, Until: &until}
		}
	}
	return nil
}

// memberWrites are the members of an instance after plan.
func memberWrites(rows []*db.LimitRow, plan *transition.AdmitPlan, now time.Time) []MemberWrite {
	ws := make([]MemberWrite, len(rows))
	for i, r := range rows {
		ws[i] = MemberWrite{Scope: r.Scope, State: StateWaiting, Blocked: r.Scope == plan.Blocked}
		if plan.Admitted {
			ws[i].State = StateHolding
			if r.Scope == plan.RateScope && plan.RunAt.After(now) {
				until := plan.RunAt
				ws[i].RateUntil = &until
			}
		}
	}
	return ws
}

// candidates is how many waiting instances per freed scope a release looks at.
const candidates = 4

// Release gives back the slots ref holds (the instance became terminal)
// and admits, oldest first, the waiting instances of those scopes that now
// fit. An instance that only waited leaves its queue and frees nothing.
// It is ReleaseMany of one instance.
//
// It returns the workflow names of the instances it admitted and made due
// now, each once.
//
// With a lease, the first instance of ref's workflow it admits due now is
// started at once with its task leased to lease.Owner (the runner whose
// slot the ending instance frees) and returned, instead of being made due
// for a claim.
func Release(ctx context.Context, tx Tx, ref db.InstanceRef, now time.Time, lease *db.CreateLease) ([]string, *db.CreateResult, error) {
	res, err := ReleaseMany(ctx, tx, []ReleaseItem{{Ref: ref, Lease: lease}}, now)
	if err != nil {
		return nil, nil, err
	}
	return res.Admitted, res.Leased[0], nil
}

// ReleaseItem is one instance that became terminal, and the lease its
// runner offers for an instance its end admits (nil for none).
type ReleaseItem struct {
	Ref   db.InstanceRef
	Lease *db.CreateLease
}

// ReleaseResult is what ReleaseMany did.
type ReleaseResult struct {
	// Admitted names the workflows of the instances admitted and made due
	// now for a claim, each once.
	Admitted []string
	// Leased holds, for each item, the instance started with its lease,
	// or nil.
	Leased []*db.CreateResult
}

// ReleaseMany gives back the slots the items' instances hold (each became
// terminal in the caller's transaction, as the ending checkpoints of a
// group commit do) and admits, oldest first, the waiting instances of the
// freed scopes that now fit, with a fixed number of reads whatever the
// number of items: the members of every item, then the rows of every freed
// scope locked in one statement, the waiters of those scopes, their
// instances, their members, and the rows of their other scopes.
//
// The rows of the freed scopes are locked first, and the waiting
// instances read after that, so that a create that found a scope full and
// waits is always seen by the release that frees its slot (it committed
// before the release got the lock). The other scopes of those waiters are
// locked after: in scope order when they all sort after the freed ones,
// and otherwise without waiting (SKIP LOCKED), a waiter whose row another
// transaction holds staying for the next release of one of its scopes
// (that transaction, or one after it, holds a slot of that scope and
// releases it later). No transaction ever waits for a limit row out of
// scope order, so limit rows never deadlock.
//
// An admitted instance due now of the workflow of an item with a lease is
// started at once with its task leased to that lease's owner (each lease
// starts one instance) and returned in Leased at the item's index,
// instead of being made due for a claim.
func ReleaseMany(ctx context.Context, tx Tx, items []ReleaseItem, now time.Time) (ReleaseResult, error) {
	out := ReleaseResult{Leased: make([]*db.CreateResult, len(items))}
	refs := make([]db.InstanceRef, len(items))
	ending := make(map[db.InstanceRef]bool, len(items))
	for i, it := range items {
		refs[i] = it.Ref
		ending[it.Ref] = true
	}
	members, err := tx.Members(ctx, refs)
	if err != nil || len(members) == 0 {
		return out, err
	}
	// Every member of an ending instance is released; each slot it held
	// is given back once.
	var (
		held     []string
		releases []InstanceWrites
	)
	for _, m := range members { // ordered by instance
		if m.State == StateHolding {
			held = append(held, m.Scope)
		}
		if n := len(releases); n == 0 || releases[n-1].Ref != m.Ref {
			releases = append(releases, InstanceWrites{Ref: m.Ref})
		}
		last := &releases[len(releases)-1]
		last.Writes = append(last.Writes, MemberWrite{Scope: m.Scope, State: StateReleased})
	}
	if err := tx.WriteMembersMany(ctx, releases, now); err != nil {
		return out, err
	}
	if len(held) == 0 {
		return out, nil
	}
	slots := held // a scope once for each ending instance that held it
	held = sortedUnique(held)
	rows, err := tx.Lock(ctx, held)
	if err != nil {
		return out, err
	}
	byScope := make(map[string]*db.LimitRow, len(rows))
	for _, r := range rows {
		byScope[r.Scope] = r
	}
	freed := make([]*db.LimitRow, 0, len(slots))
	for _, s := range slots {
		if r := byScope[s]; r != nil {
			freed = append(freed, r)
		}
	}
	transition.Release(freed)
	// Look at no more waiters than the freed slots can take: a scope
	// with a max has max - running free slots (usually the one an
	// instance gave back), one without has candidates.
	look := 0
	for _, r := range rows {
		free := candidates
		if r.MaxRunning > 0 {
			free = min(free, r.MaxRunning-r.Running)
		}
		look = max(look, free)
	}
	if look <= 0 {
		return out, tx.Update(ctx, rows)
	}
	waiting, err := tx.Waiting(ctx, held, look)
	if err != nil {
		return out, err
	}
	waiting = slices.DeleteFunc(uniqueRefs(waiting), func(r db.InstanceRef) bool { return ending[r] })
	if len(waiting) > 0 {
		if waiting, err = tx.LockWaiters(ctx, waiting); err != nil {
			return out, err
		}
	}
	scopesOf := map[db.InstanceRef][]string{}
	var extra []string
	if len(waiting) > 0 {
		wm, err := tx.Members(ctx, waiting)
		if err != nil {
			return out, err
		}
		for _, m := range wm {
			if m.State != StateWaiting {
				continue
			}
			scopesOf[m.Ref] = append(scopesOf[m.Ref], m.Scope)
			if byScope[m.Scope] == nil {
				extra = append(extra, m.Scope)
			}
		}
	}
	if extra = sortedUnique(extra); len(extra) > 0 {
		lock := tx.Lock
		if extra[0] < held[len(held)-1] {
			lock = tx.LockSkip
		}
		more, err := lock(ctx, extra)
		if err != nil {
			return out, err
		}
		for _, r := range more {
			byScope[r.Scope] = r
		}
		rows = append(rows, more...)
	}
	// The leases on offer, in item order, by the workflow they may start.
	leases := map[string][]int{}
	for i, it := range items {
		if it.Lease != nil {
			leases[it.Ref.WorkflowName] = append(leases[it.Ref.WorkflowName], i)
		}
	}
	for _, w := range waiting {
		scopes := sortedUnique(scopesOf[w])
		if len(scopes) == 0 {
			continue // admitted, terminated or changed meanwhile
		}
		wr := make([]*db.LimitRow, 0, len(scopes))
		for _, s := range scopes {
			if r := byScope[s]; r != nil {
				wr = append(wr, r)
			}
		}
		if len(wr) < len(scopes) {
			continue // a row another transaction holds: a later release admits it
		}
		plan := transition.Admit(wr, now)
		// Admitted, it holds; refused, it now waits for the scope that
		// refused it, and the release of that scope finds it.
		if err := tx.WriteMembers(ctx, w, memberWrites(wr, &plan, now), now); err != nil {
			return out, err
		}
		if !plan.Admitted {
			continue
		}
		due := !plan.RunAt.After(now)
		if offers := leases[w.WorkflowName]; due && len(offers) > 0 {
			i := offers[0]
			started, err := tx.TaskAdmitLeased(ctx, w, items[i].Lease, now)
			if err != nil {
				return out, err
			}
			if started != nil {
				out.Leased[i], leases[w.WorkflowName] = started, offers[1:]
				continue
			}
		}
		if err := tx.TaskAdmit(ctx, w, plan.RunAt, due); err != nil {
			return out, err
		}
		if due && !slices.Contains(out.Admitted, w.WorkflowName) {
			out.Admitted = append(out.Admitted, w.WorkflowName)
		}
	}
	return out, tx.Update(ctx, rows)
}

// Restart applies a restart to a limited instance whose new run was given
// a due task: an instance that holds its slots keeps them (and its task);
// one that waits keeps waiting (its task is deleted); one that had released
// them (a terminal instance) is admitted again as a create would be, its
// task deleted when it must wait or moved to the rate limits' run-at.
//
// It returns what the new run starts waiting for when the restart made it
// wait (a terminal instance admitted again that a limit holds back, as
// Result.Waiting); nil when it holds its slots, may start now, or already
// waited before the restart.
func Restart(ctx context.Context, tx Tx, ref db.InstanceRef, now time.Time) (*db.WaitingFor, error) {
	members, err := tx.Members(ctx, []db.InstanceRef{ref})
	if err != nil || len(members) == 0 {
		return nil, err
	}
	var scopes []string
	for _, m := range members {
		switch m.State {
		case StateHolding:
			return nil, nil
		case StateWaiting:
			return nil, tx.TaskDelete(ctx, ref)
		}
		scopes = append(scopes, m.Scope)
	}
	res, err := admit(ctx, tx, ref, scopes, now)
	if err != nil {
		return nil, err
	}
	if !res.Admitted {
		return res.Waiting, tx.TaskDelete(ctx, ref)
	}
	if res.RunAt.After(now) {
		return res.Waiting, tx.TaskAdmit(ctx, ref, res.RunAt, false)
	}
	return nil, nil
}

// Resume applies a resume to a limited instance whose task was requeued:
// an instance still waiting for a slot gets no task.
func Resume(ctx context.Context, tx Tx, ref db.InstanceRef) error {
	members, err := tx.Members(ctx, []db.InstanceRef{ref})
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.State == StateWaiting {
			return tx.TaskDelete(ctx, ref)
		}
	}
	return nil
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func uniqueRefs(refs []db.InstanceRef) []db.InstanceRef {
	seen := make(map[db.InstanceRef]bool, len(refs))
	out := refs[:0:0]
	for _, r := range refs {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}
