package db

import (
	"context"
	"errors"
)

// Errors of the calls a Store makes in the caller's own transaction (see
// TxBinder).
var (
	// ErrTxDone means the caller's transaction can take no more
	// statements: it was committed or rolled back (pgx.ErrTxClosed,
	// sql.ErrTxDone), or, on Postgres, an earlier statement of it failed
	// and it can only be rolled back. Nothing was written.
	ErrTxDone = errors.New("db: the transaction is committed, rolled back or failed")
	// ErrTxNotSupported means the store cannot work in the transaction it
	// was given: it is of a type the backend does not take (Postgres takes
	// a pgx.Tx, SQLite a *sql.Tx), or the store offers no TxBinder.
	ErrTxNotSupported = errors.New("db: the store cannot work in this transaction")
)

// TxBinder is the capability of a Store to create instances inside the
// caller's own database transaction, so that the instances, their tasks
// and the caller's own rows commit or roll back together (client.CreateTx).
// Both backends offer it; a store that does not is refused by
// client.CreateTx with ErrTxNotSupported.
type TxBinder interface {
	// BindTx returns ctx bound to tx, a transaction on the store's
	// database. Under the returned context InstanceCreate and
	// InstanceCreateMany write in tx, inside a savepoint: they never
	// commit it, and a create that fails rolls back to the savepoint, so
	// tx stays usable. Their wake notification, where the backend sends
	// one (Postgres), is part of tx: it is delivered at commit and
	// dropped on rollback. The caller must not set a Lease under it: a
	// leased task would reach a runner before the commit. Reads of the
	// store under it read through tx where the backend's own connections
	// could not (SQLite, whose in-memory database has a single
	// connection); other calls under it are not supported.
	//
	// A closed transaction is ErrTxDone, a transaction of the wrong type
	// ErrTxNotSupported; a transaction on another database is not
	// detected: the instances are written to that database.
	BindTx(ctx context.Context, tx any) (context.Context, error)
}
