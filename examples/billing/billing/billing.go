// Package billing is the billing example's workflows: "billing" charges a
// customer, waits for an approval with a timeout (refunding when none
// comes), and starts a "receipt" child workflow that runs on its own.
//
// It shows a step with a retry policy, a non-retryable failure, handling
// workflow.ErrEventTimeout, and starting a child workflow idempotently from
// inside a step through the child's binding.
package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/workflow"
)

// Workflow names.
const (
	// BillingName is the parent workflow's name.
	BillingName = "billing"
	// ReceiptName is the child workflow's name.
	ReceiptName = "receipt"
)

// ApprovalEvent is the event type the billing workflow waits for.
const ApprovalEvent = "approval"

// Defaults of Config.
const (
	// DefaultApprovalTimeout is how long a charge waits for approval.
	DefaultApprovalTimeout = 24 * time.Hour
)

// DefaultChargeRetries is the retry policy of the charge step when Config
// sets none: 4 retries, 10 seconds, exponential (10 s, 20 s, 40 s, 80 s).
func DefaultChargeRetries() workflow.RetryPolicy {
	return workflow.RetryPolicy{Limit: 4, Delay: 10 * time.Second, Backoff: workflow.BackoffExponential}
}

// ErrCardDeclined is what a PaymentGateway returns when the card is refused.
// Retrying does not help, so the charge step fails at once.
var ErrCardDeclined = errors.New("card declined")

// Params is the input of a billing instance.
type Params struct {
	// Customer is the customer id.
	Customer string `json:"customer"`
	// AmountCents is the amount to charge, in cents.
	AmountCents int64 `json:"amountCents"`
	// Description is printed on the receipt.
	Description string `json:"description"`
}

// Approval is the payload of an ApprovalEvent.
type Approval struct {
	// Approved is false when the charge was rejected.
	Approved bool `json:"approved"`
	// By names who decided.
	By string `json:"by"`
}

// Billing statuses reported in Output.Status.
const (
	StatusPaid     = "paid"
	StatusRejected = "rejected"
	StatusExpired  = "expired"
)

// Output is what a finished billing instance reports.
type Output struct {
	// Status is paid, rejected (refunded on rejection) or expired (refunded
	// because no approval came in time).
	Status string `json:"status"`
	// ChargeID is the gateway's id of the charge.
	ChargeID string `json:"chargeId"`
	// ApprovedBy names the approver of a paid charge.
	ApprovedBy string `json:"approvedBy,omitempty"`
	// ReceiptID is the id of the receipt instance of a paid charge.
	ReceiptID string `json:"receiptId,omitempty"`
}

// ChargeRequest asks a PaymentGateway to charge a customer.
type ChargeRequest struct {
	// IdempotencyKey is the same on every attempt of one charge, so a retry
	// after a lost answer does not charge twice.
	IdempotencyKey string
	Customer       string
	AmountCents    int64
}

// PaymentGateway moves money.
type PaymentGateway interface {
	// Charge charges the customer and returns the charge id.
	Charge(ctx context.Context, req ChargeRequest) (string, error)
	// Refund refunds a charge; refunding twice is a no-op.
	Refund(ctx context.Context, chargeID string) error
}

// SandboxGateway is a PaymentGateway that moves no money: charges succeed
// with the id "ch_" plus the idempotency key.
type SandboxGateway struct{}

// Charge returns "ch_" plus the idempotency key.
func (SandboxGateway) Charge(_ context.Context, req ChargeRequest) (string, error) {
	return "ch_" + req.IdempotencyKey, nil
}

// Refund does nothing.
func (SandboxGateway) Refund(context.Context, string) error { return nil }

// ReceiptParams is the input of a receipt instance.
type ReceiptParams struct {
	// InvoiceID is the id of the billing instance that started the receipt.
	InvoiceID   string `json:"invoiceId"`
	Customer    string `json:"customer"`
	ChargeID    string `json:"chargeId"`
	AmountCents int64  `json:"amountCents"`
	Description string `json:"description"`
}

