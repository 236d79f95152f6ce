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
	"github.com/duraflow/duraflow/workflow"
)

type charge struct {
	Customer string `json:"customer"`
}

// chargeWorkflow waits for a "settled" event, so an instance holds its
// slot until the test lets it end.
var chargeWorkflow = func(ctx context.Context, ev workflow.Event[charge], step workflow.Step) (string, error) {
	if _, err := step.WaitForEvent("settled", workflow.WaitOptions{Type: "settled"}); err != nil {
		return "", err
	}
	return "charged " + ev.Payload.Customer, nil
}

// limitsHost is a host over a fresh in-memory database whose runner runs
// only when the example says (RunOnDemand).
func limitsHost(reg *workflow.Registry) (*duraflow.Host, func()) {
	ctx := context.Background()
	store, err := dburl.OpenMigrated(ctx, "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	host, err := duraflow.New(store, &duraflow.Config{Registry: reg, Logger: quietLogger, RunMode: duraflow.RunOnDemand})
	if err != nil {
		log.Fatal(err)
	}
	return host, func() {
		_ = host.Stop(ctx)
		_ = store.Close()
	}
}

func createCharge(host *duraflow.Host, id, customer string) {
	_, err := host.Client().Create(context.Background(), "charge",
		dftype.CreateRequest{ID: id, Params: []byte(fmt.Sprintf(`{"customer":%q}`, customer))})
	if err != nil {
		log.Fatal(err)
	}
}

func printCharge(host *duraflow.Host, id string) {
	info, err := host.Client().Get(context.Background(), "charge", id)
	if err != nil {
		log.Fatal(err)
	}
	if w := info.WaitingFor; w != nil {
		fmt.Printf("%s: %s, waiting for a %s slot of %s %q (max %d)\n", id, info.Status, w.Kind, w.Scope, w.Name, w.Max)
		return
	}
	fmt.Printf("%s: %s\n", id, info.Status)
}

// Example_concurrencyKey runs one charge at a time per customer: the
// second charge of ada waits, queued, until the first ends, while bob's
// runs.
func Example_concurrencyKey() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "charge", chargeWorkflow,
		workflow.WithConcurrencyKey(workflow.KeyOf(func(c charge) string { return c.Customer }), 1))
	host, done := limitsHost(reg)
	defer done()

	createCharge(host, "c1", "ada")
	createCharge(host, "c2", "ada")
	createCharge(host, "c3", "bob")
	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		printCharge(host, id)
	}

	// c1 ends: its slot goes to c2 in the same transaction.
	if err := host.Client().SendEvent(ctx, "charge", "c1", "settled", nil); err != nil {
		log.Fatal(err)
	}
	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	printCharge(host, "c1")
	printCharge(host, "c2")
	// Output:
	// c1: waiting
	// c2: queued, waiting for a concurrency slot of key "ada" (max 1)
	// c3: waiting
	// c1: complete
	// c2: waiting
}

// Example_maxRunning lets two charges of the workflow be in flight at
// once, whoever the customer.
func Example_maxRunning() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "charge", chargeWorkflow, workflow.WithMaxRunning(2))
	host, done := limitsHost(reg)
	defer done()

	for i, customer := range []string{"ada", "bob", "cy"} {
		createCharge(host, fmt.Sprintf("c%d", i+1), customer)
	}
	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		printCharge(host, id)
	}
	// Output:
	// c1: waiting
	// c2: waiting
	// c3: queued, waiting for a concurrency slot of workflow "charge" (max 2)
}

// Example_rateLimit starts at most two charges per minute: the third is
// admitted with its start put off to the next minute's window.
func Example_rateLimit() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "charge", chargeWorkflow, workflow.WithRateLimit(2, time.Minute))
	host, done := limitsHost(reg)
	defer done()

	for i, customer := range []string{"ada", "bob", "cy"} {
		createCharge(host, fmt.Sprintf("c%d", i+1), customer)
	}
	n, err := host.Runner().RunDue(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("started now:", n)
	info, err := host.Client().Get(ctx, "charge", "c3")
	if err != nil {
		log.Fatal(err)
	}
	w := info.WaitingFor
	fmt.Printf("c3: %s, waiting for the %s limit of %s %q (%d per %s)\n", info.Status, w.Kind, w.Scope, w.Name, w.Max, w.Period)
	// Output:
	// started now: 2
	// c3: queued, waiting for the rate limit of workflow "charge" (2 per 1 minute)
}

// Example_queueLimits sets the limits of a queue at run time: they are
// stored in the database and hold for every workflow on the queue, across
// every runner.
func Example_queueLimits() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "charge", chargeWorkflow, workflow.WithQueue("payments"))
	host, done := limitsHost(reg)
	defer done()

	q, err := host.Client().SetQueueLimits(ctx, "payments", client.QueueLimits{
		MaxRunning: 1,
		Rate:       workflow.RateLimit{Limit: 100, Period: time.Minute},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: max running %d, %d starts per %s\n", q.Name, q.MaxRunning, q.Rate.Limit, q.Rate.Period)

	createCharge(host, "c1", "ada")
	createCharge(host, "c2", "bob")
	if _, err := host.Runner().RunDue(ctx, 10); err != nil {
		log.Fatal(err)
	}
	printCharge(host, "c2")

	_, err = host.Client().SetQueueLimits(ctx, "payments", client.QueueLimits{MaxRunning: -1})
	fmt.Println(err)
	// Output:
	// payments: max running 1, 100 starts per 1m0s
	// c2: queued, waiting for a concurrency slot of queue "payments" (max 1)
	// workflow: invalid limit: max running must be positive, got -1
}
