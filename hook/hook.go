package hook

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/internal/polltimer"
)

// Enqueued is what OnWorkflowEnqueued receives.
type Enqueued struct {
	// WorkflowName and InstanceID name the instance.
	WorkflowName string `json:"workflowName"`
	InstanceID   string `json:"instanceId"`
	// Reason is create, event, resume, retry or wake (a restart is create).
	Reason string `json:"reason"`
	// RunAt is when the enqueued work is due.
	RunAt time.Time `json:"runAt"`
	// Attempt is the delivery attempt, 1 for the first.
	Attempt int `json:"attempt"`
	// ID identifies the recorded entry, the same on every attempt, so the
	// host can make its handling idempotent.
	ID int64 `json:"id"`
}

// OnWorkflowEnqueuedFunc is host code called for each recorded entry. An
// error (or a panic) makes the delivery retried later.
type OnWorkflowEnqueuedFunc func(ctx context.Context, e Enqueued) error

// Config configures a Deliverer.
type Config struct {
	// Store is the database holding the outbox. Required.
	Store db.Store
	// OnWorkflowEnqueued is the hook. Required.
	OnWorkflowEnqueued OnWorkflowEnqueuedFunc
	// Clock is the source of "now".
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives failed deliveries.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// PollInterval is how often the deliverer looks for entries when nothing
	// notified it.
	//
	// Defaults to 1 second.
	PollInterval time.Duration
	// Lease is how long a claimed entry stays locked to this deliverer.
	//
	// Defaults to 30 seconds.
	Lease time.Duration
	// CallTimeout bounds one call of the hook.
	//
	// Defaults to 10 seconds.
	CallTimeout time.Duration
	// RetryDelay is the wait after the first failed attempt; it doubles after
	// each further failure, up to MaxRetryDelay.
	//
	// Defaults to 1 second.
	RetryDelay time.Duration
	// MaxRetryDelay bounds the wait between attempts.
	//
	// Defaults to 5 minutes.
	MaxRetryDelay time.Duration
	// BatchSize is how many entries one round claims.
	//
	// Defaults to 32.
	BatchSize int
	// KeepDelivered is how long delivered entries are kept before they are pruned.
	//
	// Defaults to 1 hour.
	KeepDelivered time.Duration
}

// Deliverer delivers recorded hook calls.
type Deliverer struct {
	cfg    Config
	wakeCh chan struct{}

	mu      sync.Mutex
	stop    context.CancelFunc
	done    chan struct{}
	lastGC  time.Time
	started bool
}

// NewDeliverer returns a deliverer; Start runs it in the background, or call
// DeliverDue yourself.
func NewDeliverer(cfg *Config) (*Deliverer, error) {
	if cfg == nil || cfg.Store == nil || cfg.OnWorkflowEnqueued == nil {
		return nil, errors.New("hook: Config needs Store and OnWorkflowEnqueued")
	}
	c := *cfg
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.Lease = cmp.Or(c.Lease, 30*time.Second)
	c.CallTimeout = cmp.Or(c.CallTimeout, 10*time.Second)
	c.RetryDelay = cmp.Or(c.RetryDelay, time.Second)
	c.MaxRetryDelay = cmp.Or(c.MaxRetryDelay, 5*time.Minute)
	c.BatchSize = cmp.Or(c.BatchSize, 32)
	c.KeepDelivered = cmp.Or(c.KeepDelivered, time.Hour)
	if c.CallTimeout >= c.Lease {
		return nil, fmt.Errorf("hook: CallTimeout %s must be shorter than Lease %s", c.CallTimeout, c.Lease)
	}
	return &Deliverer{cfg: c, wakeCh: make(chan struct{}, 1)}, nil
}

// Notify makes the background loop look for entries now. Hosts call it after
// a commit that recorded one (it is a dispatcher wake function).
func (d *Deliverer) Notify(string) {
	select {
	case d.wakeCh <- struct{}{}:
	default:
	}
}

// Start runs the delivery loop in the background until Stop.
func (d *Deliverer) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return errors.New("hook: deliverer already started")
	}
	d.started = true
	ctx, d.stop = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go d.loop(ctx)
	return nil
}