// Receipt is the output of a receipt instance.
type Receipt struct {
	// Number is the receipt number.
	Number string `json:"number"`
	// Text is the rendered receipt.
	Text string `json:"text"`
	// DeliveryID is the id the sender returned.
	DeliveryID string `json:"deliveryId"`
}

// ReceiptSender delivers a rendered receipt to the customer and returns a
// delivery id.
type ReceiptSender interface {
	SendReceipt(ctx context.Context, customer string, r Receipt) (string, error)
}

// ReceiptSenderFunc adapts a function to ReceiptSender.
type ReceiptSenderFunc func(ctx context.Context, customer string, r Receipt) (string, error)

// SendReceipt calls f.
func (f ReceiptSenderFunc) SendReceipt(ctx context.Context, customer string, r Receipt) (string, error) {
	return f(ctx, customer, r)
}

// Config configures the workflows' dependencies and policies.
type Config struct {
	// Payments charges and refunds.
	//
	// Defaults to SandboxGateway.
	Payments PaymentGateway
	// Receipts delivers receipts.
	//
	// Defaults to a sender that delivers nothing and returns "dlv-" plus the
	// receipt number.
	Receipts ReceiptSender
	// ChargeRetries is the retry policy of the charge step.
	//
	// Defaults to DefaultChargeRetries().
	ChargeRetries *workflow.RetryPolicy
	// ApprovalTimeout is how long a charge waits for approval.
	//
	// Defaults to 24 hours.
	ApprovalTimeout time.Duration
}

// Workflows holds the typed bindings of the package's workflows.
type Workflows struct {
	// Billing creates and finds billing instances.
	Billing *workflow.Binding[Params, Output]
	// Receipt creates and finds receipt instances; billing instances start
	// their receipts through it.
	Receipt *workflow.Binding[ReceiptParams, Receipt]
}

// Register registers the billing and receipt workflows in reg. cfg may be nil.
func Register(reg *workflow.Registry, cfg *Config) (*Workflows, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Payments == nil {
		c.Payments = SandboxGateway{}
	}
	if c.Receipts == nil {
		c.Receipts = ReceiptSenderFunc(func(_ context.Context, _ string, r Receipt) (string, error) {
			return "dlv-" + r.Number, nil
		})
	}
	if c.ChargeRetries == nil {
		p := DefaultChargeRetries()
		c.ChargeRetries = &p
	}
	if c.ApprovalTimeout == 0 {
		c.ApprovalTimeout = DefaultApprovalTimeout
	}
	if err := c.ChargeRetries.Validate(); err != nil {
		return nil, fmt.Errorf("billing: ChargeRetries: %w", err)
	}

	receipt, err := workflow.Register(reg, ReceiptName, (&ReceiptWorkflow{sender: c.Receipts}).Run)
	if err != nil {
		return nil, fmt.Errorf("registering %s: %w", ReceiptName, err)
	}
	billing, err := workflow.Register(reg, BillingName, (&BillingWorkflow{
		payments: c.Payments, retries: *c.ChargeRetries, approvalTimeout: c.ApprovalTimeout, receipts: receipt,
	}).Run)
	if err != nil {
		return nil, fmt.Errorf("registering %s: %w", BillingName, err)
	}
	return &Workflows{Billing: billing, Receipt: receipt}, nil
}

// BillingWorkflow is the parent workflow. Create it through Register.
type BillingWorkflow struct {
	payments        PaymentGateway
	retries         workflow.RetryPolicy
	approvalTimeout time.Duration
	receipts        *workflow.Binding[ReceiptParams, Receipt]
}

