// Package orders writes an order row and starts the workflow that fulfils
// it in one database transaction of its own, with CreateTx: both commit,
// or neither does (see docs/transactions.md). The transaction is a pgx.Tx
// on the Postgres store's pool, or a *sql.Tx on the SQLite store's write
// handle; the rest of the code is the same for both.
package orders

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/workflow"
)

// Name is the registered name of the workflow that fulfils an order.
const Name = "fulfil-order"

// Order is an order row, and the params of its workflow.
type Order struct {
	ID    string `json:"id"`
	Total int    `json:"total"` // in cents
}

// Register registers the workflow that fulfils an order; ship is its one
// step.
func Register(reg *workflow.Registry, ship func(ctx context.Context, o Order) (string, error)) (*workflow.Binding[Order, string], error) {
	return workflow.Register(reg, Name, func(ctx context.Context, ev workflow.Event[Order], step workflow.Step) (string, error) {
		return workflow.Do(step, "ship", func(ctx context.Context) (string, error) { return ship(ctx, ev.Payload) })
	})
}

// Service places orders in the store's database.
type Service struct {
	store  db.Store
	fulfil *workflow.Binding[Order, string]
}

// New returns a Service on store (a *postgres.Store or a *sqlite.Store)
// whose orders are fulfilled by the fulfil binding. It creates the orders
// table when it does not exist.
func New(ctx context.Context, store db.Store, fulfil *workflow.Binding[Order, string]) (*Service, error) {
	s := &Service{store: store, fulfil: fulfil}
	const ddl = "CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)"
	var err error
	switch st := store.(type) {
	case *postgres.Store:
		_, err = st.Pool().Exec(ctx, ddl)
	case *sqlite.Store:
		_, err = st.DB().ExecContext(ctx, ddl)
	default:
		return nil, fmt.Errorf("orders: a %T cannot join the caller's transaction", store)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the orders table: %w", err)
	}
	return s, nil
}

// Place inserts o's row and starts its workflow in one transaction, then
// calls check (a credit check, say) in that transaction: when check fails,
// the transaction rolls back and leaves neither the row nor the instance.
// After the commit it wakes this process's runner (afterCommit), so the
// instance starts at once rather than at the runner's next poll.
func (s *Service) Place(ctx context.Context, o Order, check func(Order) error) (*workflow.Instance[string], error) {
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.rollback(ctx) // a no-op after the commit
	if err := tx.insert(ctx, o); err != nil {
		return nil, fmt.Errorf("inserting order %s: %w", o.ID, err)
	}
	inst, afterCommit, err := s.fulfil.CreateTx(ctx, tx.raw, workflow.CreateOptions[Order]{ID: o.ID, Params: o})
	if err != nil {
		return nil, fmt.Errorf("starting the workflow of order %s: %w", o.ID, err)
	}
	if check != nil {
		if err := check(o); err != nil {
			return nil, fmt.Errorf("order %s refused: %w", o.ID, err) // rolls the instance back too
		}
	}
	if err := tx.commit(ctx); err != nil {
		return nil, fmt.Errorf("committing order %s: %w", o.ID, err)
	}
	afterCommit()
	return inst, nil
}

// Exists reports whether the row of order id was committed.
func (s *Service) Exists(ctx context.Context, id string) (bool, error) {
	var n int
	var err error
	switch st := s.store.(type) {
	case *postgres.Store:
		err = st.Pool().QueryRow(ctx, "SELECT count(*) FROM orders WHERE id = $1", id).Scan(&n)
	case *sqlite.Store:
		err = st.DB().QueryRowContext(ctx, "SELECT count(*) FROM orders WHERE id = ?", id).Scan(&n)
	}
	return n > 0, err
}

// tx is a transaction of either backend: raw is what CreateTx takes.
type tx struct {
	raw      any
	insert   func(ctx context.Context, o Order) error
	commit   func(ctx context.Context) error
	rollback func(ctx context.Context)
}

func (s *Service) begin(ctx context.Context) (*tx, error) {
	switch st := s.store.(type) {
	case *postgres.Store:
		t, err := st.Pool().Begin(ctx)
		if err != nil {
			return nil, err
		}
		return &tx{
			raw: t,
			insert: func(ctx context.Context, o Order) error {
				_, err := t.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", o.ID, o.Total)
				return err
			},
			commit:   t.Commit,
			rollback: func(ctx context.Context) { _ = t.Rollback(ctx) },
		}, nil
	case *sqlite.Store:
		// The store's write handle: its transactions take the write lock
		// at BEGIN (BEGIN IMMEDIATE).
		t, err := st.DB().BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return &tx{
			raw: t,
			insert: func(ctx context.Context, o Order) error {
				_, err := t.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", o.ID, o.Total)
				return err
			},
			commit:   func(context.Context) error { return t.Commit() },
			rollback: func(context.Context) { _ = t.Rollback() },
		}, nil
	}
	return nil, fmt.Errorf("orders: a %T cannot join the caller's transaction", s.store)
}
