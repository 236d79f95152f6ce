package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
	"github.com/duraflow/duraflow/dftype"
)

// EventSend applies transition.Send in one transaction sent as one
// pipelined round trip (see EventSendLock, EventSendInsert and EventSendWake
// in event.sql, each guarded by the instance EventSendLock locked): it
// buffers an event for the current run of an instance and, when that run
// waits for an event of the type, makes its task due now (a resume),
// records a hook entry when p.RecordHooks is set and notifies the wake
// channel. The instance's status is read inside the statements, so the
// rule's statuses that wake (transition.WakeStatuses) are bound as a
// parameter. With p.Lease the woken run's task is leased to its owner
// instead (see db.EventSendParams.Lease). The sent event is delivered to
// the run it wakes as transition.DeliverAtSend says: only a send on the
// caller's clock (p.Now) carries the step result, and the statement
// delivers it only when the event is the run's only undelivered one of the
// type (db.EventSendResult.DeliveredTo). db.ErrNotFound when there is no
// such instance and db.ErrTerminal when it has ended; then nothing changes.
func (s *Store) EventSend(ctx context.Context, p *db.EventSendParams) (*db.EventSendResult, error) {
	steps, finish, err := s.eventSendSteps(ctx, p)
	if err != nil {
		return nil, err
	}
	return finish(s.pipeline(ctx, append([]string{"BEGIN"}, planSettings...), []string{"COMMIT"}, steps...))
}

// eventSendSteps returns the statements of EventSend as pipeline steps, and
// what reads its result once they ran (given the pipeline's error): the
// send on its own, or the delivery of a child's end to its parent in the
// transaction of the child's last checkpoint (checkpointNotifyParent).
func (s *Store) eventSendSteps(ctx context.Context, p *db.EventSendParams) ([]pipelineStep, func(error) (*db.EventSendResult, error), error) {
	var (
		inst    pgsqlc.EventSendLockRow
		instErr error
		row     pgsqlc.WorkflowEvent
		rowErr  error
		woken   []pgsqlc.EventSendWakeRow
	)
	now := p.Now
	var delivered json.RawMessage
	if now != nil {
		// The event's timestamp as stored (Postgres keeps microseconds) is
		// the one its step result carries.
		at := now.UTC().Truncate(time.Microsecond)
		now = &at
		var err error
		delivered, err = transition.EventStepResult(&db.Event{Type: p.Type, Payload: p.Payload, CreatedAt: at})
		if err != nil {
			return nil, nil, fmt.Errorf("sending event: encoding its step result: %w", err)
		}
	}
	// The plan of a send that wakes; the statements decide whether it does
	// (the instance's status is one of wakeStatuses).
	plan := transition.WakePlan(p.RecordHooks, p.Lease != nil)
	wake := pgsqlc.EventSendWakeParams{
		Kind:            string(plan.Task.Kind),
		Priority:        int16(plan.Task.Priority),
		WakeStatuses:    wakeStatuses,
		Channel:         s.wakeChannel,
		Now:             now,
		DeliveredResult: delivered,
		WorkflowName:    p.WorkflowName,
		InstanceID:      p.InstanceID,
		Type:            p.Type,
		RecordHook:      plan.Hook.Record(),
		Namespace:       p.Namespace,
		LeaseQueues:     []string{},
	}
	if plan.Leased {
		wake.LockOwner, wake.LockedUntil = &p.Lease.Owner, &p.Lease.LockedUntil
		wake.LeaseQueues = emptyIfNil(p.Lease.Queues)
	}
	key := pgsqlc.EventSendLockParams{Now: now, WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, Namespace: p.Namespace}
	steps := []pipelineStep{
		func(q *pgsqlc.Queries) error {
			inst, instErr = q.EventSendLock(ctx, key)
			if instErr != nil && !isNoRows(instErr) {
				return instErr
			}
			return nil
		},
		func(q *pgsqlc.Queries) error {
			row, rowErr = q.EventSendInsert(ctx, pgsqlc.EventSendInsertParams{
				Type:         p.Type,
				Payload:      jsonArg(p.Payload),
				Now:          now,
				WorkflowName: p.WorkflowName,
				InstanceID:   p.InstanceID,
				Namespace:    p.Namespace,
			})
			if rowErr != nil && !isNoRows(rowErr) {
				return rowErr
			}
			return nil
		},
	}
	if s.logging() {
		sent := pgsqlc.LifecycleInsertSentParams{
			Type: p.Type, Now: now, WorkflowName: p.WorkflowName, InstanceID: p.InstanceID, Namespace: p.Namespace,
		}
		steps = append(steps, func(q *pgsqlc.Queries) error { return q.LifecycleInsertSent(ctx, sent) })
	}
	steps = append(steps, func(q *pgsqlc.Queries) error {
		var err error
		woken, err = q.EventSendWake(ctx, wake)
		return err
	})
	return steps, func(err error) (*db.EventSendResult, error) {
		return eventSendResult(p, err, &inst, instErr, &row, rowErr, woken)
	}, nil
}

