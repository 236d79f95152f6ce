package demo

import (
	"context"
	"errors"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// ApprovalEvent is the event type approval waits for.
const ApprovalEvent = "approval"

// ApprovalParams is the input of approval.
type ApprovalParams struct {
	// Amount is the amount to approve; it is echoed in the output.
	Amount float64 `json:"amount"`
	// Timeout is how long to wait for the approval event, from 1 second to
	// 365 days ("1 hour").
	//
	// Defaults to 24 hours.
	Timeout dftype.Duration `json:"timeout,omitempty"`
}

// ApprovalDecision is the payload of an ApprovalEvent.
type ApprovalDecision struct {
	// Approved says whether the amount was approved.
	Approved bool `json:"approved"`
}

// ApprovalOutput is the output of approval.
type ApprovalOutput struct {
	// Approved is the decision's Approved, or false when none came in time.
	Approved bool `json:"approved"`
	// TimedOut is true when no decision came before the timeout.
	TimedOut bool `json:"timedOut,omitempty"`
	// Amount is the amount from the params.
	Amount float64 `json:"amount"`
}

// Approval prepares a request in the step "prepare", then waits for an
// "approval" event ({"approved":true}) until the timeout:
// {"approved":true,"amount":120}, or {"approved":false,"timedOut":true,"amount":120}
// when no event came.
func Approval(_ context.Context, event workflow.Event[ApprovalParams], step workflow.Step) (ApprovalOutput, error) {
	amount, err := workflow.Do(step, "prepare", func(context.Context) (float64, error) {
		return event.Payload.Amount, nil
	})
	if err != nil {
		return ApprovalOutput{}, err
	}
	decision, err := workflow.WaitForEvent[ApprovalDecision](step, "wait for approval", workflow.WaitOptions{
		Type: ApprovalEvent, Timeout: event.Payload.Timeout.Std(),
	})
	switch {
	case errors.Is(err, workflow.ErrEventTimeout):
		return ApprovalOutput{Approved: false, TimedOut: true, Amount: amount}, nil
	case err != nil:
		return ApprovalOutput{}, err
	}
	return ApprovalOutput{Approved: decision.Approved, Amount: amount}, nil
}
