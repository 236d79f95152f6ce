package duraflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Example_saga books a trip as a saga: each step registers the step that
// undoes it (workflow.DoWithCompensation, workflow.Compensate). The car
// rental fails for good, so the flight and the hotel, which completed, are
// cancelled in the reverse order, each as a durable step of its own; the
// instance ends errored with the rental's error.
func Example_saga() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "trip", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		flight, err := workflow.DoWithCompensation(step, "book flight",
			func(ctx context.Context) (string, error) { fmt.Println("flight booked"); return "FL-1", nil },
			func(ctx context.Context, id string) error { fmt.Println("flight", id, "cancelled"); return nil })
		if err != nil {
			return "", err
		}
		if _, err := step.Do("book hotel",
			func(ctx context.Context) (any, error) { fmt.Println("hotel booked"); return "HO-7", nil },
			workflow.Compensate(func(ctx context.Context) error { fmt.Println("hotel cancelled"); return nil })); err != nil {
			return "", err
		}
		if _, err := step.Do("rent car", func(ctx context.Context) (any, error) {
			return nil, workflow.NonRetryable(errors.New("no cars left"))
		}); err != nil {
			return "", err
		}
		return flight, nil
	})
	host, _, done := onDemand(ctx, reg)
	defer done()

	if _, err := host.Client().Create(ctx, "trip", dftype.CreateRequest{ID: "t1"}); err != nil {
		log.Fatal(err)
	}
	_, _ = host.Runner().RunDue(ctx, 10)
	got, _ := host.Client().Get(ctx, "trip", "t1")
	fmt.Println(got.Status, got.Error.Name)
	hist, _ := host.Client().History(ctx, "trip", "t1", client.HistoryParams{})
	for _, st := range hist.Steps {
		if strings.HasPrefix(st.Name, workflow.CompensationStepPrefix) {
			fmt.Println(st.Name, st.Status)
		}
	}
	// Output:
	// flight booked
	// hotel booked
	// hotel cancelled
	// flight FL-1 cancelled
	// errored NonRetryableError
	// compensate:book hotel complete
	// compensate:book flight complete
}
