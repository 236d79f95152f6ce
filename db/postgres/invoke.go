package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// parentFromRow is the parent link of an instance row; nil when no step
// invoked it.
func parentFromRow(r *pgsqlc.WorkflowInstance) *db.ParentLink {
	if r.ParentInstanceID == nil || r.ParentWorkflowName == nil {
		return nil
	}
	l := &db.ParentLink{
		WorkflowName: *r.ParentWorkflowName,
		InstanceID:   *r.ParentInstanceID,
		StepKey:      deref(r.ParentStepKey),
		Policy:       db.ParentPolicy(deref(r.ParentPolicy)),
	}
	if r.ParentRunNumber != nil {
		l.RunNumber = int(*r.ParentRunNumber)
	}
	return l
}

// setParent records the parent of a child a create with a parent made (a
// statement of its own, so that a create without one runs none more) and
// records it on inst.
func setParent(ctx context.Context, q *pgsqlc.Queries, workflowName, id string, parent *db.ParentLink, inst *db.Instance) error {
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
	return q.InstanceSetParent(ctx, pgsqlc.InstanceSetParentParams{
		ParentWorkflowName: link.WorkflowName,
		ParentInstanceID:   link.InstanceID,
		ParentRunNumber:    int32(link.RunNumber),
		ParentStepKey:      link.StepKey,
		ParentPolicy:       string(link.Policy),
		WorkflowName:       workflowName,
		InstanceID:         id,
	})
}

