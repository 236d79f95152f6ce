package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3/lock"
)

// migrationLockTimeout is how long Migrate waits for another process's
// migrations to finish.
const migrationLockTimeout = 5 * time.Minute

// migrationLocker is the goose lock.Locker of Migrate: a transaction-level
// advisory lock (pg_advisory_xact_lock), keyed by the schema, taken in a
// transaction of a connection of its own (opened with the pool's
// configuration, outside the pool) and held until Unlock ends the
// transaction.
//
// It keeps no state between transactions, unlike goose's session locker,
// whose session-level lock is taken and released by two transactions of a
// pooled connection: behind a pooler in transaction mode (PgBouncer), those
// two may run on different server connections, so the lock is not released
// (it stays on a server connection that other clients then borrow, for
// whom it is already held), and a second migrator that borrows the
// holder's server connection takes it again, the lock being re-entrant. An
// open transaction keeps its server connection, behind a pooler too. A
// process that dies while it holds the lock drops its connection, which
// ends the transaction and frees the lock.
type migrationLocker struct {
	conf *pgx.ConnConfig
	id   int64

	mu   sync.Mutex
	conn *pgx.Conn // the connection whose transaction holds the lock
}

var _ lock.Locker = (*migrationLocker)(nil)

// newMigrationLocker returns the migration locker of schema, whose
// connection is configured by conf.
func newMigrationLocker(conf *pgx.ConnConfig, schema string) *migrationLocker {
	return &migrationLocker{conf: conf.Copy(), id: migrationLockID(schema)}
}

// migrationLockID is the advisory lock key of the migrations of schema.
func migrationLockID(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("duraflow migrations " + schema))
	return int64(h.Sum64())
}

// Lock implements lock.Locker: it waits up to migrationLockTimeout for the
// lock. The database/sql handle goose passes is not used.
func (l *migrationLocker) Lock(ctx context.Context, _ *sql.DB) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		return errors.New("migration lock already held")
	}
	conn, err := pgx.ConnectConfig(ctx, l.conf)
	if err != nil {
		return fmt.Errorf("connecting for the migration lock: %w", err)
	}
	// One simple query, no prepared statement. The transaction stays idle
	// while the migrations run on other connections: a server-wide
	// idle_in_transaction_session_timeout must not end it. SET LOCAL:
	// nothing outlives the transaction.
	_, err = conn.Exec(ctx, fmt.Sprintf("BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0; "+
		"SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = %d; SELECT pg_advisory_xact_lock(%d)",
		migrationLockTimeout.Milliseconds(), l.id))
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("waiting for the migration lock (another process migrating?): %w", err)
	}
	l.conn = conn
	return nil
}

// Unlock implements lock.Locker: it ends the transaction that holds the
// lock and closes its connection.
func (l *migrationLocker) Unlock(ctx context.Context, _ *sql.DB) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return errors.New("migration lock not held")
	}
	conn := l.conn
	l.conn = nil
	_, err := conn.Exec(ctx, "ROLLBACK")
	if cerr := conn.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("releasing the migration lock: %w", err)
	}
	return nil
}
