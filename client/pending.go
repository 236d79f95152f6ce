package client

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// fillPending sets info.Pending on a waiting or paused instance: the steps
// of its current run that wait (an event, a sleep, a child) or that wait
// for their next attempt, read from their step rows. Other instances have
// none, and nothing is read for them.
func (c *Client) fillPending(ctx context.Context, info *dftype.InstanceInfo) error {
	switch info.Status {
	case dftype.StatusWaiting, dftype.StatusPaused, dftype.StatusWaitingForPause:
	default:
		return nil
	}
	// Only the steps that wait or retry, whose error messages are held to
	// a page's byte budget (one past it shows no message); no result is
	// needed, and none of a completed step is read.
	steps, err := c.store.StepList(ctx, &db.StepListParams{
		WorkflowName: info.WorkflowName, InstanceID: info.ID, RunNumber: info.RunNumber,
		Statuses: []db.StepStatus{db.StepStatusWaiting, db.StepStatusRetrying}, PayloadBudget: DefaultPagePayloadBytes,
	})
	if err != nil {
		return fmt.Errorf("listing steps: %w", err)
	}
	for _, s := range steps {
		if p := pendingStep(info, s); p != nil {
			info.Pending = append(info.Pending, p)
		}
	}
	return nil
}

// pendingStep is what step s of info's current run waits on, or nil when
// it waits on nothing.
func pendingStep(info *dftype.InstanceInfo, s *db.Step) *dftype.PendingStep {
	switch {
	case s.Status == db.StepStatusRetrying:
		p := &dftype.PendingStep{
			Step: s.Key, Kind: dftype.PendingRetry, Until: s.NextRetryAt,
			Attempt: s.Attempts + 1, MaxAttempts: s.MaxAttempts,
		}
		if s.ErrorName != "" || s.ErrorMessage != "" {
			p.Error = &dftype.ErrorInfo{Name: s.ErrorName, Message: s.ErrorMessage}
		}
		return p
	case s.Status != db.StepStatusWaiting:
		return nil
	case s.Type == db.StepTypeSleep:
		return &dftype.PendingStep{Step: s.Key, Kind: dftype.PendingSleep, Until: s.WakeAt}
	case s.Type == db.StepTypeInvoke:
		p := &dftype.PendingStep{Step: s.Key, Kind: dftype.PendingChild, Until: s.WakeAt}
		for _, ch := range info.Children {
			if ch.RunNumber == info.RunNumber && ch.StepKey == s.Key {
				p.Child = ch
			}
		}
		return p
	default:
		return &dftype.PendingStep{Step: s.Key, Kind: dftype.PendingEvent, EventType: s.WaitEventType, Until: s.WakeAt}
	}
}
