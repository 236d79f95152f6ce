package transition

import (
	"time"

	"github.com/duraflow/duraflow/db"
)

// AdmitPlan is the decision of Admit for one instance over the rows of its
// limited scopes.
type AdmitPlan struct {
	// Admitted is true when every concurrency limit has a free slot: the
	// instance takes one in each of its scopes (Rows' Running went up) and
	// its task is due at RunAt.
	Admitted bool
	// RunAt is when the rate limits let the admitted instance start: now,
	// or later when a rate limit's window is full.
	RunAt time.Time
	// RateScope is the scope of the rate limit that put RunAt after now;
	// "" when the instance may start now.
	RateScope string
	// Blocked is the first scope (in the rows' order) whose concurrency
	// limit has no free slot, when not admitted.
	Blocked string
}

// Admit decides whether an instance is admitted under the locked rows of
// its scopes, and when admitted updates the rows in place: Running goes up
// by one in every scope (whether or not it has a max, so a max set later
// counts the instances already holding), and each rate limit counts the
// start in its window.
//
// A rate limit of N per period is a fixed window: periods aligned on
// multiples of the period (time.Truncate), each holding at most N starts (so any sliding period holds
// at most 2N, across a boundary). An instance the current window cannot
// take is admitted anyway with its start (the task's run-at) reserved in
// the first later window with room, so the excess waits in order and is
// never dropped.
func Admit(rows []*db.LimitRow, now time.Time) AdmitPlan {
	for _, r := range rows {
		if r.MaxRunning > 0 && r.Running >= r.MaxRunning {
			return AdmitPlan{Blocked: r.Scope}
		}
	}
	plan := AdmitPlan{Admitted: true, RunAt: now}
	// The start is the earliest time every rate limit's window has room;
	// a later window of one limit can move the start into a full window of
	// another, so repeat until all agree (each round moves it forward).
	for range 16 {
		moved := false
		for _, r := range rows {
			if !rated(r) {
				continue
			}
			if at := windowStart(r, plan.RunAt); at.After(plan.RunAt) {
				plan.RunAt, plan.RateScope, moved = at, r.Scope, true
			}
		}
		if !moved {
			break
		}
	}
	for _, r := range rows {
		r.Running++
		if !rated(r) {
			continue
		}
		w := window(plan.RunAt, r.RatePeriod)
		if r.RateWindow == nil || !r.RateWindow.Equal(w) {
			r.RateWindow, r.RateCount = &w, 0
		}
		r.RateCount++
	}
	return plan
}

func rated(r *db.LimitRow) bool { return r.RateLimit > 0 && r.RatePeriod > 0 }

// window is the start of the window of period that holds t.
func window(t time.Time, period time.Duration) time.Time {
	return t.Truncate(period)
}

// windowStart is the earliest time from at whose window has room in r.
// Windows before r's latest one are never taken again (starts are given
// in order), so a start goes in r's latest window or a later one.
func windowStart(r *db.LimitRow, at time.Time) time.Time {
	w := window(at, r.RatePeriod)
	if r.RateWindow == nil || w.After(*r.RateWindow) {
		return at
	}
	if w.Equal(*r.RateWindow) && r.RateCount < r.RateLimit {
		return at
	}
	latest := *r.RateWindow
	if r.RateCount < r.RateLimit {
		return latest // at is before the latest window, which has room
	}
	return latest.Add(r.RatePeriod)
}

// Release gives back the slot an instance held in each row.
func Release(rows []*db.LimitRow) {
	for _, r := range rows {
		if r.Running > 0 {
			r.Running--
		}
	}
}
