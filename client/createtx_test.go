package client_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// appTx is a transaction of the application, on the store's database.
type appTx struct {
	tx       any
	exec     func(sql string) error
	commit   func() error
	rollback func() error
}

// beginApp begins a transaction as an application would: a pgx.Tx on the
// Postgres store's pool, a *sql.Tx on the SQLite store's DB. It is rolled
// back at the end of the test if still open.
func beginApp(t *testing.T, store db.Store) *appTx {
	t.Helper()
	ctx := t.Context()
	var a *appTx
	switch s := store.(type) {
	case *postgres.Store:
		tx, err := s.Pool().Begin(ctx)
		require.NoError(t, err)
		a = &appTx{
			tx:       tx,
			exec:     func(q string) error { _, err := tx.Exec(ctx, q); return err },
			commit:   func() error { return tx.Commit(ctx) },
			rollback: func() error { return tx.Rollback(context.Background()) },
		}
	case *sqlite.Store:
		tx, err := s.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		a = &appTx{
			tx:       tx,
			exec:     func(q string) error { _, err := tx.ExecContext(ctx, q); return err },
			commit:   tx.Commit,
			rollback: tx.Rollback,
		}
	default:
		t.Fatalf("no transactions for store %T", store)
	}
	t.Cleanup(func() { _ = a.rollback() })
	return a
}

// orderCount counts the committed rows of the application's order table.
func orderCount(t *testing.T, store db.Store) int {
	t.Helper()
	var n int
	const q = "SELECT count(*) FROM app_order"
	switch s := store.(type) {
	case *postgres.Store:
		require.NoError(t, s.Pool().QueryRow(t.Context(), q).Scan(&n))
	case *sqlite.Store:
		require.NoError(t, s.DB().QueryRowContext(t.Context(), q).Scan(&n))
	}
	return n
}

// wakes records the client's wake-ups.
type wakes struct {
	mu    sync.Mutex
	names []string
}

func (w *wakes) wake(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names = append(w.names, name)
}

func (w *wakes) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.names...)
}

// eagerSpy is an eager starter that records what it was asked for.
type eagerSpy struct{ reserved int }

func (e *eagerSpy) ReserveEager(string, int) *db.CreateLease      { e.reserved++; return nil }
func (e *eagerSpy) StartEager(*db.CreateLease, []db.CreateResult) {}

// setupTx is setup with the application's order table, and a client of its
// own on the harness's store whose wake-ups and eager-start requests the
// test sees; the registry's bindings go through it.
func setupTx(t *testing.T, b testharness.Backend) (*testharness.Harness, *workflow.Binding[params, string], *client.Client, *wakes, *eagerSpy) {
	t.Helper()
	h, greet := setup(t, b)
	tx := beginApp(t, h.Store)
	require.NoError(t, tx.exec("CREATE TABLE app_order (id TEXT PRIMARY KEY)"))
	require.NoError(t, tx.commit())
	w, eager := &wakes{}, &eagerSpy{}
	c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, WakeFunc: w.wake, EagerStarter: eager})
	require.NoError(t, err)
	h.Registry.Bind(c)
	return h, greet, c, w, eager
}

func TestCreateTxCommitRunsIt(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet, _, w, eager := setupTx(t, b)
		ctx := h.Context()

		tx := beginApp(t, h.Store)
		require.NoError(t, tx.exec("INSERT INTO app_order (id) VALUES ('o1')"))
		inst, afterCommit, err := greet.CreateTx(ctx, tx.tx, workflow.CreateOptions[params]{ID: "o1", Params: params{Name: "Ada"}})
		require.NoError(t, err)
		require.Equal(t, "o1", inst.ID())
		require.Empty(t, w.list(), "nothing is woken before the commit")
		require.NoError(t, tx.commit())
		require.Empty(t, w.list(), "nothing is woken until AfterCommit")
		afterCommit()
		afterCommit()
		require.Equal(t, []string{"greet"}, w.list(), "AfterCommit wakes once")
		require.Zero(t, eager.reserved, "a create in a transaction starts nothing eagerly")

		h.RequireStatus("greet", "o1", dftype.StatusQueued)
		require.Equal(t, 1, orderCount(t, h.Store))
		h.RunUntilIdle()
		requireGreeting(t, h, "o1", "hello Ada")
	})
}

func TestCreateTxRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet, c, w, _ := setupTx(t, b)
		ctx := h.Context()

		tx := beginApp(t, h.Store)
		require.NoError(t, tx.exec("INSERT INTO app_order (id) VALUES ('o1')"))
		_, _, err := greet.CreateTx(ctx, tx.tx, workflow.CreateOptions[params]{ID: "o1"})
		require.NoError(t, err)
		_, _, err = c.CreateBatchTx(ctx, tx.tx, "greet", []dftype.CreateRequest{{ID: "o2"}, {ID: "o3"}})
		require.NoError(t, err)
		require.NoError(t, tx.rollback())

		require.Empty(t, w.list(), "a rollback wakes nothing")
		requireNothingWritten(t, h)
		require.Zero(t, orderCount(t, h.Store))
		require.Zero(t, h.RunDue(), "no task is left to run")
		_, err = greet.Create(ctx, workflow.CreateOptions[params]{ID: "o1"})
		require.NoError(t, err, "the id is free")
	})
}

func TestCreateTxBatch(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet, c, w, eager := setupTx(t, b)
		ctx := h.Context()
		_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "taken"})
		require.NoError(t, err)
		w.names, eager.reserved = nil, 0

		tx := beginApp(t, h.Store)
		infos, afterCommit, err := c.CreateBatchTx(ctx, tx.tx, "greet", []dftype.CreateRequest{
			{ID: "a", Params: []byte(`{"name":"A"}`)}, {ID: "taken"}, {ID: "b", Params: []byte(`{"name":"B"}`)},
		})
		require.NoError(t, err)
		require.Len(t, infos, 2, "an existing id is skipped")
		insts, _, err := greet.CreateBatchTx(ctx, tx.tx, []workflow.CreateOptions[params]{{ID: "c", Params: params{Name: "C"}}})
		require.NoError(t, err)
		require.Equal(t, "c", insts[0].ID())
		require.NoError(t, tx.exec("INSERT INTO app_order (id) VALUES ('batch')"))
		require.NoError(t, tx.commit())
		afterCommit()
		require.Equal(t, []string{"greet"}, w.list())
		require.Zero(t, eager.reserved)

		h.RunUntilIdle()
		for id, out := range map[string]string{"a": "hello A", "b": "hello B", "c": "hello C"} {
			requireGreeting(t, h, id, out)
		}
		require.Equal(t, 1, orderCount(t, h.Store))
	})
}

func TestCreateTxDedupeKey(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet, c, w, _ := setupTx(t, b)
		ctx := h.Context()
		_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "holder", DedupeKey: "order-1"})
		require.NoError(t, err)
		w.names = nil

		tx := beginApp(t, h.Store)
		info, afterCommit, err := c.CreateTx(ctx, tx.tx, "greet", dftype.CreateRequest{ID: "again", DedupeKey: "order-1"})
		require.NoError(t, err)
		require.True(t, info.Deduplicated)
		require.Equal(t, "holder", info.ID)
		info, _, err = c.CreateTx(ctx, tx.tx, "greet", dftype.CreateRequest{ID: "new", DedupeKey: "order-2"})
		require.NoError(t, err)
		require.False(t, info.Deduplicated)
		info, _, err = c.CreateTx(ctx, tx.tx, "greet", dftype.CreateRequest{ID: "new-again", DedupeKey: "order-2"})
		require.NoError(t, err)
		require.True(t, info.Deduplicated, "the transaction's own instance holds its key")
		require.Equal(t, "new", info.ID)
		require.NoError(t, tx.commit())
		afterCommit()
		require.Empty(t, w.list(), "a deduplicated create woke nothing")

		_, err = c.Get(ctx, "greet", "again")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
		_, err = c.Get(ctx, "greet", "new-again")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
		h.RequireStatus("greet", "new", dftype.StatusQueued)
	})
}

