package duraflow_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/workflow"
)

// Order is the params of the "fulfil" workflow: the order it fulfils.
type Order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// placeOrder writes the order row, starts its workflow and takes the item
// from the stock in one transaction: all of it commits, or nothing does. On
// Postgres the transaction is a pgx.Tx (store.Pool().Begin(ctx)); the rest
// is the same.
func placeOrder(ctx context.Context, appDB *sql.DB, fulfil *workflow.Binding[Order, string], o Order) error {
	tx, err := appDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", o.ID, o.Total); err != nil {
		return fmt.Errorf("inserting order %s: %w", o.ID, err)
	}
	_, afterCommit, err := fulfil.CreateTx(ctx, tx, workflow.CreateOptions[Order]{ID: o.ID, Params: o})
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE stock SET units = units - 1"); err != nil {
		return fmt.Errorf("reserving stock for order %s: %w", o.ID, err) // rolls the instance back too
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	afterCommit() // wake this process's runner now rather than at its next poll
	return nil
}

// Example_createTx starts a workflow in the caller's own transaction: the
// order row and the instance that fulfils it commit together, and an
// order whose transaction fails after the create leaves no instance behind.
func Example_createTx() {
	ctx := context.Background()
	store, err := dburl.OpenMigrated(ctx, "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	// The application's tables live in the same database; on SQLite its
	// transactions are begun on the store's write handle.
	appDB := store.(*sqlite.Store).DB()
	for _, ddl := range []string{
		"CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)",
		"CREATE TABLE stock (units INTEGER NOT NULL CHECK (units >= 0))",
		"INSERT INTO stock (units) VALUES (1)",
	} {
		if _, err := appDB.ExecContext(ctx, ddl); err != nil {
			log.Fatal(err)
		}
	}

	reg := workflow.NewRegistry()
	fulfil := workflow.MustRegister(reg, "fulfil", func(ctx context.Context, ev workflow.Event[Order], step workflow.Step) (string, error) {
		return workflow.Do(step, "ship", func(ctx context.Context) (string, error) {
			return fmt.Sprintf("shipped %s (%d)", ev.Payload.ID, ev.Payload.Total), nil
		})
	})
	host, err := duraflow.New(store, &duraflow.Config{Registry: reg, Logger: quietLogger, RunMode: duraflow.RunOnDemand, DisableScheduler: true})
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println(placeOrder(ctx, appDB, fulfil, Order{ID: "o-1", Total: 40}))
	// The stock is empty now: the second order's transaction fails after
	// its instance was created in it, and rolls back.
	fmt.Println(placeOrder(ctx, appDB, fulfil, Order{ID: "o-2", Total: 99}) != nil)
	if _, err := fulfil.Get(ctx, "o-2"); errors.Is(err, workflow.ErrInstanceNotFound) {
		fmt.Println("no instance for o-2")
	}

	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	inst, err := fulfil.Get(ctx, "o-1")
	if err != nil {
		log.Fatal(err)
	}
	st, err := inst.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Status, st.Output)
	// Output:
	// <nil>
	// true
	// no instance for o-2
	// complete shipped o-1 (40)
}
