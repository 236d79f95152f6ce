// Command quickstart runs one onboarding workflow end to end: it migrates
// the database, starts a host (a client and a runner, built by
// duraflow.New), creates an instance through its typed binding, sends the
// event it waits for, and prints its output.
//
//	go run ./examples/quickstart
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
	"github.com/duraflow/duraflow/examples/quickstart/onboarding"
	"github.com/duraflow/duraflow/workflow"
)

const defaultDatabaseURL = "sqlite:duraflow.db"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The database: open, migrate.
	store, err := dburl.OpenMigrated(ctx, cmp.Or(os.Getenv("DURAFLOW_DATABASE_URL"), defaultDatabaseURL))
	if err != nil {
		return err
	}
	defer store.Close()

	// The workflows.
	reg := workflow.NewRegistry()
	wfs, err := onboarding.Register(reg, nil)
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

	// Create an instance through the typed binding. The tips go out two
	// seconds after verification, so the program finishes quickly.
	id := fmt.Sprintf("quickstart-%d", time.Now().UnixNano())
	inst, err := wfs.Onboarding.Create(ctx, workflow.CreateOptions[onboarding.Params]{
		ID:     id,
		Params: onboarding.Params{Email: "ada@example.com", TipsAfter: dftype.Duration(2 * time.Second)},
	})
	if err != nil {
		return err
	}
	fmt.Printf("created %s/%s\n", onboarding.Name, inst.ID())

	// Send the event the instance will wait for. Whether it arrives before or
	// after the instance reaches its wait does not matter: events are buffered.
	if err := inst.SendEvent(ctx, onboarding.VerifiedEvent, onboarding.Verification{Method: "link"}); err != nil {
		return err
	}
	fmt.Printf("sent %s\n", onboarding.VerifiedEvent)

	st, err := waitDone(ctx, inst)
	if err != nil {
		return err
	}
	if st.Status != dftype.StatusComplete {
		return fmt.Errorf("instance %s ended %s: %+v", id, st.Status, st.Error)
	}
	out, err := json.MarshalIndent(st.Output, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("%s/%s is %s after %s:\n%s\n", onboarding.Name, id, st.Status,
		st.Info.CompletedAt.Sub(st.Info.CreatedAt).Round(time.Millisecond), out)
	return nil
}

// waitDone waits up to 30 seconds for the instance to end.
func waitDone[O any](ctx context.Context, inst *workflow.Instance[O]) (*workflow.Status[O], error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return inst.Wait(ctx, 0)
}