// eventSendResult reads the answers of EventSend's statements.
func eventSendResult(p *db.EventSendParams, err error, inst *pgsqlc.EventSendLockRow, instErr error, row *pgsqlc.WorkflowEvent, rowErr error, woken []pgsqlc.EventSendWakeRow) (*db.EventSendResult, error) {
	switch {
	case err != nil:
		return nil, fmt.Errorf("sending event: %w", interpretError(err))
	case isNoRows(instErr):
		return nil, fmt.Errorf("sending event: %w", db.ErrNotFound)
	case dftype.InstanceStatus(inst.Status).Terminal() || isNoRows(rowErr):
		return nil, fmt.Errorf("sending event: %w", db.ErrTerminal)
	}
	res := &db.EventSendResult{Event: eventFromRow(row), Woken: len(woken) > 0}
	if len(woken) > 0 && woken[0].DeliveredStepKey != "" {
		// Delivered at the send's time, which is the event's time.
		res.DeliveredTo = woken[0].DeliveredStepKey
		res.Event.DeliveredAt, res.Event.ConsumedByStepKey = new(res.Event.CreatedAt), res.DeliveredTo
	}
	if p.Lease != nil && len(woken) > 0 && woken[0].Status == string(db.TaskStatusProcessing) {
		// Leased only when the task's queue is one of p.Lease.Queues.
		w := woken[0]
		res.LeasedTask = taskFromRow(&pgsqlc.WorkflowTask{
			ID: w.ID, WorkflowName: w.WorkflowName, InstanceID: w.InstanceID, RunNumber: w.RunNumber,
			Kind: w.Kind, Priority: w.Priority, RunAt: w.RunAt, Status: w.Status, LockOwner: w.LockOwner,
			LockedUntil: w.LockedUntil, Version: w.Version, Attempts: w.Attempts, LastError: w.LastError,
			LeaseLosses: w.LeaseLosses, Queue: w.Queue, InstancePriority: w.InstancePriority,
		})
	}
	return res, nil
}

// wakeStatuses are transition.WakeStatuses, bound by every send.
var wakeStatuses = transition.WakeStatuses()

// EventList returns a page of the events of an instance, oldest first, after
// the event p.AfterID; RunNumber 0 lists every run and Limit 0 every event.
func (s *Store) EventList(ctx context.Context, p *db.EventListParams) ([]*db.Event, error) {
	if p.PayloadBudget > 0 {
		rows, err := s.queries.EventListBounded(ctx, pgsqlc.EventListBoundedParams{
			PayloadBudget: int64(p.PayloadBudget),
			WorkflowName:  p.WorkflowName,
			InstanceID:    p.InstanceID,
			RunNumber:     int32(p.RunNumber),
			AfterID:       p.AfterID,
			Max:           boundedLimit(p.Limit),
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
		rows []pgsqlc.WorkflowEvent
		err  error
	)
	if p.RunNumber == 0 {
		rows, err = s.queries.EventList(ctx, pgsqlc.EventListParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			AfterID:      p.AfterID,
			Max:          limitArg(p.Limit),
		})
	} else {
		rows, err = s.queries.EventListRun(ctx, pgsqlc.EventListRunParams{
			WorkflowName: p.WorkflowName,
			InstanceID:   p.InstanceID,
			RunNumber:    int32(p.RunNumber),
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
