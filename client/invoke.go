package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// parentLink checks the parent of an Invoke step's child and returns the
// link the store records in the instance's parent columns: the only place
// it is kept (never in metadata, which callers write), where the runner
// reads it to deliver the child's end.
func parentLink(parent *dftype.ParentRef) (*db.ParentLink, error) {
	policy := parent.Policy
	switch policy {
	case "":
		policy = dftype.ParentTerminate
	case dftype.ParentTerminate, dftype.ParentAbandon:
	default:
		return nil, fmt.Errorf("%w: parent policy %q must be %q or %q", workflow.ErrInvalidRequest, policy, dftype.ParentTerminate, dftype.ParentAbandon)
	}
	return &db.ParentLink{
		WorkflowName: parent.WorkflowName, InstanceID: parent.InstanceID, RunNumber: parent.RunNumber,
		StepKey: parent.StepKey, Policy: db.ParentPolicy(policy),
	}, nil
}

// maxReportedDepth bounds the parent chain a Get walks to report a child's
// depth (dftype.ParentRef.Depth).
const maxReportedDepth = 1024

// fillDepth sets the depth of the parent link of info, a child's (one
// recursive read along the parent columns); nothing for other instances.
func (c *Client) fillDepth(ctx context.Context, info *dftype.InstanceInfo) error {
	if info.Parent == nil {
		return nil
	}
	depth, err := c.store.InstanceDepth(ctx, db.InstanceRef{WorkflowName: info.WorkflowName, ID: info.ID}, maxReportedDepth)
	if err != nil {
		return err
	}
	info.Parent.Depth = depth
	return nil
}

// existingChild answers a child create that the store refused as existing
// (its id is taken, or its parent step has a child already): the parent
// step's child (a replay of the step after a crash, which may have picked
// another id) is returned as it is, whatever its id; an id that an
// instance of anything else holds is workflow.ErrInstanceAlreadyExists.
func (c *Client) existingChild(ctx context.Context, workflowName, id string, parent *db.ParentLink) (*dftype.InstanceInfo, error) {
	inst, err := c.store.InstanceChildOf(ctx, parent)
	if errors.Is(err, db.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s/%s exists and is not the child of step %q of %s/%s run %d",
			workflow.ErrInstanceAlreadyExists, workflowName, id, parent.StepKey, parent.WorkflowName, parent.InstanceID, parent.RunNumber)
	}
	if err != nil {
		return nil, mapError(err, workflowName, id)
	}
	return InstanceInfo(inst), nil
}

// ownChildren keeps, for a view scoped to a namespace, the children of
// that namespace: a child lives in its parent's namespace, but one an
// older version started may not, and a view never shows another
// namespace's instance.
func (c *Client) ownChildren(list []*db.Instance) []*db.Instance {
	if c.namespace == "" {
		return list
	}
	out := list[:0:0]
	for _, inst := range list {
		if inst.Namespace == c.namespace {
			out = append(out, inst)
		}
	}
	return out
}

// Children returns the instances the Invoke steps of an instance started
// (every run), oldest first.
func (c *Client) Children(ctx context.Context, workflowName, id string) ([]*dftype.InstanceInfo, error) {
	if err := c.checkInstance(workflowName, id); err != nil {
		return nil, err
	}
	if _, err := c.store.InstanceGet(ctx, db.InstanceRef{WorkflowName: workflowName, ID: id, Namespace: c.namespace}); err != nil {
		return nil, mapError(err, workflowName, id)
	}
	list, err := c.store.InstanceChildren(ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	if err != nil {
		return nil, err
	}
	list = c.ownChildren(list)
	out := make([]*dftype.InstanceInfo, len(list))
	if len(list) == 0 {
		return out, nil
	}
	// Every child of the instance nests one deeper than it.
	depth, err := c.store.InstanceDepth(ctx, db.InstanceRef{WorkflowName: workflowName, ID: id}, maxReportedDepth)
	if err != nil {
		return nil, err
	}
	for i, inst := range list {
		out[i] = InstanceInfo(inst)
		if out[i].Parent != nil {
			out[i].Parent.Depth = depth + 1
		}
	}
	return out, nil
}

// fillChildren lists the children of the instance of info (one
// index-backed read) into info.Children.
func (c *Client) fillChildren(ctx context.Context, info *dftype.InstanceInfo) error {
	list, err := c.store.InstanceChildren(ctx, db.InstanceRef{WorkflowName: info.WorkflowName, ID: info.ID})
	if err != nil {
		return err
	}
	for _, inst := range c.ownChildren(list) {
		ref := &dftype.ChildRef{WorkflowName: inst.WorkflowName, ID: inst.ID, Status: inst.Status}
		if inst.Parent != nil {
			ref.RunNumber, ref.StepKey = inst.Parent.RunNumber, inst.Parent.StepKey
		}
		info.Children = append(info.Children, ref)
	}
	return nil
}

// linkChildren names, on the invoke steps of a history page of run, the
// child each started (from info.Children).
func linkChildren(info *dftype.InstanceInfo, run int, steps []*StepInfo) {
	if len(info.Children) == 0 {
		return
	}
	for _, s := range steps {
		if s.Type != string(db.StepTypeInvoke) {
			continue
		}
		for _, c := range info.Children {
			if c.RunNumber == run && c.StepKey == s.Name {
				s.Child = c
				break
			}
		}
	}
}
