package db

import (
	"slices"
	"time"
)

// A step attempt's step.started is always written in the transaction of
// its outcome (step.completed, step.failed or step.retrying), and the two
// share every field but the type and the time. The backends store such a
// pair as one row, the outcome's, with the attempt's start beside it: a
// steps10 instance writes 13 rows instead of 23. Ids are the rows': the
// event of row r has id 2r, and the step.started a row also records has
// id 2r-1, so that ids still only grow, both events of a row are
// consecutive, and a reader can tell a missing row (a transaction not yet
// committed) from a row that records one event (LifecycleFollows).

// LifecyclePack returns events as the backends store them: each
// step.started that an outcome of the same step attempt follows folds into
// that outcome, whose StepStartedAt it sets. events is not modified; it
// is returned as it is when it holds no step.started.
func LifecyclePack(events []LifecycleEvent) []LifecycleEvent {
	if !slices.ContainsFunc(events, func(e LifecycleEvent) bool { return e.Type == LifecycleStepStarted }) {
		return events // nothing to fold: most transitions' events
	}
	out := make([]LifecycleEvent, 0, len(events))
	for i := 0; i < len(events); i++ {
		e := events[i]
		if e.Type == LifecycleStepStarted && i+1 < len(events) {
			next := events[i+1]
			if isStepOutcome(next.Type) && next.StepKey == e.StepKey && next.Attempt == e.Attempt &&
				next.RunNumber == e.RunNumber && next.InstanceID == e.InstanceID && next.WorkflowName == e.WorkflowName &&
				!e.At.IsZero() {
				next.StepStartedAt = e.At
				out = append(out, next)
				i++
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// isStepOutcome reports whether t ends a step attempt.
func isStepOutcome(t LifecycleEventType) bool {
	return t == LifecycleStepCompleted || t == LifecycleStepFailed || t == LifecycleStepRetrying
}

// LifecycleUnpack appends to out the events of the stored row rowID, e:
// its step.started first (id 2·rowID-1) when the row records one, then e
// itself (id 2·rowID). e is not modified.
func LifecycleUnpack(out []*LifecycleEvent, rowID int64, e *LifecycleEvent) []*LifecycleEvent {
	if !e.StepStartedAt.IsZero() {
		started := *e
		started.ID, started.Type, started.Detail, started.At = 2*rowID-1, LifecycleStepStarted, "", e.StepStartedAt
		started.StepStartedAt = time.Time{}
		out = append(out, &started)
	}
	ev := *e
	ev.ID, ev.StepStartedAt = 2*rowID, time.Time{}
	return append(out, &ev)
}

// LifecycleRowOf returns the row that event id belongs to (0 for 0).
func LifecycleRowOf(id int64) int64 { return (id + 1) / 2 }

// LifecycleLastEventID returns the id of the last event of row rowID (0
// for none).
func LifecycleLastEventID(rowID int64) int64 { return 2 * rowID }

// LifecycleFollows reports whether event next may come right after event
// cursor with nothing between them: next belongs to cursor's row or to the
// row after it. A reader that tails the log holds back an event that does
// not follow its cursor for a while, since on Postgres a transaction may
// commit after one that took a later row.
func LifecycleFollows(cursor, next int64) bool {
	return LifecycleRowOf(next) <= LifecycleRowOf(cursor)+1
}

// LifecycleRowAfter returns the row after which the rows holding the
// events after event id afterID start (a list's cursor as rows).
func LifecycleRowAfter(afterID int64) int64 { return afterID / 2 }

// LifecycleRowBefore returns the row before which the rows holding the
// events before event id beforeID end; 0 for 0 (no bound).
func LifecycleRowBefore(beforeID int64) int64 {
	if beforeID <= 0 {
		return 0
	}
	return beforeID/2 + 1
}

// LifecycleWantsStarted reports whether a list with types keeps
// step.started events (every list without a type filter does): its query
// must then also match the rows that record one beside their outcome.
func LifecycleWantsStarted(types []LifecycleEventType) bool {
	return len(types) == 0 || slices.Contains(types, LifecycleStepStarted)
}

// LifecyclePage returns the page of p that stored rows hold: rows are in
// the list's order (descending ids with p.Newest), each with its row id in
// ID and the step.started it records in StepStartedAt. It unpacks them
// (LifecycleUnpack), keeps the events that match p (a row matched by one
// of its events carries the other too) and returns at most limit.
func LifecyclePage(p *LifecycleListParams, rows []*LifecycleEvent, limit int) []*LifecycleEvent {
	out := make([]*LifecycleEvent, 0, len(rows))
	var pair []*LifecycleEvent
	for _, r := range rows {
		pair = LifecycleUnpack(pair[:0], r.ID, r)
		if p.Newest && len(pair) == 2 {
			pair[0], pair[1] = pair[1], pair[0]
		}
		for _, e := range pair {
			if len(out) == limit {
				return out
			}
			if lifecycleKeeps(p, e) {
				out = append(out, e)
			}
		}
	}
	return out
}

// lifecycleKeeps reports whether e matches p's bounds, types and times
// (the rest of p's filters are the same for both events of a row).
func lifecycleKeeps(p *LifecycleListParams, e *LifecycleEvent) bool {
	switch {
	case e.ID <= p.AfterID:
		return false
	case p.Newest && p.BeforeID > 0 && e.ID >= p.BeforeID:
		return false
	case len(p.Types) > 0 && !slices.Contains(p.Types, e.Type):
		return false
	case !p.Since.IsZero() && e.At.Before(p.Since):
		return false
	case !p.Until.IsZero() && !e.At.Before(p.Until):
		return false
	}
	return true
}