// Run charges, waits for approval and starts the receipt. A rejected or
// expired charge is refunded and the instance completes with that status; a
// declined card or a charge that keeps failing errors the instance.
func (w *BillingWorkflow) Run(ctx context.Context, event workflow.Event[Params], step workflow.Step) (Output, error) {
	p := event.Payload
	if p.AmountCents <= 0 {
		return Output{}, workflow.NewNonRetryableError("InvalidAmount", fmt.Sprintf("amount %d must be positive", p.AmountCents))
	}

	chargeID, err := workflow.Do(step, "charge", func(ctx context.Context) (string, error) {
		id, err := w.payments.Charge(ctx, ChargeRequest{IdempotencyKey: event.InstanceID, Customer: p.Customer, AmountCents: p.AmountCents})
		if errors.Is(err, ErrCardDeclined) {
			return "", &workflow.NonRetryableError{Name: "CardDeclined", Err: err}
		}
		return id, err
	}, workflow.WithRetries(w.retries))
	if err != nil {
		return Output{}, fmt.Errorf("charging %s: %w", p.Customer, err)
	}
	out := Output{ChargeID: chargeID}

	approval, err := workflow.WaitForEvent[Approval](step, "wait for approval", workflow.WaitOptions{
		Type: ApprovalEvent, Timeout: w.approvalTimeout,
	})
	switch {
	case errors.Is(err, workflow.ErrEventTimeout):
		out.Status = StatusExpired
	case err != nil:
		return out, err
	case !approval.Approved:
		out.Status = StatusRejected
	}
	if out.Status != "" {
		_, err := workflow.Do(step, "refund", func(ctx context.Context) (bool, error) {
			if err := w.payments.Refund(ctx, chargeID); err != nil {
				return false, err
			}
			return true, nil
		}, workflow.WithRetries(w.retries))
		return out, err
	}
	out.Status, out.ApprovedBy = StatusPaid, approval.By

	// The child's id derives from the parent's, so a retried step finds the
	// receipt it created before instead of creating a second one.
	receiptID, err := workflow.Do(step, "start receipt", func(ctx context.Context) (string, error) {
		inst, err := w.receipts.Create(ctx, workflow.CreateOptions[ReceiptParams]{
			ID: ReceiptID(event.InstanceID),
			Params: ReceiptParams{
				InvoiceID: event.InstanceID, Customer: p.Customer, ChargeID: chargeID,
				AmountCents: p.AmountCents, Description: p.Description,
			},
		})
		if errors.Is(err, workflow.ErrInstanceAlreadyExists) {
			return ReceiptID(event.InstanceID), nil
		}
		if err != nil {
			return "", err
		}
		return inst.ID(), nil
	})
	if err != nil {
		return out, err
	}
	out.ReceiptID = receiptID
	return out, nil
}

// ReceiptID returns the id of the receipt instance of a billing instance:
// the billing id plus "-receipt", or a hash of it when that is too long.
func ReceiptID(billingID string) string {
	id := billingID + "-receipt"
	if len(id) <= workflow.MaxIDLength {
		return id
	}
	sum := sha256.Sum256([]byte(billingID))
	return "receipt-" + hex.EncodeToString(sum[:])
}

// ReceiptWorkflow is the child workflow. Create it through Register.
type ReceiptWorkflow struct {
	sender ReceiptSender
}

// Run renders the receipt and delivers it.
func (w *ReceiptWorkflow) Run(ctx context.Context, event workflow.Event[ReceiptParams], step workflow.Step) (Receipt, error) {
	p := event.Payload
	r, err := workflow.Do(step, "render", func(context.Context) (Receipt, error) {
		number := "R-" + p.InvoiceID
		return Receipt{
			Number: number,
			Text: fmt.Sprintf("Receipt %s\n%s\n%s: $%d.%02d (charge %s)",
				number, p.Customer, p.Description, p.AmountCents/100, p.AmountCents%100, p.ChargeID),
		}, nil
	})
	if err != nil {
		return Receipt{}, err
	}
	r.DeliveryID, err = workflow.Do(step, "deliver", func(ctx context.Context) (string, error) {
		return w.sender.SendReceipt(ctx, p.Customer, r)
	}, workflow.WithRetries(workflow.RetryPolicy{Limit: 5, Delay: time.Minute, Backoff: workflow.BackoffLinear}))
	if err != nil {
		return Receipt{}, err
	}
	return r, nil
}
