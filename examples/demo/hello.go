package demo

import (
	"cmp"
	"context"

	"github.com/duraflow/duraflow/workflow"
)

// HelloParams is the input of hello.
type HelloParams struct {
	// Name is who to greet; empty greets "World".
	Name string `json:"name"`
}

// HelloOutput is the output of hello.
type HelloOutput struct {
	// Greeting is "Hello, <name>!".
	Greeting string `json:"greeting"`
}

// Hello greets by name in one step: {"name":"Ada"} → {"greeting":"Hello, Ada!"}.
func Hello(_ context.Context, event workflow.Event[HelloParams], step workflow.Step) (HelloOutput, error) {
	greeting, err := workflow.Do(step, "greet", func(context.Context) (string, error) {
		return "Hello, " + cmp.Or(event.Payload.Name, "World") + "!", nil
	})
	if err != nil {
		return HelloOutput{}, err
	}
	return HelloOutput{Greeting: greeting}, nil
}