// Stop ends the loop and waits for the round in flight, until ctx is done.
func (d *Deliverer) Stop(ctx context.Context) error {
	d.mu.Lock()
	stop, done := d.stop, d.done
	d.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop delivers due entries until ctx is done: again at once after a full
// batch, otherwise at a wake-up or the next poll. While the database is
// unavailable it tries again with backoff (backoff.Loop, in real time)
// instead of at the next poll, and logs the outage once.
func (d *Deliverer) loop(ctx context.Context) {
	defer close(d.done)
	t := d.cfg.Clock.Timer(d.cfg.PollInterval)
	defer t.Stop()
	outage := backoff.NewOutage(d.cfg.Logger, "delivering hooks", backoff.Loop)
	for {
		n, err := d.DeliverDue(ctx)
		if ctx.Err() != nil {
			return
		}
		if unavailable, wait := outage.Round(err); unavailable {
			select {
			case <-ctx.Done():
				return
			case <-d.wakeCh:
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			d.cfg.Logger.Warn("delivering hooks failed", "error", err)
		}
		if n == d.cfg.BatchSize && err == nil {
			continue // a full batch: there may be more
		}
		polltimer.Reset(t, d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-d.wakeCh:
		case <-t.C:
		}
	}
}

// DeliverDue claims the entries that are due, calls the hook for each, and
// records the outcome: delivered, or retried after a backoff. It returns how
// many entries it claimed. It also prunes delivered entries now and then.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	now := d.now()
	entries, err := d.cfg.Store.OutboxClaim(ctx, &db.OutboxClaimParams{
		Now: now, LockedUntil: now.Add(d.cfg.Lease), Max: d.cfg.BatchSize,
	})
	if err != nil {
		return 0, fmt.Errorf("claiming hook entries: %w", err)
	}
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		go func(e *db.OutboxEntry) {
			defer wg.Done()
			d.deliver(ctx, e)
		}(e)
	}
	wg.Wait()
	d.prune(ctx, now)
	return len(entries), nil
}

// deliver calls the hook for a claimed entry and records the outcome. The
// record is fenced by the entry's version, so a record whose answer was
// lost can be repeated: while the database is unavailable it is, with
// backoff (backoff.Call), until the entry's lease ends, after which another
// claim delivers the entry again.
func (d *Deliverer) deliver(ctx context.Context, e *db.OutboxEntry) {
	callErr := d.call(ctx, e)
	now := d.now()
	var record func() error
	if callErr == nil {
		record = func() error {
			return d.cfg.Store.OutboxDelivered(ctx, &db.OutboxDeliveredParams{ID: e.ID, Version: e.Version, Now: now})
		}
	} else {
		delay := d.cfg.RetryDelay
		for i := 1; i < e.Attempts && delay < d.cfg.MaxRetryDelay; i++ {
			delay *= 2
		}
		delay = min(delay, d.cfg.MaxRetryDelay)
		d.cfg.Logger.Warn("hook failed; retrying", "hook", "OnWorkflowEnqueued", "workflow", e.WorkflowName,
			"instance", e.InstanceID, "attempt", e.Attempts, "in", delay, "error", callErr)
		record = func() error {
			return d.cfg.Store.OutboxRetry(ctx, &db.OutboxRetryParams{
				ID: e.ID, Version: e.Version, NextAttemptAt: now.Add(delay), LastError: truncate(callErr.Error(), 2000),
			})
		}
	}
	leaseEnd := now.Add(d.cfg.Lease)
	if e.LockedUntil != nil {
		leaseEnd = *e.LockedUntil
	}
	b := backoff.Call.New()
	err := record()
	for errors.Is(err, db.ErrUnavailable) && d.cfg.Clock.Now().Before(leaseEnd) {
		d.cfg.Logger.Debug("recording a hook delivery failed; retrying until its lease ends", "entry", e.ID, "error", err)
		if !backoff.Sleep(ctx, b.Next()) {
			break
		}
		err = record()
	}
	if err != nil && !errors.Is(err, db.ErrLeaseLost) && ctx.Err() == nil {
		d.cfg.Logger.Warn("recording a hook delivery failed; it is retried when its lease expires", "error", err)
	}
}

func (d *Deliverer) call(ctx context.Context, e *db.OutboxEntry) (err error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("hook panicked: %v", p)
		}
	}()
	return d.cfg.OnWorkflowEnqueued(ctx, Enqueued{
		WorkflowName: e.WorkflowName, InstanceID: e.InstanceID, Reason: string(e.Reason),
		RunAt: e.RunAt, Attempt: e.Attempts, ID: e.ID,
	})
}

func (d *Deliverer) prune(ctx context.Context, now time.Time) {
	d.mu.Lock()
	due := now.Sub(d.lastGC) >= d.cfg.KeepDelivered/4
	if due {
		d.lastGC = now
	}
	d.mu.Unlock()
	if !due {
		return
	}
	if _, err := d.cfg.Store.OutboxPrune(ctx, &db.OutboxPruneParams{DeliveredBefore: now.Add(-d.cfg.KeepDelivered), Max: 1000}); err != nil {
		d.cfg.Logger.Warn("pruning delivered hook entries failed", "error", err)
	}
}

func (d *Deliverer) now() time.Time { return d.cfg.Clock.Now().UTC().Truncate(time.Microsecond) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
