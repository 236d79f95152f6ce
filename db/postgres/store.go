package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// WakeChannel is the default channel of the store's wake notifications.
//
// Every transaction that makes a task due now also sends
// pg_notify(channel, workflow_name) in that transaction, so the notification
// reaches LISTENing runners when, and only when, the change commits.
// Notifications only make work start sooner: a runner that misses one still
// finds the task when it next polls.
const WakeChannel = "duraflow_wake"

// Store implements db.Store over a pgx connection pool. It is safe for
// concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	queries     *pgsqlc.Queries
	ownsPool    bool
	wakeChannel string
	listen      listenConfig
	// txBound is set once BindTx was called: until then no call looks for
	// a caller's transaction in its context.
	txBound atomic.Bool
	// lifecycleOff is set while the lifecycle event log is off
	// (LifecycleLogSet).
	lifecycleOff atomic.Bool
}

var (
	_ db.Store             = (*Store)(nil)
	_ db.BatchCheckpointer = (*Store)(nil)
)

// Option changes how New and Open build a Store.
type Option func(*Store)

// WithWakeChannel sets the channel the store sends its wake notifications on,
// so that several deployments (or tests) sharing one database do not wake
// each other's runners. LISTEN on the same name; Postgres limits channel
// names to 63 bytes. An empty name keeps the default.
//
// Defaults to WakeChannel.
func WithWakeChannel(name string) Option {
	return func(s *Store) {
		if name != "" {
			s.wakeChannel = name
		}
	}
}

// New returns a Store over pool. The caller keeps ownership of the pool: Close
// does not close it. The pool's database must have been migrated (Migrate).
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, queries: pgsqlc.New(pool), wakeChannel: WakeChannel}
	for _, opt := range opts {
		opt(s)
	}
	return s
}

// Open creates a connection pool for the database URL and returns a Store that
// owns it, so Close closes the pool. It does not migrate. The URL's
// parameters are pgx's (pgxpool.ParseConfig): behind PgBouncer in
// transaction mode, add default_query_exec_mode=cache_describe (see
// "Behind PgBouncer" in docs/operations.md). The modes exec and
// simple_protocol are refused: they send JSON parameters as bytea.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("opening postgres pool: %w", err)
	}
	s := New(pool, opts...)
	s.ownsPool = true
	if err := cmp.Or(checkExecMode(pool.Config().ConnConfig), s.listen.urlErr); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// WakeChannel returns the channel the store sends its wake notifications on;
// the payload of each is the name of the workflow whose work became due.
func (s *Store) WakeChannel() string { return s.wakeChannel }

// Pool returns the connection pool the store runs on, for the few callers
// that need the database itself (LISTEN/NOTIFY, migrations).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool when Open created it; a pool passed to New is left to
// its owner.
func (s *Store) Close() error {
	if s.ownsPool {
		s.pool.Close()
	}
	return nil
}

// Ping checks that the database answers, on a connection of the pool. It
// also reports a configuration the store cannot run with: a query exec
// mode it does not support (see Open).
func (s *Store) Ping(ctx context.Context) error {
	if err := checkExecMode(s.pool.Config().ConnConfig); err != nil {
		return err
	}
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pinging postgres: %w", interpretError(err))
	}
	return nil
}

// inTx runs fn in one transaction and commits it when fn returns nil. Any
// error rolls everything back, so a failed call changes nothing. Under a
// context bound to the caller's transaction (BindTx) fn runs in a savepoint
// of it instead, and nothing is committed.
func (s *Store) inTx(ctx context.Context, fn func(q *pgsqlc.Queries) error) error {
	if tx := s.callerTx(ctx); tx != nil {
		return inCallerTx(ctx, tx, fn)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(s.queries.WithTx(tx)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return nil
}

// notifyWake sends the wake notification for a workflow inside the caller's
// transaction; Postgres delivers it at commit and drops it on rollback.
func (s *Store) notifyWake(ctx context.Context, q *pgsqlc.Queries, workflowName string) error {
	return q.WakeNotify(ctx, pgsqlc.WakeNotifyParams{Channel: s.wakeChannel, WorkflowName: workflowName})
}

// isNoRows reports whether err means a query matched no row.
func isNoRows(err error) bool {
	return errors.Is(err, pgx.ErrNoRows)
}
