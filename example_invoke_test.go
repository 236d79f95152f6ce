package duraflow_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Example_invoke waits for child workflows: the quote binding's Invoke
// returns a quote's total with typed params and output, InvokeAll fans out
// three more with at most two in flight, and a failed child reaches the
// parent as a *workflow.ChildError.
func Example_invoke() {
	ctx := context.Background()
	reg := workflow.NewRegistry()
	quote := workflow.MustRegister(reg, "quote", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
		if ev.Payload < 0 {
			return 0, workflow.NonRetryable(errors.New("no negative quantities"))
		}
		return workflow.Do(step, "price", func(context.Context) (int, error) { return ev.Payload * 5, nil })
	})
	workflow.MustRegister(reg, "order", func(ctx context.Context, ev workflow.Event[[]int], step workflow.Step) (string, error) {
		first, err := quote.Invoke(step, "first quote", ev.Payload[0])
		if err != nil {
			return "", err
		}
		var calls []workflow.InvokeCall
		for i, qty := range ev.Payload[1:] {
			calls = append(calls, workflow.InvokeCall{Name: fmt.Sprintf("quote %d", i+1), Options: workflow.InvokeOptions{Workflow: "quote", Params: qty}})
		}
		totals, errs, err := workflow.InvokeAll[int](step, calls, 2)
		if err != nil {
			return "", err
		}
		out := fmt.Sprintf("first %d, then %v", first, totals)
		var failed *workflow.ChildError
		for _, e := range errs {
			if errors.As(e, &failed) {
				out += fmt.Sprintf("; %s %s: %s", failed.InstanceID[:6], failed.Status, failed.ChildErrorMessage)
			}
		}
		return out, nil
	})
	host, _, done := onDemand(ctx, reg)
	defer done()

	if _, err := host.Client().Create(ctx, "order", dftype.CreateRequest{ID: "order1", Params: []byte(`[2, 3, -1, 4]`)}); err != nil {
		log.Fatal(err)
	}
	for range 10 {
		_, _ = host.Runner().RunDue(ctx, 10)
	}
	got, _ := host.Client().Get(ctx, "order", "order1")
	fmt.Println(got.Status, string(got.Output))
	fmt.Println(len(got.Children), "children")
	// Output:
	// complete "first 10, then [15 0 20]; order1 errored: no negative quantities"
	// 4 children
}
