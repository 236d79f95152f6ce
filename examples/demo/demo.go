package demo

import (
	"fmt"

	"github.com/duraflow/duraflow/workflow"
)

// Workflow names.
const (
	HelloName    = "hello"
	ApprovalName = "approval"
	SleeperName  = "sleeper"
	FlakyName    = "flaky"
	ParentName   = "parent"
	ChildName    = "child"
)

// Workflows holds the typed bindings of the demo workflows.
type Workflows struct {
	Hello    *workflow.Binding[HelloParams, HelloOutput]
	Approval *workflow.Binding[ApprovalParams, ApprovalOutput]
	Sleeper  *workflow.Binding[SleeperParams, SleeperOutput]
	Flaky    *workflow.Binding[FlakyParams, FlakyOutput]
	Parent   *workflow.Binding[ParentParams, ParentOutput]
	Child    *workflow.Binding[ChildParams, ChildOutput]
}

// Register adds every demo workflow to reg. Its signature is the one
// cli.WithWorkflows takes.
func Register(reg *workflow.Registry) error {
	_, err := RegisterWorkflows(reg)
	return err
}

// RegisterWorkflows adds every demo workflow to reg and returns their typed
// bindings.
func RegisterWorkflows(reg *workflow.Registry) (*Workflows, error) {
	var (
		w   Workflows
		err error
	)
	if w.Hello, err = workflow.Register(reg, HelloName, Hello); err != nil {
		return nil, fmt.Errorf("registering %s: %w", HelloName, err)
	}
	if w.Approval, err = workflow.Register(reg, ApprovalName, Approval); err != nil {
		return nil, fmt.Errorf("registering %s: %w", ApprovalName, err)
	}
	if w.Sleeper, err = workflow.Register(reg, SleeperName, Sleeper); err != nil {
		return nil, fmt.Errorf("registering %s: %w", SleeperName, err)
	}
	if w.Flaky, err = workflow.Register(reg, FlakyName, Flaky); err != nil {
		return nil, fmt.Errorf("registering %s: %w", FlakyName, err)
	}
	if w.Child, err = workflow.Register(reg, ChildName, Child); err != nil {
		return nil, fmt.Errorf("registering %s: %w", ChildName, err)
	}
	parent := &ParentWorkflow{children: w.Child}
	if w.Parent, err = workflow.Register(reg, ParentName, parent.Run); err != nil {
		return nil, fmt.Errorf("registering %s: %w", ParentName, err)
	}
	return &w, nil
}
