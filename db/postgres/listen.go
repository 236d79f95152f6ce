package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

var _ db.WakeListener = (*Store)(nil)

// listenConfig tunes WakeListen's reconnection (WithListenReconnectDelay).
type listenConfig struct {
	delay, maxDelay time.Duration
}

// WithListenReconnectDelay sets how long WakeListen waits after a failed or
// dropped connection before it connects again: about delay at first,
// doubling up to maxDelay, each wait drawn at random between half and one
// and a half times its delay, and never above maxDelay. Zero keeps a
// default.
//
// Defaults to 100 milliseconds, doubling up to 5 seconds.
func WithListenReconnectDelay(delay, maxDelay time.Duration) Option {
	return func(s *Store) {
		s.listen = listenConfig{delay: delay, maxDelay: maxDelay}
	}
}

// WakeListen implements db.WakeListener: it LISTENs on the store's wake
// channel (WakeChannel, or WithWakeChannel's), which every transaction that
// makes work due notifies, and calls p.WakeFunc with each notification's
// payload, the workflow name. It holds a connection of its own, configured
// as the pool's (the pool's own settings, such as pool_max_conns, do not
// apply), and re-establishes it with backoff (jittered, see
// WithListenReconnectDelay) when it drops; work is never lost meanwhile,
// because runners keep polling. While the database is unavailable it logs
// the outage once, and its end once it listens again. It returns ctx's
// error when ctx is done.
func (s *Store) WakeListen(ctx context.Context, p *db.WakeListenParams) error {
	if p == nil || p.WakeFunc == nil {
		return errors.New("postgres: WakeListen needs a WakeFunc")
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.Default()
	}
	first := cmp.Or(s.listen.delay, 100*time.Millisecond)
	maxDelay := max(cmp.Or(s.listen.maxDelay, 5*time.Second), first)
	conf := s.pool.Config().ConnConfig.Copy()
	// The statements of the store may be traced; the listener's wait is not
	// one of them.
	conf.Tracer = nil
	policy := backoff.Policy{First: first, Max: maxDelay}
	b := policy.New()
	outage := backoff.NewOutage(logger.With("channel", s.wakeChannel), "listening for wake-ups", policy)
	listening := func() { outage.Round(nil) }
	for {
		listened, err := s.listenOnce(ctx, conf, p.WakeFunc, listening)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listened {
			b.Reset()
		}
		delay := b.Next()
		if unavailable, _ := outage.Round(err); !unavailable {
			logger.Warn("wake listener disconnected; reconnecting", "channel", s.wakeChannel, "error", err, "in", delay)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// listenOnce holds one connection until it fails, and reports whether it
// got as far as listening; it calls listening once it listens.
func (s *Store) listenOnce(ctx context.Context, conf *pgx.ConnConfig, wake func(string), listening func()) (bool, error) {
	conn, err := pgx.ConnectConfig(ctx, conf)
	if err != nil {
		return false, fmt.Errorf("connecting: %w", interpretError(err))
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.wakeChannel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listening on %s: %w", s.wakeChannel, interpretError(err))
	}
	listening()
	// Anything that became due while nobody listened is found now.
	wake("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("waiting for notifications: %w", interpretError(err))
		}
		wake(n.Payload)
	}
}
