package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

var _ db.WakeListener = (*Store)(nil)

// listenConfig tunes WakeListen: its reconnection (WithListenReconnectDelay)
// and its connection (WithListenURL).
type listenConfig struct {
	delay, maxDelay time.Duration
	// conn is the connection configuration of WithListenURL; nil for the
	// pool's. urlErr is why the URL was refused.
	conn   *pgx.ConnConfig
	urlErr error
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
		s.listen.delay, s.listen.maxDelay = delay, maxDelay
	}
}

// WithListenURL makes WakeListen connect to url (a postgres:// URL or a
// keyword/value connection string) instead of configuring its connection
// as the pool's. A LISTEN needs a connection of its own to the server for
// as long as it listens: behind a pooler in transaction mode (PgBouncer's
// pool_mode=transaction), which lends a server connection to a client for
// one transaction at a time, notifications would go to whichever client
// holds the connection next, or nowhere. Give the pool the pooler's URL and
// the listener a direct URL of the same database; see "Behind PgBouncer" in
// docs/operations.md. The pool parameters of url (pool_max_conns...) are
// ignored. Open refuses a url that does not parse, and WakeListen returns
// the error. An empty url keeps the default.
//
// Defaults to the pool's connection configuration.
func WithListenURL(url string) Option {
	return func(s *Store) {
		if url == "" {
			return
		}
		config, err := pgxpool.ParseConfig(url)
		if err != nil {
			s.listen.conn, s.listen.urlErr = nil, fmt.Errorf("postgres: parsing the listen URL: %w", err)
			return
		}
		s.listen.conn, s.listen.urlErr = config.ConnConfig, nil
	}
}

// WakeListen implements db.WakeListener: it LISTENs on the store's wake
// channel (WakeChannel, or WithWakeChannel's), which every transaction that
// makes work due notifies, and calls p.WakeFunc with each notification's
// payload, the workflow name. It holds a connection of its own, configured
// by WithListenURL or else as the pool's (the pool's own settings, such as
// pool_max_conns, do not apply), and re-establishes it with backoff
// (jittered, see WithListenReconnectDelay) when it drops; work is never
// lost meanwhile, because runners keep polling. While the database is
// unavailable it logs the outage once, and its end once it listens again.
// It returns ctx's error when ctx is done, and at once the error of a
// WithListenURL that did not parse.
func (s *Store) WakeListen(ctx context.Context, p *db.WakeListenParams) error {
	if p == nil || p.WakeFunc == nil {
		return errors.New("postgres: WakeListen needs a WakeFunc")
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if err := s.listen.urlErr; err != nil {
		logger.Error("wake listener not started; runners only poll", "error", err)
		return err
	}
	first := cmp.Or(s.listen.delay, 100*time.Millisecond)
	maxDelay := max(cmp.Or(s.listen.maxDelay, 5*time.Second), first)
	conf := s.pool.Config().ConnConfig
	if s.listen.conn != nil {
		conf = s.listen.conn
	}
	conf = conf.Copy()
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

// PingListener checks that WakeListen's connection (WithListenURL's, or
// configured as the pool's) can be made and reaches the pool's database:
// notifications do not cross databases, so a listener on another one would
// never hear the store's, and its runners would only poll. A host calls it
// at start to refuse a wrong listen URL.
func (s *Store) PingListener(ctx context.Context) error {
	if err := s.listen.urlErr; err != nil {
		return err
	}
	conf := s.pool.Config().ConnConfig
	if s.listen.conn != nil {
		conf = s.listen.conn
	}
	conn, err := pgx.ConnectConfig(ctx, conf.Copy())
	if err != nil {
		return fmt.Errorf("postgres: connecting the wake listener: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var listenDB, poolDB string
	if err := conn.QueryRow(ctx, "SELECT current_database()", pgx.QueryExecModeSimpleProtocol).Scan(&listenDB); err != nil {
		return fmt.Errorf("postgres: pinging the wake listener's database: %w", err)
	}
	if err := s.pool.QueryRow(ctx, "SELECT current_database()").Scan(&poolDB); err != nil {
		return fmt.Errorf("postgres: reading the store's database: %w", poolerHint(err))
	}
	if listenDB != poolDB {
		return fmt.Errorf("postgres: the wake listener connects to database %q, the store to %q: notifications do not cross databases", listenDB, poolDB)
	}
	return nil
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
