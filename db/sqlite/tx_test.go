package sqlite_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/db/storetest"
)

// sqlTxDriver is storetest's access to transactions on the store's DB.
func sqlTxDriver(readsWhileOpen bool) *storetest.TxDriver {
	return &storetest.TxDriver{
		Begin: func(ctx context.Context, store db.Store) (any, error) {
			return store.(*sqlite.Store).DB().BeginTx(ctx, nil)
		},
		Commit:   func(_ context.Context, tx any) error { return tx.(*sql.Tx).Commit() },
		Rollback: func(_ context.Context, tx any) error { return tx.(*sql.Tx).Rollback() },
		Exec: func(ctx context.Context, tx any, q string) error {
			_, err := tx.(*sql.Tx).ExecContext(ctx, q)
			return err
		},
		Count: func(ctx context.Context, store db.Store, q string) (int, error) {
			var n int
			err := store.(*sqlite.Store).DB().QueryRowContext(ctx, q).Scan(&n)
			return n, err
		},
		ReadsWhileOpen: readsWhileOpen,
	}
}

func TestStoreTx(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		storetest.RunTx(t, func(t *testing.T) db.Store { return sqlitetest.NewStore(t) }, sqlTxDriver(false))
	})
	t.Run("File", func(t *testing.T) {
		t.Parallel()
		storetest.RunTx(t, func(t *testing.T) db.Store { return sqlitetest.NewFileStore(t) }, sqlTxDriver(true))
	})
}
