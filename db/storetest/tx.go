package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// TxDriver gives the conformance suite the backend's own transactions, to
// check the creates in the caller's transaction (db.TxBinder).
type TxDriver struct {
	// Begin begins a transaction on the store's database, of the type the
	// store's BindTx takes.
	Begin func(ctx context.Context, store db.Store) (any, error)
	// Commit and Rollback end a transaction Begin returned.
	Commit   func(ctx context.Context, tx any) error
	Rollback func(ctx context.Context, tx any) error
	// Exec runs one statement without arguments in tx.
	Exec func(ctx context.Context, tx any, sql string) error
	// Count runs a query of one integer outside any transaction, once
	// none is open.
	Count func(ctx context.Context, store db.Store, sql string) (int, error)
	// ReadsWhileOpen is true when the store's reads neither wait for an
	// open transaction nor see what it wrote (false for an in-memory
	// SQLite database, whose one connection the transaction holds).
	ReadsWhileOpen bool
}

// RunTx runs the conformance cases of the creates in the caller's
// transaction: newStore as for Run, d the backend's transactions.
func RunTx(t *testing.T, newStore func(t *testing.T) db.Store, d *TxDriver) {
	t.Run("CommitCreatesWithTheCallersRows", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		tx := b.begin(t)
		b.exec(t, tx, "INSERT INTO business_order (id) VALUES ('o1')")
		deadline := b.at(time.Hour)
		res, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "o1", Params: json.RawMessage(`{"order":"o1"}`), Now: new(b.now),
			RecordHooks: true, Queue: "orders", Priority: 5, DeadlineAt: &deadline,
		})
		require.NoError(t, err)
		require.False(t, res.Deduplicated)
		require.Nil(t, res.LeasedTask)
		require.Equal(t, dftype.StatusQueued, res.Instance.Status)
		if d.ReadsWhileOpen {
			b.requireAbsent(t, "o1")
		}
		require.NoError(t, d.Commit(b.ctx, tx))

		inst := b.get(t, "o1")
		require.Equal(t, res.Instance, inst, "the create returns the instance as committed")
		require.Equal(t, "orders", inst.Queue)
		require.Equal(t, 5, inst.Priority)
		require.Equal(t, &deadline, inst.DeadlineAt)
		require.Equal(t, 1, b.orders(t))
		task := b.task(t, "o1")
		require.Equal(t, db.TaskKindRun, task.Kind)
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.Equal(t, []string{"create o1 0s"}, b.recorded(t))
		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{workflowName}, Max: 10, Now: b.now, LockedUntil: b.at(lease),
		})
		require.NoError(t, err)
		require.Equal(t, []string{"o1"}, taskIDs(taskList(claims)), "the committed instance is claimed")
	})

	t.Run("RollbackLeavesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		tx := b.begin(t)
		b.exec(t, tx, "INSERT INTO business_order (id) VALUES ('o1')")
		_, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "o1", Now: new(b.now), RecordHooks: true,
		})
		require.NoError(t, err)
		_, err = b.store.InstanceCreateMany(b.bind(t, tx), &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), RecordHooks: true,
			Instances: []db.InstanceCreateItem{{ID: "o2"}, {ID: "o3"}},
		})
		require.NoError(t, err)
		require.NoError(t, d.Rollback(b.ctx, tx))

		for _, id := range []string{"o1", "o2", "o3"} {
			b.requireAbsent(t, id)
		}
		require.Zero(t, b.orders(t))
		require.Empty(t, b.recorded(t), "no hook entry")
		require.Empty(t, b.claimAt(t, b.at(time.Hour), 10), "nothing to claim")
		if log, ok := b.store.(db.LifecycleStore); ok {
			events, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{})
			require.NoError(t, err)
			require.Empty(t, events, "no lifecycle event: the creates rolled back")
		}
		b.create(t, "o1") // the id is free
	})

	t.Run("CommitLogsTheCreates", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		log, ok := b.store.(db.LifecycleStore)
		if !ok {
			t.Skip("the store offers no db.LifecycleStore")
		}
		tx := b.begin(t)
		_, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{WorkflowName: workflowName, ID: "o1", Now: new(b.now)})
		require.NoError(t, err)
		_, err = b.store.InstanceCreateMany(b.bind(t, tx), &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), Instances: []db.InstanceCreateItem{{ID: "o2"}},
		})
		require.NoError(t, err)
		require.NoError(t, d.Commit(b.ctx, tx))
		events, err := log.LifecycleList(b.ctx, &db.LifecycleListParams{})
		require.NoError(t, err)
		var keys []string
		for _, e := range events {
			keys = append(keys, lifecycleKey(e))
		}
		require.Equal(t, []string{"instance.created o1", "instance.created o2"}, keys, "one event per create, committed with it")
	})

	t.Run("ClosedTxIsErrTxDone", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		for _, end := range []struct {
			name string
			end  func(ctx context.Context, tx any) error
		}{{"commit", d.Commit}, {"rollback", d.Rollback}} {
			tx := b.begin(t)
			require.NoError(t, end.end(b.ctx, tx))
			_, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
				WorkflowName: workflowName, ID: "after-" + end.name, Now: new(b.now),
			})
			require.ErrorIs(t, err, db.ErrTxDone, "a create in a transaction after its %s", end.name)
			_, err = b.store.InstanceCreateMany(b.bind(t, tx), &db.InstanceCreateManyParams{
				WorkflowName: workflowName, Now: new(b.now), Instances: []db.InstanceCreateItem{{ID: "many-" + end.name}},
			})
			require.ErrorIs(t, err, db.ErrTxDone, "a batch create in a transaction after its %s", end.name)
			b.requireAbsent(t, "after-"+end.name)
			b.requireAbsent(t, "many-"+end.name)
		}
	})

	t.Run("WrongTxTypeIsErrTxNotSupported", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		for _, tx := range []any{nil, "tx", 42, b.store} {
			_, err := b.binder(t).BindTx(b.ctx, tx)
			require.ErrorIs(t, err, db.ErrTxNotSupported, "%T", tx)
		}
	})

	t.Run("FailedCreateKeepsTheTxUsable", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		b.create(t, "taken")
		tx := b.begin(t)
		b.exec(t, tx, "INSERT INTO business_order (id) VALUES ('o1')")
		_, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "taken", Now: new(b.now),
		})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		_, err = b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "o1", Now: new(b.now),
		})
		require.NoError(t, err, "the transaction takes more statements after the failed create")
		b.exec(t, tx, "INSERT INTO business_order (id) VALUES ('o2')")
		require.NoError(t, d.Commit(b.ctx, tx))
		require.Equal(t, 2, b.orders(t))
		require.Equal(t, dftype.StatusQueued, b.get(t, "o1").Status)
	})

	t.Run("CreateMany", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		b.create(t, "taken")
		tx := b.begin(t)
		created, err := b.store.InstanceCreateMany(b.bind(t, tx), &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), RecordHooks: true,
			Instances: []db.InstanceCreateItem{{ID: "a"}, {ID: "taken"}, {ID: "b", Priority: 3}},
		})
		require.NoError(t, err)
		require.Len(t, created, 2)
		require.Equal(t, "a", created[0].Instance.ID)
		require.Equal(t, "b", created[1].Instance.ID)
		b.exec(t, tx, "INSERT INTO business_order (id) VALUES ('batch')")
		if d.ReadsWhileOpen {
			b.requireAbsent(t, "a")
		}
		require.NoError(t, d.Commit(b.ctx, tx))
		require.Equal(t, 1, b.orders(t))
		require.Equal(t, 3, b.get(t, "b").Priority)
		require.ElementsMatch(t, []string{"create a 0s", "create b 0s"}, b.recorded(t))
		tasks := b.claimAt(t, b.now, 10)
		require.ElementsMatch(t, []string{"a", "b", "taken"}, taskIDs(tasks))
	})

	t.Run("DedupeKey", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "holder", Now: new(b.now), DedupeKey: "k1",
		})
		require.NoError(t, err)
		tx := b.begin(t)
		res, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "second", Now: new(b.now), DedupeKey: "k1",
		})
		require.NoError(t, err)
		require.True(t, res.Deduplicated, "a committed holder is found in the transaction")
		require.Equal(t, "holder", res.Instance.ID)

		res, err = b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "x", Now: new(b.now), DedupeKey: "k2",
		})
		require.NoError(t, err)
		require.False(t, res.Deduplicated)
		res, err = b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "y", Now: new(b.now), DedupeKey: "k2",
		})
		require.NoError(t, err)
		require.True(t, res.Deduplicated, "an instance the transaction created holds its key in it")
		require.Equal(t, "x", res.Instance.ID)
		created, err := b.store.InstanceCreateMany(b.bind(t, tx), &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now),
			Instances: []db.InstanceCreateItem{{ID: "z", DedupeKey: "k2"}, {ID: "w", DedupeKey: "k3"}},
		})
		require.NoError(t, err)
		require.Len(t, created, 2)
		require.True(t, created[0].Deduplicated)
		require.Equal(t, "x", created[0].Instance.ID)
		require.Equal(t, "w", created[1].Instance.ID)
		require.NoError(t, d.Commit(b.ctx, tx))

		for _, id := range []string{"second", "y", "z"} {
			b.requireAbsent(t, id)
		}
		require.Equal(t, "k2", b.get(t, "x").DedupeKey)
		require.Equal(t, "k3", b.get(t, "w").DedupeKey)
	})

	t.Run("RolledBackDedupeKeyIsFree", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		tx := b.begin(t)
		_, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "x", Now: new(b.now), DedupeKey: "k",
		})
		require.NoError(t, err)
		require.NoError(t, d.Rollback(b.ctx, tx))
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "y", Now: new(b.now), DedupeKey: "k",
		})
		require.NoError(t, err)
		require.False(t, res.Deduplicated)
	})

	t.Run("RolledBackLimitSlotIsFree", func(t *testing.T) {
		t.Parallel()
		b := setupTx(t, newStore, d)
		limits := []db.LimitSpec{{Scope: db.WorkflowScope(workflowName), Define: true, MaxRunning: 1}}
		tx := b.begin(t)
		res, err := b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "x", Now: new(b.now), Limits: limits,
		})
		require.NoError(t, err)
		require.True(t, res.Instance.Limited)
		require.NoError(t, d.Rollback(b.ctx, tx))

		res, err = b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "y", Now: new(b.now), Limits: limits,
		})
		require.NoError(t, err)
		require.Equal(t, []string{"y"}, taskIDs(b.claimAt(t, b.now, 10)), "the slot the rolled-back create took is free")

		tx = b.begin(t)
		_, err = b.store.InstanceCreate(b.bind(t, tx), &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "z", Now: new(b.now), Limits: limits,
		})
		require.NoError(t, err)
		require.NoError(t, d.Commit(b.ctx, tx))
		_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "z"})
		require.ErrorIs(t, err, db.ErrNotFound, "a committed create waits for a slot as any other")
		require.Equal(t, dftype.StatusQueued, b.get(t, "z").Status)
	})
}

