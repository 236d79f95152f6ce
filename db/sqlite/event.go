package sqlite

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

// EventSend buffers an event for the instance's current run and, when the
// instance waits for that type and is not paused, makes its task due now (or,
// with p.Lease, leases it to the lease's owner as a claim would) and records
// an event hook entry when p.RecordHooks is set. The event a send wakes a
// run with is delivered to it in the same transaction (deliverEvent). It
// returns
// db.ErrNotFound for an unknown instance and db.ErrTerminal for a terminal
// one; in both cases nothing is written.
func (s *Store) EventSend(ctx context.Context, p *db.EventSendParams) (*db.EventSendResult, error) {
	var res *db.EventSendResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		inst, err := q.InstanceTouch(ctx, litesqlc.InstanceTouchParams{
			Now:          now,
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		})
		if err != nil {
			return err
		}
		status := db.InstanceStatus(inst.Status)
		if status.Terminal() {
			return db.ErrTerminal
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
		if status == db.StatusPaused || status == db.StatusWaitingForPause {
			return nil
		}
		woken, err := q.TaskWakeForEvent(ctx, litesqlc.TaskWakeForEventParams{
			Now:          now,
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
		if err := recordHook(ctx, q, p.RecordHooks, p.WorkflowName, p.InstanceID, db.HookReasonEvent, now); err != nil {
			return err
		}
		if err := deliverEvent(ctx, q, p, int(inst.RunNumber), now, res); err != nil {
			return err
		}
		if p.Lease == nil {
			return nil
		}
		task, err := q.TaskLeaseWoken(ctx, litesqlc.TaskLeaseWokenParams{
			LockOwner:    p.Lease.Owner,
			LockedUntil:  micros(p.Lease.LockedUntil),
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
		})
		if err != nil {
			return err
		}
		res.LeasedTask = taskFromRow(&task)
		return q.InstanceStartClaimed(ctx, litesqlc.InstanceStartClaimedParams{Now: now, TaskIds: listArg([]int64{task.ID})})
	})
	if err != nil {
		return nil, fmt.Errorf("sending event: %w", interpretError(err))
	}
	return res, nil
}

// EventList returns a page of the events of an instance, oldest first, after
// the event p.AfterID; RunNumber 0 lists every run and Limit 0 every event.
func (s *Store) EventList(ctx context.Context, p *db.EventListParams) ([]*db.Event, error) {
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

// deliverEvent delivers an event to the run a send woke, as the run would
// consume it on resuming (see db.EventSendResult.DeliveredTo): the run's
// first step waiting for the type completes with the oldest undelivered
// event of the type, which is marked consumed by it. The send's write
// transaction excludes every other writer, so the oldest is always found
// here. It records the delivery in res.
func deliverEvent(ctx context.Context, q *litesqlc.Queries, p *db.EventSendParams, runNumber int, now int64, res *db.EventSendResult) error {
	key, err := q.StepFirstWaitingForEvent(ctx, litesqlc.StepFirstWaitingForEventParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    int64(runNumber),
		Type:         p.Type,
	})
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ev, err := consumeEvent(ctx, q, &db.CheckpointParams{
		WorkflowName: p.WorkflowName,
		InstanceID:   p.InstanceID,
		RunNumber:    runNumber,
		ConsumeEvent: &db.ConsumeEvent{Type: p.Type, StepKey: key},
	}, now)
	if err != nil || ev == nil {
		return err
	}
	res.DeliveredTo = key
	if ev.ID == res.Event.ID {
		res.Event = ev
	}
	return nil
}
