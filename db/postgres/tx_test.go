package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/storetest"
)

// pgxTxDriver is storetest's access to pgx transactions on the store's pool.
var pgxTxDriver = &storetest.TxDriver{
	Begin: func(ctx context.Context, store db.Store) (any, error) {
		return store.(*postgres.Store).Pool().Begin(ctx)
	},
	Commit:   func(ctx context.Context, tx any) error { return tx.(pgx.Tx).Commit(ctx) },
	Rollback: func(ctx context.Context, tx any) error { return tx.(pgx.Tx).Rollback(ctx) },
	Exec: func(ctx context.Context, tx any, sql string) error {
		_, err := tx.(pgx.Tx).Exec(ctx, sql)
		return err
	},
	Count: func(ctx context.Context, store db.Store, sql string) (int, error) {
		var n int
		err := store.(*postgres.Store).Pool().QueryRow(ctx, sql).Scan(&n)
		return n, err
	},
	ReadsWhileOpen: true,
}

func TestStoreTx(t *testing.T) {
	t.Parallel()
	storetest.RunTx(t, func(t *testing.T) db.Store { return pgtest.NewStore(t) }, pgxTxDriver)
}

// TestTxWakeNotification: a create in the caller's transaction notifies the
// wake channel when the transaction commits, not before, and never when it
// rolls back.
func TestTxWakeNotification(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := pgtest.NewStore(t)
	l := listen(t, store)

	create := func(t *testing.T, id string, many bool) pgx.Tx {
		t.Helper()
		tx, err := store.Pool().Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		txCtx, err := store.BindTx(ctx, tx)
		require.NoError(t, err)
		if many {
			_, err = store.InstanceCreateMany(txCtx, &db.InstanceCreateManyParams{
				WorkflowName: "billing", Instances: []db.InstanceCreateItem{{ID: id}},
			})
		} else {
			_, err = store.InstanceCreate(txCtx, &db.InstanceCreateParams{WorkflowName: "billing", ID: id})
		}
		require.NoError(t, err)
		return tx
	}

	for _, many := range []bool{false, true} {
		tx := create(t, fmt.Sprintf("committed-%v", many), many)
		l.requireNone(t, "nothing is notified before the commit")
		require.NoError(t, tx.Commit(ctx))
		l.requireNext(t, "billing", "the commit notifies")

		tx = create(t, fmt.Sprintf("rolled-back-%v", many), many)
		require.NoError(t, tx.Rollback(ctx))
		l.requireNone(t, "a rollback notifies nothing")
	}
}

// TestTxAborted: a create in a transaction an earlier error aborted is
// db.ErrTxDone, and writes nothing.
func TestTxAborted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := pgtest.NewStore(t)
	tx, err := store.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, "SELECT 1/0")
	require.Error(t, err)
	txCtx, err := store.BindTx(ctx, tx)
	require.NoError(t, err)
	_, err = store.InstanceCreate(txCtx, &db.InstanceCreateParams{WorkflowName: "billing", ID: "a"})
	require.ErrorIs(t, err, db.ErrTxDone)
	require.NoError(t, tx.Rollback(ctx))
	_, err = store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "billing", ID: "a"})
	require.ErrorIs(t, err, db.ErrNotFound)
}
