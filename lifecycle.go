package duraflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

// The lifecycle event log (docs/events.md): the store writes the events in
// the transactions of the transitions; the host prunes them and delivers
// them to subscribers.

const (
	// lifecyclePruneBatch is how many events one prune statement deletes:
	// small, so no prune holds locks or the SQLite writer for long.
	lifecyclePruneBatch = 1000
	// subscriberPollInterval is how often a subscriber looks for new
	// events without a wake-up.
	subscriberPollInterval = time.Second
	// subscriberGapGrace is how long a subscriber waits for a missing id
	// before passing it: on Postgres an id is taken when its transaction
	// inserts, and a transaction that took a lower id may commit after one
	// that took a higher id; an id that does not come in this long was
	// rolled back.
	subscriberGapGrace = 5 * time.Second
	// subscriberPage is how many events a subscriber reads at a time.
	subscriberPage = 500
)

// lifecycleStore is the store's lifecycle event log, or nil.
func (h *Host) lifecycleStore() db.LifecycleStore {
	ls, _ := h.store.(db.LifecycleStore)
	return ls
}

// clock is the host's clock.
func (h *Host) clock() clock.Clock {
	if h.cfg.Clock != nil {
		return h.cfg.Clock
	}
	return clock.New()
}

// PruneLifecycle deletes the lifecycle events older than the retention
// (Config.LifecycleRetention) in batches of 1000 until none is left, and
// returns how many it deleted.
// A host running in the background calls it every
// Config.LifecyclePruneInterval; it is exported for hosts that run on
// demand.
func (h *Host) PruneLifecycle(ctx context.Context) (int, error) {
	ls := h.lifecycleStore()
	if ls == nil {
		return 0, nil
	}
	retention := h.cfg.LifecycleRetention
	if retention == 0 {
		retention = DefaultLifecycleRetention
	}
	before := h.clock().Now().Add(-retention)
	total := 0
	for ctx.Err() == nil {
		// Batch after batch, each its own short transaction, until one
		// finds fewer than a batch: a busy engine writes thousands of
		// events a second, so a capped pass would fall behind.
		n, err := ls.LifecyclePrune(ctx, &db.LifecyclePruneParams{Before: before, Max: lifecyclePruneBatch})
		total += n
		if err != nil {
			return total, fmt.Errorf("duraflow: pruning lifecycle events: %w", err)
		}
		if n < lifecyclePruneBatch {
			break
		}
	}
	return total, nil
}

// pruneLoop prunes the lifecycle event log every prune interval until ctx
// is done. A prune that fails because the database is unavailable is tried
// again with backoff (backoff.Loop, in real time) until the database is
// back, not at the next interval, and the outage is logged once.
func (h *Host) pruneLoop(ctx context.Context) {
	defer close(h.pruneDone)
	every := h.cfg.LifecyclePruneInterval
	if every == 0 {
		every = time.Minute
	}
	ticker := h.clock().Ticker(every)
	defer ticker.Stop()
	outage := backoff.NewOutage(h.logger(), "pruning lifecycle events", backoff.Loop)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for {
			n, err := h.PruneLifecycle(ctx)
			if ctx.Err() != nil {
				return
			}
			if unavailable, wait := outage.Round(err); unavailable {
				if !backoff.Sleep(ctx, wait) {
					return
				}
				continue
			}
			if err != nil {
				h.logger().Warn("pruning lifecycle events", "error", err)
			} else if n > 0 {
				h.logger().Debug("pruned lifecycle events", "deleted", n)
			}
			break
		}
	}
}

// LifecycleFilter selects the lifecycle events a subscriber receives.
// Every field is optional.
type LifecycleFilter struct {
	WorkflowName string
	InstanceID   string
	// WorkerID keeps only the events of this worker (worker.*).
	WorkerID string
	// Types keeps only events of these types; empty keeps all.
	Types []db.LifecycleEventType
	// AfterID starts after the event with this id; 0 starts after the
	// newest event at the time of the call (only new events).
	AfterID int64
}

func (f *LifecycleFilter) match(e *db.LifecycleEvent) bool {
	return (f.WorkflowName == "" || e.WorkflowName == f.WorkflowName) &&
		(f.InstanceID == "" || e.InstanceID == f.InstanceID) &&
		(f.WorkerID == "" || e.WorkerID == f.WorkerID) &&
		(len(f.Types) == 0 || slices.Contains(f.Types, e.Type))
}

