package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultWakeChannel is the Postgres notification channel the Postgres store
// notifies on when a transaction makes work due.
const DefaultWakeChannel = "duraflow_wake"

// PGListenerConfig configures a PGListener.
type PGListenerConfig struct {
	// ConnString is the database the store uses, as the store takes it (a
	// URL or keyword/value string; pool_ parameters are the store's and are
	// ignored here). Required.
	ConnString string
	// Channel is the notification channel.
	//
	// Defaults to DefaultWakeChannel.
	Channel string
	// WakeFunc is called with the notification's payload, the workflow name
	// whose work became due, and with "" after every (re)connection, since
	// notifications sent while disconnected are lost. Required.
	WakeFunc func(workflowName string)
	// Logger receives connection problems.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// ReconnectDelay is the first wait after a failed or dropped connection;
	// it doubles up to MaxReconnectDelay.
	//
	// Defaults to 100 milliseconds.
	ReconnectDelay time.Duration
	// MaxReconnectDelay bounds the wait between reconnection attempts.
	//
	// Defaults to 5 seconds.
	MaxReconnectDelay time.Duration
}

// PGListener wakes runners across processes: it LISTENs on the channel the
// Postgres store NOTIFYs in every transaction that makes work due, and calls
// WakeFunc for each notification. A dropped connection is re-established
// with backoff; work is never lost meanwhile, because runners keep polling.
type PGListener struct {
	cfg PGListenerConfig
	// conn is ConnString parsed as the store parses it, without the pool's
	// own parameters (pool_max_conns and the like), which the server would
	// reject as unknown settings.
	conn *pgx.ConnConfig

	mu        sync.Mutex
	connected chan struct{}
}

// NewPGListener returns a listener; Run starts it.
func NewPGListener(cfg *PGListenerConfig) (*PGListener, error) {
	if cfg == nil || cfg.ConnString == "" || cfg.WakeFunc == nil {
		return nil, errors.New("dispatcher: PGListenerConfig needs ConnString and WakeFunc")
	}
	c := *cfg
	c.Channel = cmp.Or(c.Channel, DefaultWakeChannel)
	c.ReconnectDelay = cmp.Or(c.ReconnectDelay, 100*time.Millisecond)
	c.MaxReconnectDelay = cmp.Or(c.MaxReconnectDelay, 5*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	pc, err := pgxpool.ParseConfig(c.ConnString)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: parsing the listener's connection string: %w", err)
	}
	return &PGListener{cfg: c, conn: pc.ConnConfig, connected: make(chan struct{})}, nil
}

// Connected returns a channel that is closed once the listener is listening;
// after a reconnection a new channel is returned. Tests use it to know when a
// notification can no longer be missed.
func (l *PGListener) Connected() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.connected
}

// Run listens until ctx is done, reconnecting after failures, and returns
// ctx's error.
func (l *PGListener) Run(ctx context.Context) error {
	delay := l.cfg.ReconnectDelay
	for {
		err := l.listen(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.cfg.Logger.Warn("wake listener disconnected; reconnecting", "error", err, "in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, l.cfg.MaxReconnectDelay)
		if err == nil {
			delay = l.cfg.ReconnectDelay
		}
	}
}

// listen holds one connection until it fails.
func (l *PGListener) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.conn)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.cfg.Channel}.Sanitize()); err != nil {
		return fmt.Errorf("listening on %s: %w", l.cfg.Channel, err)
	}
	l.mu.Lock()
	close(l.connected)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.connected = make(chan struct{})
		l.mu.Unlock()
	}()
	// Anything that became due while we were not listening is found now.
	l.cfg.WakeFunc("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for notifications: %w", err)
		}
		l.cfg.WakeFunc(n.Payload)
	}
}
