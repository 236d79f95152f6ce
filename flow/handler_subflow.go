package flow

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// TypeSubflow is the step type of the built-in subflow handler.
const TypeSubflow = "subflow"

// SubflowConfig is the config of a subflow step: a durable step.Invoke of
// another flow or Go workflow by name (and, for a flow, version), with the
// step's input as the child's params. The child's output is the step's
// output; a child that errors or is terminated fails the step with
// ChildFailedError, and a wait past the timeout with InvokeTimeoutError,
// which onFailure may catch.
//
//	{"workflow": "charge", "version": "1.2.0", "timeout": "1 hour"}
type SubflowConfig struct {
	// Workflow is the registered name of the child: a flow id or a Go
	// workflow's name.
	Workflow string `json:"workflow"`
	// Version pins the child flow's version; empty runs its latest. Only
	// for flows.
	Version string `json:"version,omitempty"`
	// Timeout bounds the wait for the child's end; the child keeps running
	// past it.
	//
	// Defaults to 365 days.
	Timeout dftype.Duration `json:"timeout,omitempty"`
	// Policy is what a terminate of the parent does to the child:
	// "terminate" (the default) or "abandon".
	Policy dftype.ParentPolicy `json:"policy,omitempty"`
}

type subflowHandler struct{}

func (subflowHandler) Type() string { return TypeSubflow }

func (subflowHandler) Validate(config json.RawMessage) error {
	var c SubflowConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	var problems []Problem
	if c.Workflow == "" {
		problems = append(problems, Problem{Path: "workflow", Message: "is required"})
	} else if err := workflow.ValidateWorkflowName(c.Workflow); err != nil {
		problems = append(problems, Problem{Path: "workflow", Message: err.Error()})
	}
	if c.Version != "" {
		if _, err := ParseVersion(c.Version); err != nil {
			problems = append(problems, Problem{Path: "version", Message: err.Error()})
		}
	}
	if c.Timeout != 0 && (c.Timeout.Std() < 0 || c.Timeout.Std() > workflow.MaxSleep) {
		problems = append(problems, Problem{Path: "timeout", Message: "must be at most 365 days"})
	}
	switch c.Policy {
	case "", dftype.ParentTerminate, dftype.ParentAbandon:
	default:
		problems = append(problems, Problem{Path: "policy", Message: `must be "terminate" or "abandon"`})
	}
	return newValidationError(problems, nil)
}

func (subflowHandler) Run(context.Context, *Invocation) (any, error) {
	return nil, errors.New("a subflow step runs as a durable invoke, not through Run")
}

// invokeOptions are the options of the step's Invoke, with the input as
// the child's params.
func (subflowHandler) invokeOptions(config json.RawMessage, input any) (workflow.InvokeOptions, error) {
	var c SubflowConfig
	if err := DecodeConfig(config, &c); err != nil {
		return workflow.InvokeOptions{}, err
	}
	opts := workflow.InvokeOptions{Workflow: c.Workflow, Params: input, Timeout: c.Timeout.Std(), Policy: c.Policy}
	if c.Version != "" {
		md, err := WithPin(nil, Pin{ID: c.Workflow, Version: c.Version})
		if err != nil {
			return opts, err
		}
		opts.Metadata = md
	}
	return opts, nil
}

// subflowTarget returns the workflow a subflow step's config invokes, or
// "" when the config does not decode.
func subflowTarget(config json.RawMessage) string {
	var c SubflowConfig
	if DecodeConfig(config, &c) != nil {
		return ""
	}
	return c.Workflow
}

// childFailure turns an Invoke's error into the StepError onFailure
// catches: a failed or terminated child, or a timeout.
func childFailure(name string, err error) error {
	var ce *workflow.ChildError
	if errors.As(err, &ce) {
		return &workflow.StepError{Step: name, Name: workflow.ErrorNameChildFailed, Message: ce.Error(), Attempts: 1}
	}
	return err
}
