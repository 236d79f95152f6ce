package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// parentFromRow is the parent link of an instance row; nil when no step
// invoked it.
func parentFromRow(r *litesqlc.WorkflowInstance) *db.ParentLink {
	if r.ParentInstanceID == nil || r.ParentWorkflowName == nil {
		return nil
	}
	l := &db.ParentLink{
		WorkflowName: *r.ParentWorkflowName,
		InstanceID:   *r.ParentInstanceID,
	}
	if r.ParentStepKey != nil {
		l.StepKey = *r.ParentStepKey
	}
	if r.ParentPolicy != nil {
		l.Policy = db.ParentPolicy(*r.ParentPolicy)
	}
	if r.ParentRunNumber != nil {
		l.RunNumber = int(*r.ParentRunNumber)
	}
	return l
}

// setParent records the parent of a child a create with a parent made (a
// statement of its own, so that a create without one runs none more) and
// records it on inst.
func setParent(ctx context.Context, q *litesqlc.Queries, workflowName, id string, parent *db.ParentLink, inst *db.Instance) error {
	if parent == nil {
		return nil
	}
	link := *parent
	if link.Policy == "" {
		link.Policy = db.ParentPolicyTerminate
	}
	if inst != nil {
		inst.Parent = &link
	}
	return q.InstanceSetParent(ctx, litesqlc.InstanceSetParentParams{
		ParentWorkflowName: link.WorkflowName,
		ParentInstanceID:   link.InstanceID,
		ParentRunNumber:    int64(link.RunNumber),
		ParentStepKey:      link.StepKey,
		ParentPolicy:       string(link.Policy),
		WorkflowName:       workflowName,
		InstanceID:         id,
	})
}

// InstanceChildOf returns the child the step parent started in its run,
// or db.ErrNotFound.
func (s *Store) InstanceChildOf(ctx context.Context, parent *db.ParentLink) (*db.Instance, error) {
	row, err := s.queriesFor(ctx, false).InstanceChildOf(ctx, litesqlc.InstanceChildOfParams{
		ParentWorkflowName: parent.WorkflowName,
		ParentInstanceID:   parent.InstanceID,
		ParentRunNumber:    int64(parent.RunNumber),
		ParentStepKey:      parent.StepKey,
	})
	if err != nil {
		return nil, fmt.Errorf("reading the child of step %q: %w", parent.StepKey, interpretError(err))
	}
	return instanceFromRow(&row), nil
}

// InstanceChildren returns the children an instance's Invoke steps
// started, oldest first.
func (s *Store) InstanceChildren(ctx context.Context, ref db.InstanceRef) ([]*db.Instance, error) {
	rows, err := s.queriesFor(ctx, false).InstanceChildren(ctx, litesqlc.InstanceChildrenParams{
		ParentWorkflowName: ref.WorkflowName,
		ParentInstanceID:   ref.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("listing children: %w", interpretError(err))
	}
	list := make([]*db.Instance, len(rows))
	for i := range rows {
		list[i] = instanceFromRow(&rows[i])
	}
	return list, nil
}

// terminateChildren terminates, in the caller's write transaction, the
// children of a terminated or restarted instance (of any of its runs) whose
// policy is terminate and that have not ended, and theirs in turn (breadth
// first), each as InstanceTerminate terminates one.
func (s *Store) terminateChildren(ctx context.Context, q *litesqlc.Queries, p *db.InstanceChangeParams) error {
	queue := []db.InstanceRef{{WorkflowName: p.WorkflowName, ID: p.ID}}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		children, err := q.InstanceChildrenToTerminate(ctx, litesqlc.InstanceChildrenToTerminateParams{
			ParentWorkflowName: parent.WorkflowName,
			ParentInstanceID:   parent.ID,
		})
		if err != nil {
			return err
		}
		for _, c := range children {
			cp := &db.InstanceChangeParams{WorkflowName: c.WorkflowName, ID: c.InstanceID, Now: p.Now, RecordHooks: p.RecordHooks}
			if _, _, err := s.instanceChangeTx(ctx, q, cp, transition.Terminate, nil); err != nil && !errors.Is(err, db.ErrTerminal) {
				return err
			}
			queue = append(queue, db.InstanceRef{WorkflowName: c.WorkflowName, ID: c.InstanceID})
		}
	}
	return nil
}

// InstanceDepth counts the ancestors of an instance along its parent
// columns, at most max, in one recursive statement.
func (s *Store) InstanceDepth(ctx context.Context, ref db.InstanceRef, max int) (int, error) {
	n, err := s.queriesFor(ctx, false).InstanceDepth(ctx, litesqlc.InstanceDepthParams{
		WorkflowName: ref.WorkflowName, InstanceID: ref.ID, MaxDepth: int64(max),
	})
	if err != nil {
		return 0, fmt.Errorf("reading the nesting of an instance: %w", interpretError(err))
	}
	return int(n), nil
}

// notifyParent sends a child's end to its parent (eventSendTx) in the
// child's checkpoint transaction, when the child's parent columns name the
// target step (InstanceParentMatches). A parent that no longer exists or has
// ended receives nothing: the child's checkpoint commits all the same. It
// reports whether the parent's task was made due.
func (s *Store) notifyParent(ctx context.Context, q *litesqlc.Queries, n *db.ParentNotify, now *time.Time) (bool, error) {
	ok, err := q.InstanceParentMatches(ctx, litesqlc.InstanceParentMatchesParams{
		WorkflowName: n.ChildWorkflowName, InstanceID: n.ChildInstanceID,
		ParentWorkflowName: n.WorkflowName, ParentInstanceID: n.InstanceID,
		ParentRunNumber: int64(n.RunNumber), ParentStepKey: n.StepKey,
	})
	if err != nil || !ok {
		return false, err // not the child's parent step: nothing to deliver
	}
	res, err := s.eventSendTx(ctx, q, &db.EventSendParams{
		WorkflowName: n.WorkflowName,
		InstanceID:   n.InstanceID,
		Type:         n.EventType(),
		Payload:      n.Payload,
		RecordHooks:  n.RecordHooks,
		Now:          now,
	})
	switch {
	case errors.Is(err, db.ErrNotFound), errors.Is(err, db.ErrTerminal), isNoRows(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return res.Woken, nil
}
