package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// pgInFailedTx is the SQLSTATE of a statement sent to a transaction that an
// earlier error aborted.
const pgInFailedTx = "25P02"

var _ db.TxBinder = (*Store)(nil)

// callerTxKey is the context key of the caller's transaction (BindTx).
type callerTxKey struct{}

// BindTx implements db.TxBinder: tx must be a pgx.Tx (a *pgxpool.Tx or a
// transaction of a pgx connection) on the store's database and schema,
// typically begun on Pool. Under the returned context InstanceCreate and
// InstanceCreateMany write in a savepoint of tx, and their pg_notify on the
// wake channel is part of tx, so LISTENing runners are woken when tx
// commits and never when it rolls back. A tx on another database or
// search_path is not detected: the instances go there.
func (s *Store) BindTx(ctx context.Context, tx any) (context.Context, error) {
	ptx, ok := tx.(pgx.Tx)
	if !ok || ptx == nil {
		return nil, fmt.Errorf("%w: the postgres store takes a pgx.Tx, got %T", db.ErrTxNotSupported, tx)
	}
	s.txBound.Store(true)
	return context.WithValue(ctx, callerTxKey{}, ptx), nil
}

// callerTx returns the caller's transaction ctx is bound to, or nil. A
// store whose BindTx was never called answers without looking.
func (s *Store) callerTx(ctx context.Context) pgx.Tx {
	if !s.txBound.Load() {
		return nil
	}
	tx, _ := ctx.Value(callerTxKey{}).(pgx.Tx)
	return tx
}

// inCallerTx is inTx in the caller's transaction: fn runs in a savepoint of
// tx, released when fn returns nil and rolled back to otherwise, so a failed
// call changes nothing and leaves tx usable. Nothing is committed.
func inCallerTx(ctx context.Context, tx pgx.Tx, fn func(q *pgsqlc.Queries) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return txError(err)
	}
	defer func() { _ = sp.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(pgsqlc.New(sp)); err != nil {
		return txError(err)
	}
	return txError(sp.Commit(ctx))
}

// txError maps the errors of a closed or aborted caller's transaction onto
// db.ErrTxDone, keeping the driver's message.
func txError(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrTxClosed) || errors.As(err, &pgErr) && pgErr.Code == pgInFailedTx {
		return fmt.Errorf("%w: %w", db.ErrTxDone, err)
	}
	return err
}
