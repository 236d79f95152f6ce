package duraflow_test

import (
	"context"
	"fmt"
	"log"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// queueHost builds a host over an in-memory SQLite database whose runner
// serves queues and is driven by RunDue (RunOnDemand), so the examples show
// exactly what each claim takes. The workflow "charge" runs on the
// "payments" queue, "email" on the default one.
func queueHost(queues ...string) (*duraflow.Host, db.Store) {
	store, err := dburl.OpenMigrated(context.Background(), "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	reg := workflow.NewRegistry()
	echo := func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		return workflow.Do(step, "work", func(ctx context.Context) (string, error) { return ev.InstanceID, nil })
	}
	workflow.MustRegister(reg, "charge", echo, workflow.WithQueue("payments"))
	workflow.MustRegister(reg, "email", echo)
	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg, Logger: quietLogger, RunMode: duraflow.RunOnDemand, DisableScheduler: true,
		// One instance per claim, to show the claim order.
		Runner: &runner.Config{Queues: queues, MaxConcurrency: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	return host, store
}

// runAll runs the due instances one claim at a time and prints each.
func runAll(ctx context.Context, r *runner.Runner, c *client.Client, refs ...string) {
	printed := map[string]bool{}
	for {
		n, err := r.RunDueLimited(ctx, 1, 0)
		if err != nil {
			log.Fatal(err)
		}
		if n == 0 {
			break
		}
		for i := 0; i+1 < len(refs); i += 2 {
			info, err := c.Get(ctx, refs[i], refs[i+1])
			if err != nil {
				log.Fatal(err)
			}
			if info.Status == dftype.StatusComplete && !printed[refs[i+1]] {
				printed[refs[i+1]] = true
				fmt.Println("ran", info.WorkflowName, info.ID, "on", info.Queue)
			}
		}
	}
}

// Example_queues shows task queues: a workflow runs on its definition's
// queue (workflow.WithQueue) unless the create names another, and a runner
// claims only the queues it serves (runner.Config.Queues; --queues).
func Example_queues() {
	ctx := context.Background()
	host, store := queueHost("payments") // a runner that serves payments only
	defer store.Close()
	c := host.Client()
	for _, req := range []struct{ name, id, queue string }{
		{"charge", "c1", ""},        // the workflow's queue: payments
		{"email", "e1", ""},         // the default queue
		{"email", "e2", "payments"}, // the create's queue
	} {
		if _, err := c.Create(ctx, req.name, dftype.CreateRequest{ID: req.id, Queue: req.queue}); err != nil {
			log.Fatal(err)
		}
	}
	runAll(ctx, host.Runner(), c, "charge", "c1", "email", "e1", "email", "e2")
	e1, _ := c.Get(ctx, "email", "e1")
	fmt.Println("email e1 is", e1.Status, "on", e1.Queue)
	// Output:
	// ran charge c1 on payments
	// ran email e2 on payments
	// email e1 is queued on default
}

// Example_priority shows priorities: among due instances a higher priority
// is claimed first; equal priorities go oldest first.
func Example_priority() {
	ctx := context.Background()
	host, store := queueHost()
	defer store.Close()
	c := host.Client()
	for _, req := range []struct {
		id       string
		priority int
	}{{"low", -10}, {"normal", 0}, {"urgent", 100}, {"normal-2", 0}} {
		if _, err := c.Create(ctx, "email", dftype.CreateRequest{ID: req.id, Priority: req.priority}); err != nil {
			log.Fatal(err)
		}
	}
	runAll(ctx, host.Runner(), c, "email", "urgent", "email", "normal", "email", "normal-2", "email", "low")
	// Output:
	// ran email urgent on default
	// ran email normal on default
	// ran email normal-2 on default
	// ran email low on default
}

// Example_dedupe shows dedupe keys: a create with the key of an active
// instance returns that instance, marked Deduplicated, instead of starting
// another; once it has ended, the key is free.
func Example_dedupe() {
	ctx := context.Background()
	host, store := queueHost()
	defer store.Close()
	c := host.Client()
	first, err := c.Create(ctx, "email", dftype.CreateRequest{ID: "welcome-1", DedupeKey: "user-42"})
	if err != nil {
		log.Fatal(err)
	}
	again, err := c.Create(ctx, "email", dftype.CreateRequest{ID: "welcome-2", DedupeKey: "user-42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.ID, first.Deduplicated, "/", again.ID, again.Deduplicated)

	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	later, err := c.Create(ctx, "email", dftype.CreateRequest{ID: "welcome-3", DedupeKey: "user-42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(later.ID, later.Deduplicated)
	// Output:
	// welcome-1 false / welcome-1 true
	// welcome-3 false
}

// Example_namespaces shows namespaces: a view of the client scoped to a
// namespace (client.Client.Namespace) creates there and sees nothing of
// other namespaces: their instances are not found.
func Example_namespaces() {
	ctx := context.Background()
	host, store := queueHost()
	defer store.Close()
	acme, globex := host.Client().Namespace("acme"), host.Client().Namespace("globex")
	info, err := acme.Create(ctx, "email", dftype.CreateRequest{ID: "invoice-1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.ID, "is in", info.Namespace)

	_, err = globex.Get(ctx, "email", "invoice-1")
	fmt.Println("globex:", err)
	list, err := globex.List(ctx, client.ListParams{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("globex lists", len(list.Instances), "instances")
	// Output:
	// invoice-1 is in acme
	// globex: instance not found: email/invoice-1
	// globex lists 0 instances
}