type txBundle struct {
	*testBundle
	d *TxDriver
}

func setupTx(t *testing.T, newStore func(t *testing.T) db.Store, d *TxDriver) *txBundle {
	t.Helper()
	b := &txBundle{testBundle: setup(t, newStore), d: d}
	tx := b.begin(t)
	b.exec(t, tx, "CREATE TABLE business_order (id TEXT PRIMARY KEY)")
	require.NoError(t, d.Commit(b.ctx, tx))
	return b
}

func (b *txBundle) binder(t *testing.T) db.TxBinder {
	t.Helper()
	binder, ok := b.store.(db.TxBinder)
	if !ok {
		t.Skip("the store offers no db.TxBinder")
	}
	return binder
}

// begin begins a transaction that is rolled back at the end of the test
// if it is still open.
func (b *txBundle) begin(t *testing.T) any {
	t.Helper()
	tx, err := b.d.Begin(b.ctx, b.store)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.d.Rollback(context.Background(), tx) })
	return tx
}

func (b *txBundle) bind(t *testing.T, tx any) context.Context {
	t.Helper()
	ctx, err := b.binder(t).BindTx(b.ctx, tx)
	require.NoError(t, err)
	return ctx
}

func (b *txBundle) exec(t *testing.T, tx any, sql string) {
	t.Helper()
	require.NoError(t, b.d.Exec(b.ctx, tx, sql))
}

// orders counts the committed rows of the caller's table.
func (b *txBundle) orders(t *testing.T) int {
	t.Helper()
	n, err := b.d.Count(b.ctx, b.store, "SELECT count(*) FROM business_order")
	require.NoError(t, err)
	return n
}

// requireAbsent requires that the instance and its task do not exist.
func (b *txBundle) requireAbsent(t *testing.T, id string) {
	t.Helper()
	_, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	require.ErrorIs(t, err, db.ErrNotFound, "instance %s", id)
	_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	require.ErrorIs(t, err, db.ErrNotFound, "task of %s", id)
}
