package flow

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// TypeWaitForEvent is the step type of the built-in wait-for-event handler.
const TypeWaitForEvent = "wait-for-event"

// WaitForEventConfig is the config of a wait-for-event step: a durable wait
// (step.WaitForEvent) for the next event of the type sent to the instance.
// The event's payload is the step's output. When the timeout passes first
// the step fails with EventTimeoutError, which onFailure may catch.
//
//	{"type": "approval", "timeout": "1 day"}
type WaitForEventConfig struct {
	// Type is the event type, with the rules of workflow.ValidateEventType.
	Type string `json:"type"`
	// Timeout is how long to wait, from 1 second to 365 days.
	//
	// Defaults to 24 hours.
	Timeout dftype.Duration `json:"timeout,omitempty"`
}

type waitHandler struct{}

func (waitHandler) Type() string { return TypeWaitForEvent }

func (h waitHandler) Validate(config json.RawMessage) error {
	var c WaitForEventConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	var problems []Problem
	if c.Type == "" {
		problems = append(problems, Problem{Path: "type", Message: "is required"})
	} else if err := workflow.ValidateEventType(c.Type); err != nil {
		problems = append(problems, Problem{Path: "type", Message: err.Error()})
	}
	if c.Timeout != 0 && (c.Timeout.Std() < workflow.MinEventTimeout || c.Timeout.Std() > workflow.MaxEventTimeout) {
		problems = append(problems, Problem{Path: "timeout", Message: "must be between 1 second and 365 days"})
	}
	return newValidationError(problems, nil)
}

func (waitHandler) Run(context.Context, *Invocation) (any, error) {
	return nil, errors.New("a wait-for-event step runs as a durable wait, not through Run")
}

func (waitHandler) waitOptions(config json.RawMessage) (workflow.WaitOptions, error) {
	var c WaitForEventConfig
	if err := DecodeConfig(config, &c); err != nil {
		return workflow.WaitOptions{}, err
	}
	return workflow.WaitOptions{Type: c.Type, Timeout: c.Timeout.Std()}.Resolved()
}
