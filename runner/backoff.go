package runner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

// transient reports whether err is a store error that retrying the same
// call may cure: an unavailable database (db.ErrUnavailable), a timeout, a
// serialization failure. The store's sentinels (a lost lease, refused data,
// a missing row) are answers, not failures, and a stopped runner is final.
func transient(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, db.ErrLeaseLost),
		errors.Is(err, db.ErrInvalidData),
		errors.Is(err, db.ErrNotFound),
		errors.Is(err, db.ErrAlreadyExists),
		errors.Is(err, db.ErrTerminal),
		errors.Is(err, db.ErrNotBatchable),
		errors.Is(err, errRunnerStopped):
		return false
	}
	return true
}

// retryStore calls op until it returns an error that is not transient (nil
// included), the runner's clock reaches the time until returned when op
// first failed (the lease could have expired by then, so another runner may
// hold the task and retrying is pointless), or ctx is done. The bound is
// fixed at the first failure, though a heartbeat may move the lease on
// meanwhile: an error only this call meets (a bad query, a statement
// timeout) gives up after one lease, like an outage that fails the
// heartbeats too. It waits between calls as backoff.Call says (50 ms
// doubling to 1 s, jittered, in real time whatever the runner's clock), so
// that a store outage delays the work by about as long as it lasts. It
// returns op's last error.
func (r *Runner) retryStore(ctx context.Context, until func() time.Time, what string, log *slog.Logger, op func() error) error {
	b := backoff.Call.New()
	var deadline time.Time
	for attempt := 1; ; attempt++ {
		err := op()
		if !transient(err) {
			if attempt > 1 {
				log.Info("store answers again", "call", what, "attempts", attempt)
			}
			return err
		}
		if attempt == 1 {
			deadline = until()
		}
		if ctx.Err() != nil {
			return err
		}
		if !r.cfg.Clock.Now().Before(deadline) {
			log.Error("store call kept failing for a lease; giving up", "call", what, "attempts", attempt, "error", err)
			return err
		}
		if attempt == 1 {
			log.Warn("store call failed; retrying until the database answers", "call", what, "error", err)
		}
		if !backoff.Sleep(ctx, b.Next()) {
			return err
		}
	}
}
