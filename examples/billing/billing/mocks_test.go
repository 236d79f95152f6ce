package billing_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/billing/billing"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// The tests of this file use mocks instead of fakes: the workflows are
// registered with their production dependencies (the sandbox gateway), and
// the harness replaces the "charge" step and the "receipt" child workflow
// by name. The rest stays real: the store, the retries, the wait for
// approval and the fake clock.

// TestMockedChargeAndReceipt mocks the charge step (two gateway outages,
// then a charge id) and the receipt child workflow.
func TestMockedChargeAndReceipt(t *testing.T) {
	t.Parallel()
	h := testharness.New(t, testharness.WithJitter(0.5))
	wfs, err := billing.Register(h.Registry, nil)
	require.NoError(t, err)

	charge := h.OnStep("charge").InWorkflow(billing.BillingName).Run(func(ctx context.Context) (any, error) {
		if workflow.Attempt(ctx) <= 2 {
			return nil, errors.New("gateway: 503 service unavailable")
		}
		return "ch_mocked", nil
	})
	var receiptFor billing.ReceiptParams
	receipt := h.OnWorkflow(billing.ReceiptName).Run(
		func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (any, error) {
			if err := json.Unmarshal(ev.Payload, &receiptFor); err != nil {
				return nil, err
			}
			return billing.Receipt{Number: "R-mock", DeliveryID: "dlv-mock"}, nil
		}).Once()
	h.OnStep("refund").Maybe() // only a rejected charge refunds

	start := h.Now()
	_, err = wfs.Billing.Create(h.Context(), workflow.CreateOptions[billing.Params]{ID: "inv-1", Params: invoiceParams})
	require.NoError(t, err)
	h.RunUntilIdle()
	// The retries were real: 10 s, then 20 s (DefaultChargeRetries).
	require.Equal(t, start.Add(30*time.Second), h.Now())
	h.RequireStatus(billing.BillingName, "inv-1", dftype.StatusWaiting)

	h.SendEvent(billing.BillingName, "inv-1", billing.ApprovalEvent, billing.Approval{Approved: true, By: "grace"})
	h.RunUntilIdle()

	var out billing.Output
	h.RequireOutput(billing.BillingName, "inv-1", &out)
	require.Equal(t, billing.Output{Status: billing.StatusPaid, ChargeID: "ch_mocked", ApprovedBy: "grace", ReceiptID: "inv-1-receipt"}, out)
	require.Equal(t, 3, charge.Calls())
	require.Equal(t, 1, receipt.Calls())
	require.Equal(t, "ch_mocked", receiptFor.ChargeID, "the child got the parent's params")
	var r billing.Receipt
	h.RequireOutput(billing.ReceiptName, "inv-1-receipt", &r)
	require.Equal(t, "R-mock", r.Number)
}

// TestMockedDeclinedCard mocks a charge that fails for good; the receipt
// is never started, which its Maybe allows.
func TestMockedDeclinedCard(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	wfs, err := billing.Register(h.Registry, nil)
	require.NoError(t, err)
	h.OnStep("charge").ReturnError(&workflow.NonRetryableError{Name: "CardDeclined", Err: billing.ErrCardDeclined}).Once()
	h.OnWorkflow(billing.ReceiptName).Maybe()

	_, err = wfs.Billing.Create(h.Context(), workflow.CreateOptions[billing.Params]{ID: "inv-1", Params: invoiceParams})
	require.NoError(t, err)
	h.RunUntilIdle()
	info := h.RequireStatus(billing.BillingName, "inv-1", dftype.StatusErrored)
	require.Equal(t, "CardDeclined", info.Error.Name)
}
