package duraflow_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db/dburl"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// ExampleNew builds a host over an in-memory SQLite database, runs one
// instance through its typed binding and drains the host.
func ExampleNew() {
	ctx := context.Background()
	store, err := dburl.OpenMigrated(ctx, "sqlite::memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	reg := workflow.NewRegistry()
	greet := workflow.MustRegister(reg, "greet", func(ctx context.Context, ev workflow.Event[greetParams], step workflow.Step) (greetOutput, error) {
		g, err := workflow.Do(step, "greet", func(ctx context.Context) (string, error) {
			return "hello, " + ev.Payload.Name, nil
		})
		return greetOutput{Greeting: g}, err
	})

	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg,
		Logger:   quietLogger,
		Runner:   &runner.Config{MaxConcurrency: 8},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := host.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := host.Stop(stopCtx); err != nil {
			log.Print(err)
		}
	}()

	inst, err := greet.Create(ctx, workflow.CreateOptions[greetParams]{ID: "ada", Params: greetParams{Name: "Ada"}})
	if err != nil {
		log.Fatal(err)
	}
	st, err := inst.Wait(ctx, 10*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Status, st.Output.Greeting)
	// Output: complete hello, Ada
}
