package db

import (
	"context"
	"encoding/json"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// ParentPolicy says what happens to a child when its parent is terminated.
type ParentPolicy string

// Parent policies.
const (
	// ParentPolicyTerminate terminates the child (and, recursively, its own
	// children with this policy) in the transaction that terminates the
	// parent. The default.
	ParentPolicyTerminate ParentPolicy = "terminate"
	// ParentPolicyAbandon leaves the child running when the parent is
	// terminated; its end is then delivered to nobody.
	ParentPolicyAbandon ParentPolicy = "abandon"
)

// ParentLink names the step of a parent instance that invoked a child: the
// child's Instance.Parent.
type ParentLink struct {
	WorkflowName string
	InstanceID   string
	RunNumber    int
	StepKey      string
	// Policy is what a terminate of the parent does to the child.
	Policy ParentPolicy
}

// Same reports whether l and o name the same parent step (the policy aside).
func (l *ParentLink) Same(o *ParentLink) bool {
	return l != nil && o != nil && l.WorkflowName == o.WorkflowName && l.InstanceID == o.InstanceID &&
		l.RunNumber == o.RunNumber && l.StepKey == o.StepKey
}

// ParentNotify asks a checkpoint that ends a child's run to deliver the
// child's end to its parent in the same transaction: an event of the
// reserved type workflow.InvokeEventType(RunNumber, StepKey) with Payload,
// sent to the parent's current run as EventSend sends one (buffered, waking
// the parent when it waits for it, delivered to the waiting step). The
// store delivers it only when the child's parent columns name that parent
// step (the link its create recorded, Instance.Parent), checked in the
// transaction. A parent that no longer exists or has ended, or a target
// that is not the child's parent step, receives nothing, and the
// checkpoint commits all the same.
type ParentNotify struct {
	// ChildWorkflowName and ChildInstanceID name the child whose end is
	// delivered.
	ChildWorkflowName string
	ChildInstanceID   string
	// WorkflowName, InstanceID, RunNumber and StepKey name the parent step
	// that waits for the child.
	WorkflowName string
	InstanceID   string
	RunNumber    int
	StepKey      string
	Payload      json.RawMessage
	// RecordHooks records an event hook entry when the parent is woken.
	RecordHooks bool
}

// EventType is the reserved event type the parent's Invoke step waits on.
func (n *ParentNotify) EventType() string { return workflow.InvokeEventType(n.RunNumber, n.StepKey) }

// ChildNotify is the delivery of the end of inst, a child, to the Invoke
// step of its parent that waits for it (Instance.Parent), with the
// outcome's payload; nil when inst has no parent.
func ChildNotify(inst *Instance, payload json.RawMessage, recordHooks bool) *ParentNotify {
	if inst == nil || inst.Parent == nil {
		return nil
	}
	return &ParentNotify{
		ChildWorkflowName: inst.WorkflowName, ChildInstanceID: inst.ID,
		WorkflowName: inst.Parent.WorkflowName, InstanceID: inst.Parent.InstanceID,
		RunNumber: inst.Parent.RunNumber, StepKey: inst.Parent.StepKey,
		Payload: payload, RecordHooks: recordHooks,
	}
}

// ChildStore is the part of a Store that reads the parent and child links
// of awaitable child workflows (docs/children.md).
type ChildStore interface {
	// InstanceChildren returns the children an instance's Invoke steps
	// started (every run), oldest first.
	InstanceChildren(ctx context.Context, ref InstanceRef) ([]*Instance, error)
	// InstanceChildOf returns the child that the step parent names (its
	// workflow, id, run and step key; the policy aside) started, or
	// ErrNotFound. A step has at most one child per run (see
	// InstanceCreateParams.Parent).
	InstanceChildOf(ctx context.Context, parent *ParentLink) (*Instance, error)
	// InstanceDepth counts the ancestors of an instance along the parent
	// links (0 for an instance that no step invoked), counting at most max:
	// how deep it nests. ErrNotFound is not reported: a missing instance
	// has none.
	InstanceDepth(ctx context.Context, ref InstanceRef, max int) (int, error)
}

// TerminatedChildNotify is the delivery of a terminated child's end to the
// Invoke step of its parent that waits for it; nil when inst has no parent.
func TerminatedChildNotify(inst *Instance, recordHooks bool) *ParentNotify {
	if inst == nil || inst.Parent == nil {
		return nil
	}
	payload, err := json.Marshal(dftype.ChildOutcome{
		WorkflowName: inst.WorkflowName, InstanceID: inst.ID, Status: dftype.StatusTerminated,
	})
	if err != nil {
		return nil
	}
	return ChildNotify(inst, payload, recordHooks)
}