func TestCreateTxBadInput(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet, c, w, _ := setupTx(t, b)
		ctx := h.Context()

		t.Run("ClosedTx", func(t *testing.T) {
			for _, end := range []string{"commit", "rollback"} {
				tx := beginApp(t, h.Store)
				if end == "commit" {
					require.NoError(t, tx.commit())
				} else {
					require.NoError(t, tx.rollback())
				}
				_, afterCommit, err := greet.CreateTx(ctx, tx.tx, workflow.CreateOptions[params]{ID: "late"})
				require.ErrorIs(t, err, workflow.ErrTxDone, "after %s", end)
				require.NotNil(t, afterCommit, "the func is never nil")
				afterCommit()
				_, _, err = c.CreateBatchTx(ctx, tx.tx, "greet", []dftype.CreateRequest{{ID: "late"}})
				require.ErrorIs(t, err, workflow.ErrTxDone, "after %s", end)
			}
			requireNothingWritten(t, h)
		})

		t.Run("WrongTx", func(t *testing.T) {
			// A transaction of the other backend's type, or none.
			wrong := []any{nil, "tx", &sql.Tx{}}
			if s, ok := h.Store.(*sqlite.Store); ok {
				wrong = []any{nil, "tx", s.DB()}
			}
			for _, tx := range wrong {
				_, _, err := c.CreateTx(ctx, tx, "greet", dftype.CreateRequest{ID: "x"})
				require.ErrorIs(t, err, workflow.ErrTxNotSupported, "%T", tx)
			}
			requireNothingWritten(t, h)
		})

		t.Run("FailedCreateKeepsTheTx", func(t *testing.T) {
			_, err := greet.Create(ctx, workflow.CreateOptions[params]{ID: "taken"})
			require.NoError(t, err)
			w.names = nil
			tx := beginApp(t, h.Store)
			require.NoError(t, tx.exec("INSERT INTO app_order (id) VALUES ('o1')"))
			_, _, err = greet.CreateTx(ctx, tx.tx, workflow.CreateOptions[params]{ID: "taken"})
			require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)
			_, _, err = c.CreateTx(ctx, tx.tx, "nope", dftype.CreateRequest{ID: "x"})
			require.ErrorIs(t, err, workflow.ErrWorkflowNotFound)
			_, _, err = c.CreateTx(ctx, tx.tx, "greet", dftype.CreateRequest{ID: "bad id!"})
			require.ErrorIs(t, err, workflow.ErrInvalidInstanceID)
			_, afterCommit, err := greet.CreateTx(ctx, tx.tx, workflow.CreateOptions[params]{ID: "o1", Params: params{Name: "O"}})
			require.NoError(t, err, "the transaction goes on after a failed create")
			require.NoError(t, tx.commit())
			afterCommit()
			require.Equal(t, 1, orderCount(t, h.Store))
			h.RunUntilIdle()
			requireGreeting(t, h, "o1", "hello O")
		})
	})
}

// requireGreeting requires that the greet instance id completed with want.
func requireGreeting(t *testing.T, h *testharness.Harness, id, want string) {
	t.Helper()
	var got string
	h.RequireOutput("greet", id, &got)
	require.Equal(t, want, got)
}

// plainEngine is an engine that cannot create in a transaction.
type plainEngine struct{ workflow.Engine }

func TestCreateTxEngineWithoutTransactions(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	greet := workflow.MustRegister(reg, "greet", func(context.Context, workflow.Event[params], workflow.Step) (string, error) { return "", nil })
	_, _, err := greet.CreateTx(t.Context(), &sql.Tx{}, workflow.CreateOptions[params]{})
	require.ErrorIs(t, err, workflow.ErrEngineNotBound)
	reg.Bind(plainEngine{})
	_, afterCommit, err := greet.CreateTx(t.Context(), &sql.Tx{}, workflow.CreateOptions[params]{})
	require.ErrorIs(t, err, workflow.ErrTxNotSupported)
	afterCommit()
	_, _, err = greet.CreateBatchTx(t.Context(), &sql.Tx{}, []workflow.CreateOptions[params]{{}})
	require.ErrorIs(t, err, workflow.ErrTxNotSupported)
}
