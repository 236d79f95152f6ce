// Command saga books a trip whose car rental is sold out: the flight and
// the hotel that were booked are cancelled, in the reverse order, by their
// compensations (see docs/saga.md).
//
//	go run ./examples/saga
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
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/examples/saga/trip"
	"github.com/duraflow/duraflow/workflow"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "saga:", err)
		os.Exit(1)
	}
}

// printBookings books everything but cars, printing each call.
type printBookings struct{}

func (printBookings) Book(_ context.Context, kind, key string, _ trip.Params) (trip.Booking, error) {
	if kind == "car" {
		return trip.Booking{}, &trip.SoldOutError{Kind: kind}
	}
	fmt.Println("booked", kind, "("+key+")")
	return trip.Booking{Kind: kind, ID: strings.ToUpper(kind[:2]) + "-1"}, nil
}

func (printBookings) Cancel(_ context.Context, b trip.Booking) error {
	fmt.Println("cancelled", b.Kind, b.ID)
	return nil
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := dburl.OpenMigrated(ctx, cmp.Or(os.Getenv("DURAFLOW_DATABASE_URL"), "sqlite::memory:"))
	if err != nil {
		return err
	}
	defer store.Close()
	reg := workflow.NewRegistry()
	binding, err := trip.Register(reg, printBookings{})
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

	inst, err := binding.Create(ctx, workflow.CreateOptions[trip.Params]{
		ID: fmt.Sprintf("trip-%d", time.Now().UnixNano()), Params: trip.Params{Traveler: "ada", City: "Lisbon"},
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
	if st.Error == nil {
		return fmt.Errorf("%s/%s ended %s, not errored", trip.Name, inst.ID(), st.Status)
	}
	fmt.Printf("%s/%s is %s: %s: %s\n", trip.Name, inst.ID(), st.Status, st.Error.Name, st.Error.Message)
	hist, err := host.Client().History(ctx, trip.Name, inst.ID(), client.HistoryParams{})
	if err != nil {
		return err
	}
	for _, s := range hist.Steps {
		fmt.Printf("  step %-24s %s\n", s.Name, s.Status)
	}
	return nil
}