// InstanceChildOf returns the child the step parent started in its run,
// or db.ErrNotFound.
func (s *Store) InstanceChildOf(ctx context.Context, parent *db.ParentLink) (*db.Instance, error) {
	row, err := s.queries.InstanceChildOf(ctx, pgsqlc.InstanceChildOfParams{
		ParentWorkflowName: parent.WorkflowName,
		ParentInstanceID:   parent.InstanceID,
		ParentRunNumber:    int32(parent.RunNumber),
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
	rows, err := s.queries.InstanceChildren(ctx, pgsqlc.InstanceChildrenParams{
		ParentWorkflowName: ref.WorkflowName,
		ParentInstanceID:   ref.ID,
	})
	if err != nil {
		return nil, fmt.Errorf("listing children: %w", interpretError(err))
	}
	return instancesFromRows(rows), nil
}

// terminateChildren terminates, in the caller's transaction, the children
// of a terminated or restarted instance (of any of its runs) whose policy
// is terminate and that have not ended, and theirs in turn (breadth
// first), each locked after its parent (see InstanceLockParent) and
// changed as InstanceTerminate changes one (transition.Terminate, its task
// deleted, its limit slots given back). A child that ended meanwhile is
// left alone.
func (s *Store) terminateChildren(ctx context.Context, q *pgsqlc.Queries, p *db.InstanceChangeParams) error {
	queue := []db.InstanceRef{{WorkflowName: p.WorkflowName, ID: p.ID}}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		children, err := q.InstanceChildrenToTerminate(ctx, pgsqlc.InstanceChildrenToTerminateParams{
			ParentWorkflowName: parent.WorkflowName,
			ParentInstanceID:   parent.ID,
		})
		if err != nil {
			return err
		}
		for _, c := range children {
			row, err := q.InstanceGetForUpdate(ctx, pgsqlc.InstanceGetForUpdateParams{
				WorkflowName: c.WorkflowName, InstanceID: c.InstanceID,
			})
			if isNoRows(err) {
				continue
			}
			if err != nil {
				return err
			}
			plan, err := transition.Terminate(dftype.InstanceStatus(row.Status), p.RecordHooks)
			if err != nil {
				continue // it ended since the list: nothing to do
			}
			if _, err := q.InstanceChangeApply(ctx, pgsqlc.InstanceChangeApplyParams{
				Status:         string(plan.Status),
				PauseRequested: plan.PauseRequested,
				NewRun:         plan.NewRun,
				Now:            p.Now,
				WorkflowName:   c.WorkflowName,
				InstanceID:     c.InstanceID,
				TaskOp:         taskOps[plan.Task.Op],
				Kind:           string(plan.Task.Kind),
				Priority:       int16(plan.Task.Priority),
				ResetAttempts:  plan.Task.ResetAttempts,
				HookReason:     string(plan.Hook.Reason),
				Channel:        s.wakeChannel,
				Notify:         plan.Notify,
			}); err != nil {
				return err
			}
			if e, ok := transition.ChangeEvent(&plan, c.WorkflowName, c.InstanceID, int(row.RunNumber), time.Time{}); ok {
				if err := s.logLifecycle(ctx, q, p.Now, e); err != nil {
					return err
				}
			}
			if row.Limited {
				cp := &db.InstanceChangeParams{WorkflowName: c.WorkflowName, ID: c.InstanceID, Now: p.Now}
				if _, err := s.limitChange(ctx, q, cp, dftype.InstanceStatus(row.Status), &plan); err != nil { // a terminate: no wait
					return err
				}
			}
			queue = append(queue, db.InstanceRef{WorkflowName: c.WorkflowName, ID: c.InstanceID})
		}
	}
	return nil
}

// parentMatchesArg is the check that n's target is the parent step the
// child's columns name (InstanceParentMatches).
func parentMatchesArg(n *db.ParentNotify) pgsqlc.InstanceParentMatchesParams {
	return pgsqlc.InstanceParentMatchesParams{
		WorkflowName: n.ChildWorkflowName, InstanceID: n.ChildInstanceID,
		ParentWorkflowName: n.WorkflowName, ParentInstanceID: n.InstanceID,
		ParentRunNumber: int32(n.RunNumber), ParentStepKey: n.StepKey,
	}
}

// InstanceDepth counts the ancestors of an instance along its parent
// columns, at most max, in one recursive statement.
func (s *Store) InstanceDepth(ctx context.Context, ref db.InstanceRef, max int) (int, error) {
	n, err := s.queries.InstanceDepth(ctx, pgsqlc.InstanceDepthParams{
		WorkflowName: ref.WorkflowName, InstanceID: ref.ID, MaxDepth: int32(min(max, math.MaxInt32)),
	})
	if err != nil {
		return 0, fmt.Errorf("reading the nesting of an instance: %w", interpretError(err))
	}
	return int(n), nil
}

// notifyParent sends a child's end to its parent (EventSend's statements,
// on the held connection of the child's checkpoint) and commits the
// transaction. A parent that no longer exists or has ended receives
// nothing: the child's checkpoint commits all the same. It reports whether
// the parent's task was made due.
func (s *Store) notifyParent(ctx context.Context, sender batchSender, n *db.ParentNotify, now *time.Time) (bool, error) {
	steps, finish, err := s.eventSendSteps(ctx, &db.EventSendParams{
		WorkflowName: n.WorkflowName,
		InstanceID:   n.InstanceID,
		Type:         n.EventType(),
		Payload:      n.Payload,
		RecordHooks:  n.RecordHooks,
		Now:          now,
	})
	if err != nil {
		return false, err
	}
	res, err := finish(sendPipeline(ctx, sender, planSettings, []string{"COMMIT"}, steps...))
	switch {
	case errors.Is(err, db.ErrNotFound), errors.Is(err, db.ErrTerminal):
		return false, nil
	case err != nil:
		return false, err
	}
	return res.Woken && res.LeasedTask == nil, nil
}

// notifyParentTx is notifyParent in the caller's transaction (a
// terminate): each of EventSend's statements runs once, in order.
func (s *Store) notifyParentTx(ctx context.Context, q *pgsqlc.Queries, n *db.ParentNotify, now *time.Time) error {
	if ok, err := q.InstanceParentMatches(ctx, parentMatchesArg(n)); err != nil || !ok {
		return err // not the child's parent step: nothing to deliver
	}
	steps, finish, err := s.eventSendSteps(ctx, &db.EventSendParams{
		WorkflowName: n.WorkflowName,
		InstanceID:   n.InstanceID,
		Type:         n.EventType(),
		Payload:      n.Payload,
		RecordHooks:  n.RecordHooks,
		Now:          now,
	})
	if err != nil {
		return err
	}
	var runErr error
	for _, step := range steps {
		if runErr = step(q); runErr != nil {
			break
		}
	}
	_, err = finish(runErr)
	if errors.Is(err, db.ErrNotFound) || errors.Is(err, db.ErrTerminal) {
		return nil
	}
	return err
}
