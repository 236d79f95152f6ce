package duraflow_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// Example_workers starts a host whose runner registers as a worker, lists
// the workers, asks the worker to drain and drains it, as SIGTERM does in
// `duraflow serve` and `duraflow worker`.
func Example_workers() {
	ctx := context.Background()
	store, err := dburl.OpenMigrated(ctx, "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "greet", func(ctx context.Context, ev workflow.Event[greetParams], step workflow.Step) (greetOutput, error) {
		return greetOutput{Greeting: "hello, " + ev.Payload.Name}, nil
	})
	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg,
		Logger:   quietLogger,
		Runner: &runner.Config{
			ID:         "worker-a",
			Labels:     map[string]string{"zone": "eu-1"},
			Version:    "v1.0.0",
			DrainGrace: 5 * time.Second,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := host.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = host.Stop(ctx) }()

	// The runner registers as it starts, before its first claim.
	page, err := host.Client().ListWorkers(ctx, client.WorkerListParams{Status: dftype.WorkerOnline})
	if err != nil {
		log.Fatal(err)
	}
	if len(page.Workers) != 1 {
		log.Fatalf("%d online workers after Start, want 1", len(page.Workers))
	}
	w := page.Workers[0]
	fmt.Println(w.ID, w.Status, w.Queues, w.Labels, w.Version)

	// A drain request (POST /workers/:id/drain, duraflow workers drain):
	// the worker sees it at its next heartbeat.
	w, err = host.Client().DrainWorker(ctx, "worker-a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.ID, w.Status)

	// The runner's own drain (what SIGTERM does): nothing new is claimed,
	// running work finishes within DrainGrace, the worker deregisters.
	if err := host.Runner().Drain(ctx); err != nil {
		log.Fatal(err)
	}
	w, err = host.Client().GetWorker(ctx, "worker-a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w.ID, w.Status, w.DeregisteredAt != nil)

	// An offline worker cannot be drained.
	_, err = host.Client().DrainWorker(ctx, "worker-a")
	fmt.Println(err)
	// Output:
	// worker-a online [default] map[zone:eu-1] v1.0.0
	// worker-a draining
	// worker-a offline true
	// worker is offline: worker-a
}
