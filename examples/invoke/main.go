// Command invoke places an order whose lines are reserved by child
// workflows, two at a time, and whose payment is one more child: the
// order waits for each child's output, and goes on without the line whose
// child failed (see docs/children.md).
//
//	go run ./examples/invoke
//
// The database is DURAFLOW_DATABASE_URL (postgres://…, sqlite:path or
// sqlite::memory:), by default an in-memory SQLite database.
package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/invoke/shop"
	"github.com/duraflow/duraflow/workflow"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

// printServices reserves everything but mugs, printing each call.
type printServices struct{}

func (printServices) Reserve(_ context.Context, _, sku string, qty int) (string, error) {
	if sku == "mug" {
		return "", &shop.OutOfStockError{SKU: sku}
	}
	fmt.Printf("reserved %d x %s\n", qty, sku)
	return "R-" + strings.ToUpper(sku), nil
}

func (printServices) Charge(_ context.Context, _ string, p shop.Payment) (string, error) {
	fmt.Printf("charged %s %d.%02d\n", p.Customer, p.Amount/100, p.Amount%100)
	return "RCPT-1", nil
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := dburl.OpenMigrated(ctx, cmp.Or(os.Getenv("DURAFLOW_DATABASE_URL"), "sqlite::memory:"))
	if err != nil {
		return err
	}
	defer store.Close()
	reg := workflow.NewRegistry()
	bind, err := shop.Register(reg, printServices{})
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

	inst, err := bind.Order.Create(ctx, workflow.CreateOptions[shop.Order]{
		ID: fmt.Sprintf("order-%d", time.Now().UnixNano()),
		Params: shop.Order{Customer: "ada", Lines: []shop.Line{
			{SKU: "tea", Qty: 2, Price: 400}, {SKU: "mug", Qty: 1, Price: 1200},
			{SKU: "pot", Qty: 1, Price: 3000}, {SKU: "cup", Qty: 4, Price: 250},
		}},
	})
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := inst.Wait(waitCtx, 0)
	if err != nil {
		return err
	}
	if st.Status != dftype.StatusComplete {
		return fmt.Errorf("%s/%s ended %s: %v", shop.OrderName, inst.ID(), st.Status, st.Error)
	}
	s := st.Output
	fmt.Printf("%s/%s is %s: %d line(s) reserved, %d.%02d charged, receipt %s\n",
		shop.OrderName, inst.ID(), st.Status, len(s.Reserved), s.Amount/100, s.Amount%100, s.Receipt)
	for _, u := range s.Unavailable {
		fmt.Printf("  unavailable: %s (child %s: %s)\n", u.SKU, u.Child, u.Reason)
	}
	children, err := host.Client().Children(ctx, shop.OrderName, inst.ID())
	if err != nil {
		return err
	}
	for _, c := range children {
		fmt.Printf("  child %-12s %s %s (step %q)\n", c.WorkflowName, c.ID, c.Status, c.Parent.StepKey)
	}
	return nil
}
