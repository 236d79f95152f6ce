package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/workflow"
)

// ParentParams is the input of parent; it has no fields.
type ParentParams struct{}

// ParentOutput is the output of parent.
type ParentOutput struct {
	// Child is the id of the child instance it started.
	Child string `json:"child"`
}

// ChildParams is the input of child.
type ChildParams struct {
	// Parent is the id of the parent instance.
	Parent string `json:"parent"`
}

// ChildOutput is the output of child.
type ChildOutput struct {
	// Parent is the id of the parent instance.
	Parent string `json:"parent"`
}

// ChildID returns the id of the child instance a parent instance starts:
// the parent's id plus "-child".
func ChildID(parentID string) string { return parentID + "-child" }

// ParentWorkflow starts a child workflow from a step and completes without
// waiting for it: {"child":"<id>-child"}. Create it through RegisterWorkflows.
type ParentWorkflow struct {
	children *workflow.Binding[ChildParams, ChildOutput]
}

// Run starts the child. The child's id derives from the parent's and an
// existing child counts as started, so a retried step does not start a
// second one.
func (w *ParentWorkflow) Run(_ context.Context, event workflow.Event[ParentParams], step workflow.Step) (ParentOutput, error) {
	id := ChildID(event.InstanceID)
	if err := workflow.ValidateInstanceID(id); err != nil {
		return ParentOutput{}, workflow.NonRetryable(fmt.Errorf("parent id %q is too long for a child id: %w", event.InstanceID, err))
	}
	child, err := workflow.Do(step, "start child", func(ctx context.Context) (string, error) {
		_, err := w.children.Create(ctx, workflow.CreateOptions[ChildParams]{ID: id, Params: ChildParams{Parent: event.InstanceID}})
		if err != nil && !errors.Is(err, workflow.ErrInstanceAlreadyExists) {
			return "", err
		}
		return id, nil
	})
	if err != nil {
		return ParentOutput{}, err
	}
	return ParentOutput{Child: child}, nil
}

// Child reports its parent: {"parent":"<parent id>"}.
func Child(_ context.Context, event workflow.Event[ChildParams], step workflow.Step) (ChildOutput, error) {
	return ChildOutput{Parent: event.Payload.Parent}, nil
}
