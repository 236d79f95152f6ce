// Command billing runs the billing example end to end: it
// creates a billing instance through its typed binding, approves it, and
// prints the parent's output and that of the receipt child it started.
//
//	go run ./examples/billing
//
// The database is DURAFLOW_DATABASE_URL (postgres://…, sqlite:path or
// sqlite::memory:), by default the SQLite file ./duraflow.db, so it runs with
// nothing but Go installed.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/billing/billing"
	"github.com/duraflow/duraflow/workflow"
)

const defaultDatabaseURL = "sqlite:duraflow.db"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "billing:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	store, err := dburl.OpenMigrated(ctx, cmp.Or(os.Getenv("DURAFLOW_DATABASE_URL"), defaultDatabaseURL))
	if err != nil {
		return err
	}
	defer store.Close()

	reg := workflow.NewRegistry()
	wfs, err := billing.Register(reg, nil)
	if err != nil {
		return err
	}
	// One host: the management client that serves the bindings, and a
	// runner that executes the workflows, woken in-process when work becomes
	// due (and on Postgres by other processes too). Instances created here
	// start on this runner at once when it has a free slot (eager start).
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
		if err := host.Stop(stopCtx); err != nil {
			logger.Warn("stopping the host", "error", err)
		}
	}()

	id := fmt.Sprintf("inv-%d", time.Now().UnixNano())
	inv, err := wfs.Billing.Create(ctx, workflow.CreateOptions[billing.Params]{
		ID:     id,
		Params: billing.Params{Customer: "cus_42", AmountCents: 129900, Description: "Annual plan"},
	})
	if err != nil {
		return err
	}
	fmt.Printf("created %s/%s\n", billing.BillingName, inv.ID())

	if err := inv.SendEvent(ctx, billing.ApprovalEvent, billing.Approval{Approved: true, By: "grace"}); err != nil {
		return err
	}
	fmt.Printf("sent %s\n", billing.ApprovalEvent)

	st, err := waitDone(ctx, inv)
	if err != nil {
		return err
	}
	if err := report(billing.BillingName, st); err != nil {
		return err
	}

	// The receipt is a workflow of its own: it may finish after its parent.
	receipt, err := wfs.Receipt.Get(ctx, st.Output.ReceiptID)
	if err != nil {
		return err
	}
	rst, err := waitDone(ctx, receipt)
	if err != nil {
		return err
	}
	return report(billing.ReceiptName, rst)
}

// report prints a terminal instance's output, or fails if it did not complete.
func report[O any](workflowName string, st *workflow.Status[O]) error {
	if st.Status != dftype.StatusComplete {
		return fmt.Errorf("instance %s/%s ended %s: %+v", workflowName, st.Info.ID, st.Status, st.Error)
	}
	out, err := json.MarshalIndent(st.Output, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("%s/%s is %s:\n%s\n", workflowName, st.Info.ID, st.Status, out)
	return nil
}

// waitDone waits up to 30 seconds for the instance to end.
func waitDone[O any](ctx context.Context, inst *workflow.Instance[O]) (*workflow.Status[O], error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return inst.Wait(ctx, 0)
}
