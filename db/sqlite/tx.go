package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

var _ db.TxBinder = (*Store)(nil)

// callerTxKey is the context key of the caller's transaction (BindTx).
type callerTxKey struct{}

// DB returns the store's write handle: one connection whose transactions
// are BEGIN IMMEDIATE. Begin on it the transactions given to BindTx
// (client.CreateTx), so that they take SQLite's write lock before they read
// and write the store's database; for an in-memory database it is the only
// way to reach it. While such a transaction is open every other write of
// the store (and, in memory, every read) waits for it, as SQLite has one
// writer at a time: keep it short, and make no other call of the store
// from the goroutine that holds it, except under the context BindTx
// returned.
//
// DB prepares the store's statements first (on a migrated database), which
// takes the write connection: a store that prepared them later would wait
// for a transaction begun on DB to end.
func (s *Store) DB() *sql.DB {
	s.queriesFor(context.Background(), true)
	return s.write
}

// BindTx implements db.TxBinder: tx must be a *sql.Tx on the store's
// database, best begun on DB. Under the returned context InstanceCreate and
// InstanceCreateMany write in a savepoint of tx, and the store's reads
// read through tx, so that a call under it never waits for the connection
// tx holds. SQLite sends no wake notification: after the commit, the
// caller's process wakes its runners (client.CreateTx returns the function
// that does), and runners of other processes find the work when they poll.
//
// A transaction begun on another handle of the same file must be
// BEGIN IMMEDIATE (the DSN's _txlock=immediate) and have a busy_timeout:
// a deferred one that reads before it writes fails with SQLITE_BUSY when
// another writer committed in between.
func (s *Store) BindTx(ctx context.Context, tx any) (context.Context, error) {
	stx, ok := tx.(*sql.Tx)
	if !ok || stx == nil {
		return nil, fmt.Errorf("%w: the sqlite store takes a *sql.Tx, got %T", db.ErrTxNotSupported, tx)
	}
	s.txBound.Store(true)
	return context.WithValue(ctx, callerTxKey{}, stx), nil
}

// callerTx returns the caller's transaction ctx is bound to, or nil. A
// store whose BindTx was never called answers without looking.
func (s *Store) callerTx(ctx context.Context) *sql.Tx {
	if !s.txBound.Load() {
		return nil
	}
	tx, _ := ctx.Value(callerTxKey{}).(*sql.Tx)
	return tx
}

// savepoint is the name of the savepoint a call in the caller's
// transaction writes in.
const savepoint = "duraflow_call"

// inCallerTx is inTx in the caller's transaction: fn runs in a savepoint of
// tx, released when fn returns nil and rolled back to otherwise, so a failed
// call changes nothing and leaves tx usable. Nothing is committed. The
// statements are not the prepared ones: those belong to the store's
// handle, and tx may be of another.
func (s *Store) inCallerTx(ctx context.Context, tx *sql.Tx, fn func(q *litesqlc.Queries) error) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
		return txError(err)
	}
	if err := fn(s.queries.WithTx(tx)); err != nil {
		bg := context.WithoutCancel(ctx)
		_, _ = tx.ExecContext(bg, "ROLLBACK TO "+savepoint)
		_, _ = tx.ExecContext(bg, "RELEASE "+savepoint)
		return txError(err)
	}
	_, err := tx.ExecContext(ctx, "RELEASE "+savepoint)
	return txError(err)
}

// txError maps the error of a committed or rolled-back caller's
// transaction onto db.ErrTxDone.
func txError(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("%w: %w", db.ErrTxDone, err)
	}
	return err
}
