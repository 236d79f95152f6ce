package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// EventSend applies transition.Send in one write transaction: it buffers
// an event for the instance's current run and, when the instance waits for
// that type and is not paused, makes its task due now (or, with p.Lease,
// leases it to the lease's owner as a claim would) and records an event
// hook entry when p.RecordHooks is set. The sent event is delivered to the
// run it wakes when transition.DeliverAtSend says so (deliverEvent). It
// returns db.ErrNotFound for an unknown instance and db.ErrTerminal for a
// terminal one; in both cases nothing is written.
func (s *Store) EventSend(ctx context.Context, p *db.EventSendParams) (*db.EventSendResult, error) {
	var res *db.EventSendResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		var err error
		res, err = s.eventSendTx(ctx, q, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sending event: %w", interpretError(err))
	}
	return res, nil
}

// eventSendTx is EventSend inside the caller's write transaction: the send
// on its own, or the delivery of a child's end to its parent in the
// transaction of the child's last checkpoint.
func (s *Store) eventSendTx(ctx context.Context, q *litesqlc.Queries, p *db.EventSendParams) (*db.EventSendResult, error) {
	var res *db.EventSendResult
	err := func() error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		inst, err := q.InstanceTouch(ctx, litesqlc.InstanceTouchParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			Namespace:    p.Namespace,
		})
		if err != nil {
			return err
		}
		plan, err := transition.Send(dftype.InstanceStatus(inst.Status), p.RecordHooks, p.Lease != nil)
		if err != nil {
			return err
		}
		row, err := q.EventInsert(ctx, litesqlc.EventInsertParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    inst.RunNumber,
			Type:         p.Type,
			Payload:      jsonArg(p.Payload),
			Now:          now,
		})
		if err != nil {
			return err
		}
		res = &db.EventSendResult{Event: eventFromRow(&row)}
		if err := s.logLifecycle(ctx, q, now, transition.SendEvent(p.WorkflowName, p.InstanceID, int(inst.RunNumber), p.Type, time.Time{})); err != nil {
			return err
		}
		if !plan.Wake {
			return nil
		}
		woken, err := q.TaskWakeForEvent(ctx, litesqlc.TaskWakeForEventParams{
			Now:          now,
			Kind:         string(plan.Task.Kind),
			Priority:     int64(plan.Task.Priority),
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    inst.RunNumber,
			Type:         p.Type,
		})
		if err != nil {
			return err
		}
		res.Woken = woken > 0
		if !res.Woken {
			return nil
		}
		if err := recordHook(ctx, q, plan.Hook, p.WorkflowName, p.InstanceID, now); err != nil {
			return err
		}
		run := runRef{workflowName: p.WorkflowName, instanceID: p.InstanceID, runNumber: inst.RunNumber}
		if err := deliverEvent(ctx, q, run, p, now, res); err != nil {
			return err
		}
		if !plan.Leased {
			return nil
		}
		task, err := q.TaskLeaseWoken(ctx, litesqlc.TaskLeaseWokenParams{
			LockOwner:    p.Lease.Owner,
			LockedUntil:  micros(p.Lease.LockedUntil),
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			Queues:       listArg(p.Lease.Queues),
		})
		if isNoRows(err) {
			return nil // not a queue of the lease's owner: due for a claim
		}
		if err != nil {
			return err
		}
		res.LeasedTask = taskFromRow(&task)
		return q.InstanceStartClaimed(ctx, litesqlc.InstanceStartClaimedParams{Now: now, TaskIds: listArg([]int64{task.ID})})
	}()
	return res, err
}

// EventList returns a page of the events of an instance, oldest first, after
// the event p.AfterID; RunNumber 0 lists every run and Limit 0 every event.
func (s *Store) EventList(ctx context.Context, p *db.EventListParams) ([]*db.Event, error) {
	if p.PayloadBudget > 0 {
		rows, err := s.queriesFor(ctx, false).EventListBounded(ctx, litesqlc.EventListBoundedParams{
			PayloadBudget: int64(p.PayloadBudget),
			WorkflowName:  p.WorkflowName,
			InstanceID:    p.InstanceID,
			RunNumber:     int64(p.RunNumber),
			AfterID:       p.AfterID,
			Max:           limitArg(p.Limit),
		})
		if err != nil {
			return nil, fmt.Errorf("listing events: %w", interpretError(err))
		}
		list := make([]*db.Event, len(rows))
		for i := range rows {
			list[i] = eventFromBoundedRow(&rows[i])
		}
		return list, nil
	}
	var (
		rows []litesqlc.WorkflowEvent
		err  error
	)
	if p.RunNumber == 0 {
		rows, err = s.queriesFor(ctx, false).EventList(ctx, litesqlc.EventListParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			AfterID:      p.AfterID,
			Max:          limitArg(p.Limit),
		})
	} else {
		rows, err = s.queriesFor(ctx, false).EventListRun(ctx, litesqlc.EventListRunParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int64(p.RunNumber),
			AfterID:      p.AfterID,
			Max:          limitArg(p.Limit),
		})
	}
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", interpretError(err))
	}
	list := make([]*db.Event, len(rows))
	for i := range rows {
		list[i] = eventFromRow(&rows[i])
	}
	return list, nil
}

// deliverEvent delivers the sent event to the run the send woke when
// transition.DeliverAtSend says so: the run's first step waiting for the
// type completes with it, and it is marked consumed by that step. It
// records the delivery in res.
func deliverEvent(ctx context.Context, q *litesqlc.Queries, run runRef, p *db.EventSendParams, now int64, res *db.EventSendResult) error {
	undelivered, err := q.EventUndeliveredCount(ctx, litesqlc.EventUndeliveredCountParams{
		WorkflowName: run.workflowName,
		InstanceID:   run.instanceID,
		RunNumber:    run.runNumber,
		Type:         p.Type,
	})
	if err != nil || !transition.DeliverAtSend(p.Now != nil, int(undelivered)) {
		return err
	}
	key, err := q.StepFirstWaitingForEvent(ctx, litesqlc.StepFirstWaitingForEventParams{
		WorkflowName: run.workflowName,
		InstanceID:   run.instanceID,
		RunNumber:    run.runNumber,
		Type:         p.Type,
	})
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ev, err := consumeEvent(ctx, q, run, &db.ConsumeEvent{Type: p.Type, StepKey: key}, now)
	if err != nil || ev == nil {
		return err
	}
	res.DeliveredTo, res.Event = key, ev
	return nil
}
