// Command createtx writes an order row and starts the workflow that
// fulfils it in one transaction (CreateTx): the order that commits is
// fulfilled, the order whose transaction rolls back leaves neither a row
// nor an instance (see docs/transactions.md).
//
//	go run ./examples/createtx
//
// The database is DURAFLOW_DATABASE_URL (postgres://…, sqlite:path or
// sqlite::memory:), by default an in-memory SQLite database. It creates an
// orders table there if there is none.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/createtx/orders"
	"github.com/duraflow/duraflow/workflow"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "createtx:", err)
		os.Exit(1)
	}
}

func ship(_ context.Context, o orders.Order) (string, error) {
	fmt.Println("shipping", o.ID)
	return fmt.Sprintf("shipped %s (%d.%02d)", o.ID, o.Total/100, o.Total%100), nil
}

// errNoCredit is the credit check's answer for the second order.
var errNoCredit = errors.New("credit check failed")

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := dburl.OpenMigrated(ctx, cmp.Or(os.Getenv("DURAFLOW_DATABASE_URL"), "sqlite::memory:"))
	if err != nil {
		return err
	}
	defer store.Close()
	reg := workflow.NewRegistry()
	fulfil, err := orders.Register(reg, ship)
	if err != nil {
		return err
	}
	svc, err := orders.New(ctx, store, fulfil)
	if err != nil {
		return err
	}
	host, err := duraflow.New(store, &duraflow.Config{Registry: reg, Logger: logger})
	if err != nil {
		return err
	}
	if err := host.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = host.Stop(stopCtx)
	}()

	stamp := time.Now().UnixNano()
	// The first order commits: its row and its instance together.
	ok := orders.Order{ID: fmt.Sprintf("order-%d-a", stamp), Total: 4000}
	inst, err := svc.Place(ctx, ok, nil)
	if err != nil {
		return err
	}
	fmt.Println("placed", ok.ID, "in one transaction")
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := inst.Wait(waitCtx, 0)
	if err != nil {
		return err
	}
	if st.Status != dftype.StatusComplete {
		return fmt.Errorf("%s/%s ended %s: %v", orders.Name, ok.ID, st.Status, st.Error)
	}
	exists, err := svc.Exists(ctx, ok.ID)
	if err != nil {
		return err
	}
	fmt.Printf("%s: row %v, instance %s: %s\n", ok.ID, present(exists), st.Status, st.Output)

	// The second order's credit check fails after its workflow was
	// created in the transaction: the rollback takes both back.
	refused := orders.Order{ID: fmt.Sprintf("order-%d-b", stamp), Total: 990000}
	_, err = svc.Place(ctx, refused, func(orders.Order) error { return errNoCredit })
	if !errors.Is(err, errNoCredit) {
		return fmt.Errorf("the second order was not refused by its check: %v", err)
	}
	fmt.Println("rolled back:", err)
	exists, err = svc.Exists(ctx, refused.ID)
	if err != nil {
		return err
	}
	_, err = fulfil.Get(ctx, refused.ID)
	switch {
	case errors.Is(err, workflow.ErrInstanceNotFound):
		fmt.Printf("%s: row %v, instance absent\n", refused.ID, present(exists))
	case err != nil:
		return err
	default:
		return fmt.Errorf("%s/%s exists after the rollback", orders.Name, refused.ID)
	}
	if exists {
		return fmt.Errorf("order %s's row exists after the rollback", refused.ID)
	}
	return nil
}

func present(ok bool) string {
	if ok {
		return "present"
	}
	return "absent"
}