// ErrNoLifecycleLog is returned by SubscribeLifecycle when the store keeps
// no lifecycle event log.
var ErrNoLifecycleLog = errors.New("duraflow: the store keeps no lifecycle event log")

// SubscribeLifecycle calls fn with each committed lifecycle event that
// matches filter, in id order, from any process on the store, until ctx is
// done or fn returns an error (which it returns); it returns nil when ctx
// is done. While the database is unavailable it reads again with backoff
// and logs the outage once; another error reading the log ends it. Events
// are read from the log by id cursor, woken by the host's wake-ups (its
// own commits, and other processes' through the store's listener where
// the host listens) and otherwise every second. Delivery is
// at least once across restarts when the caller keeps the last id it
// handled and passes it as filter.AfterID; within one call each event is
// delivered once. An id that is missing (a Postgres transaction that has
// not committed yet) holds the events after it back for up to 5 seconds.
// fn runs on the subscriber's goroutine: a slow fn delays only its own
// subscription.
func (h *Host) SubscribeLifecycle(ctx context.Context, filter LifecycleFilter, fn func(db.LifecycleEvent) error) error {
	ls := h.lifecycleStore()
	if ls == nil {
		return ErrNoLifecycleLog
	}
	cursor := filter.AfterID
	if cursor == 0 {
		latest, err := ls.LifecycleLastID(ctx)
		if err != nil {
			return fmt.Errorf("duraflow: reading lifecycle events: %w", err)
		}
		cursor = latest
	}
	wake := make(chan struct{}, 1)
	h.subscribe(wake)
	defer h.unsubscribe(wake)
	clk := h.clock()
	var gapSince time.Time // when the first missing id after cursor was seen
	outage := backoff.NewOutage(h.logger(), "reading lifecycle events for a subscriber", backoff.Loop)
	for {
		events, err := ls.LifecycleList(ctx, &db.LifecycleListParams{AfterID: cursor, Limit: subscriberPage})
		if ctx.Err() != nil {
			return nil
		}
		if unavailable, wait := outage.Round(err); unavailable {
			select {
			case <-ctx.Done():
				return nil
			case <-wake:
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("duraflow: reading lifecycle events: %w", err)
		}
		for _, e := range events {
			if !db.LifecycleFollows(cursor, e.ID) {
				if gapSince.IsZero() {
					gapSince = clk.Now()
				}
				if clk.Since(gapSince) < subscriberGapGrace {
					break // wait for the missing id
				}
			}
			gapSince = time.Time{}
			cursor = e.ID
			if filter.match(e) {
				if err := fn(*e); err != nil {
					return err
				}
			}
		}
		if len(events) == subscriberPage && gapSince.IsZero() {
			continue // more to read at once
		}
		timer := clk.Timer(subscriberPollInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// LifecycleWakeups returns a channel that is signalled (without blocking:
// signals that find it full are dropped) at each wake-up the host gets,
// in-process or, on Postgres, from another process through the listener:
// the moments new lifecycle events may have committed. stop releases it.
// It is what httpapi.Config.LifecycleWakeups takes.
func (h *Host) LifecycleWakeups() (ch <-chan struct{}, stop func()) {
	c := make(chan struct{}, 1)
	h.subscribe(c)
	return c, func() { h.unsubscribe(c) }
}

// subscribers are the wake channels of the host's lifecycle subscribers.
type subscribers struct {
	mu    sync.Mutex
	chans map[chan struct{}]struct{}
}

func (h *Host) subscribe(c chan struct{}) {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	if h.subs.chans == nil {
		h.subs.chans = make(map[chan struct{}]struct{})
	}
	h.subs.chans[c] = struct{}{}
}

func (h *Host) unsubscribe(c chan struct{}) {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	delete(h.subs.chans, c)
}

// wakeSubscribers tells every subscriber to look for new events; it never
// blocks.
func (h *Host) wakeSubscribers() {
	h.subs.mu.Lock()
	defer h.subs.mu.Unlock()
	for c := range h.subs.chans {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
