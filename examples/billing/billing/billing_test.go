package billing_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/billing/billing"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// call is one call of a test dependency, at the fake clock's time.
type call struct {
	Key     string
	Attempt int
	At      time.Time
	Failed  bool
}

// fakes is the PaymentGateway and ReceiptSender of the tests: it records
// every call and fails as told.
type fakes struct {
	h  *testharness.Harness
	mu sync.Mutex
	// chargeFailures transient failures come before a charge succeeds.
	chargeFailures int
	// decline makes every charge fail with ErrCardDeclined.
	decline bool
	// deliveryFailures transient failures come before a delivery succeeds.
	deliveryFailures int

	charges, refunds, deliveries []call
}

func (f *fakes) Charge(ctx context.Context, req billing.ChargeRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{Key: req.IdempotencyKey, Attempt: workflow.Attempt(ctx), At: f.h.Now()}
	var err error
	switch {
	case f.decline:
		err = billing.ErrCardDeclined
	case f.chargeFailures > 0:
		f.chargeFailures--
		err = errors.New("gateway: 503 service unavailable")
	}
	c.Failed = err != nil
	f.charges = append(f.charges, c)
	if err != nil {
		return "", err
	}
	return "ch_" + req.IdempotencyKey, nil
}

func (f *fakes) Refund(ctx context.Context, chargeID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refunds = append(f.refunds, call{Key: chargeID, Attempt: workflow.Attempt(ctx), At: f.h.Now()})
	return nil
}

func (f *fakes) SendReceipt(ctx context.Context, customer string, r billing.Receipt) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{Key: r.Number, Attempt: workflow.Attempt(ctx), At: f.h.Now()}
	if f.deliveryFailures > 0 {
		f.deliveryFailures--
		c.Failed = true
		f.deliveries = append(f.deliveries, c)
		return "", errors.New("mail: mailbox unavailable")
	}
	f.deliveries = append(f.deliveries, c)
	return "dlv-" + customer + "-" + r.Number, nil
}

func (f *fakes) calls(which *[]call) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), *which...)
}

type testBundle struct {
	h     *testharness.Harness
	wfs   *billing.Workflows
	fakes *fakes
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	// The retry tests check each backoff exactly: the jitter draw is fixed
	// at its midpoint, where it moves no wait (its spread is tested in runner).
	h := testharness.New(t, testharness.WithJitter(0.5))
	f := &fakes{h: h}
	wfs, err := billing.Register(h.Registry, &billing.Config{Payments: f, Receipts: f})
	require.NoError(t, err)
	return &testBundle{h: h, wfs: wfs, fakes: f}
}

var invoiceParams = billing.Params{Customer: "cus_42", AmountCents: 129900, Description: "Annual plan"}

func (b *testBundle) create(t *testing.T, id string) {
	t.Helper()
	_, err := b.wfs.Billing.Create(b.h.Context(), workflow.CreateOptions[billing.Params]{ID: id, Params: invoiceParams})
	require.NoError(t, err)
}

// runDue runs due work until none is left, without moving the clock.
func (b *testBundle) runDue() {
	for b.h.RunDue() > 0 {
	}
}

func stepNamed(t *testing.T, hist *client.History, name string) *client.StepInfo {
	t.Helper()
	for _, s := range hist.Steps {
		if s.Name == name {
			return s
		}
	}
	require.FailNow(t, "no step named "+name)
	return nil
}

func TestBillingPaid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.h.Now()
	b.create(t, "inv-1")

	b.h.RunUntilIdle()
	b.h.RequireStatus(billing.BillingName, "inv-1", dftype.StatusWaiting)
	require.Equal(t, []call{{Key: "inv-1", Attempt: 1, At: start}}, b.fakes.calls(&b.fakes.charges))

	b.h.SendEvent(billing.BillingName, "inv-1", billing.ApprovalEvent, billing.Approval{Approved: true, By: "grace"})
	b.h.RunUntilIdle()

	var out billing.Output
	b.h.RequireOutput(billing.BillingName, "inv-1", &out)
	require.Equal(t, billing.Output{
		Status: billing.StatusPaid, ChargeID: "ch_inv-1", ApprovedBy: "grace", ReceiptID: "inv-1-receipt",
	}, out)
	require.Empty(t, b.fakes.calls(&b.fakes.refunds))

	var receipt billing.Receipt
	b.h.RequireOutput(billing.ReceiptName, "inv-1-receipt", &receipt)
	require.Equal(t, billing.Receipt{
		Number:     "R-inv-1",
		Text:       "Receipt R-inv-1\ncus_42\nAnnual plan: $1299.00 (charge ch_inv-1)",
		DeliveryID: "dlv-cus_42-R-inv-1",
	}, receipt)
}

func TestBillingChargeRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakes.chargeFailures = 2
	start := b.h.Now()
	b.create(t, "inv-2")

	b.h.RunUntilIdle()
	b.h.RequireStatus(billing.BillingName, "inv-2", dftype.StatusWaiting)

	// DefaultChargeRetries: retry n waits 10s·2^(n−1), so 10 s, then 20 s more.
	require.Equal(t, []call{
		{Key: "inv-2", Attempt: 1, At: start, Failed: true},
		{Key: "inv-2", Attempt: 2, At: start.Add(10 * time.Second), Failed: true},
		{Key: "inv-2", Attempt: 3, At: start.Add(30 * time.Second)},
	}, b.fakes.calls(&b.fakes.charges))

	charge := stepNamed(t, b.h.History(billing.BillingName, "inv-2"), "charge")
	require.Equal(t, "complete", charge.Status)
	require.Equal(t, 3, charge.Attempts)
	require.Equal(t, 5, charge.MaxAttempts)
	require.JSONEq(t, `"ch_inv-2"`, string(charge.Result))

	b.h.SendEvent(billing.BillingName, "inv-2", billing.ApprovalEvent, billing.Approval{Approved: true, By: "grace"})
	b.h.RunUntilIdle()
	var out billing.Output
	b.h.RequireOutput(billing.BillingName, "inv-2", &out)
	require.Equal(t, "ch_inv-2", out.ChargeID)
	require.Len(t, b.fakes.calls(&b.fakes.charges), 3, "a completed charge never runs again on replay")
}

func TestBillingCardDeclined(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakes.decline = true
	b.create(t, "inv-3")

	b.h.RunUntilIdle()
	info := b.h.RequireStatus(billing.BillingName, "inv-3", dftype.StatusErrored)
	require.Equal(t, "CardDeclined", info.Error.Name)
	require.Contains(t, info.Error.Message, "card declined")
	require.Len(t, b.fakes.calls(&b.fakes.charges), 1, "a non-retryable error is not retried")
}

func TestBillingApprovalTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.h.Now()
	b.create(t, "inv-4")

	b.h.RunUntilIdle()
	b.h.RequireStatus(billing.BillingName, "inv-4", dftype.StatusWaiting)
	require.Equal(t, start, b.h.Now(), "RunUntilIdle must not jump to the approval timeout")

	b.h.Advance(billing.DefaultApprovalTimeout - time.Second)
	b.h.RunUntilIdle()
	b.h.RequireStatus(billing.BillingName, "inv-4", dftype.StatusWaiting)

	b.h.Advance(time.Second)
	b.h.RunUntilIdle()
	var out billing.Output
	b.h.RequireOutput(billing.BillingName, "inv-4", &out)
	require.Equal(t, billing.Output{Status: billing.StatusExpired, ChargeID: "ch_inv-4"}, out)
	require.Equal(t, []call{{Key: "ch_inv-4", Attempt: 1, At: start.Add(billing.DefaultApprovalTimeout)}}, b.fakes.calls(&b.fakes.refunds))

	wait := stepNamed(t, b.h.History(billing.BillingName, "inv-4"), "wait for approval")
	require.Equal(t, "errored", wait.Status)
	require.Equal(t, workflow.ErrorNameEventTimeout, wait.Error.Name)

	_, err := b.wfs.Receipt.Get(b.h.Context(), billing.ReceiptID("inv-4"))
	require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "an expired charge gets no receipt")
}

func TestBillingRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.create(t, "inv-5")
	// Sent before the instance ran: buffered until the wait consumes it.
	b.h.SendEvent(billing.BillingName, "inv-5", billing.ApprovalEvent, billing.Approval{Approved: false, By: "finance"})
	b.h.RunUntilIdle()

	var out billing.Output
	b.h.RequireOutput(billing.BillingName, "inv-5", &out)
	require.Equal(t, billing.Output{Status: billing.StatusRejected, ChargeID: "ch_inv-5"}, out)
	require.Len(t, b.fakes.calls(&b.fakes.refunds), 1)
}

func TestBillingReceiptRunsIndependently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fakes.deliveryFailures = 2
	b.create(t, "inv-6")
	b.h.SendEvent(billing.BillingName, "inv-6", billing.ApprovalEvent, billing.Approval{Approved: true, By: "grace"})

	// Run what is due now, without moving the clock: the parent completes
	// while its child waits to retry its delivery.
	b.runDue()
	approvedAt := b.h.Now()
	var out billing.Output
	b.h.RequireOutput(billing.BillingName, "inv-6", &out)
	require.Equal(t, "inv-6-receipt", out.ReceiptID)
	b.h.RequireStatus(billing.ReceiptName, "inv-6-receipt", dftype.StatusWaiting)
	require.Equal(t, []call{{Key: "R-inv-6", Attempt: 1, At: approvedAt, Failed: true}}, b.fakes.calls(&b.fakes.deliveries))

	// The child goes on by itself; the parent is not touched again.
	parentBefore := b.h.Status(billing.BillingName, "inv-6")
	b.h.RunUntilIdle()
	var receipt billing.Receipt
	b.h.RequireOutput(billing.ReceiptName, "inv-6-receipt", &receipt)
	require.Equal(t, "dlv-cus_42-R-inv-6", receipt.DeliveryID)
	// Linear backoff of one minute: retry n waits n minutes.
	require.Equal(t, []call{
		{Key: "R-inv-6", Attempt: 1, At: approvedAt, Failed: true},
		{Key: "R-inv-6", Attempt: 2, At: approvedAt.Add(time.Minute), Failed: true},
		{Key: "R-inv-6", Attempt: 3, At: approvedAt.Add(3 * time.Minute)},
	}, b.fakes.calls(&b.fakes.deliveries))
	require.Equal(t, parentBefore.UpdatedAt, b.h.Status(billing.BillingName, "inv-6").UpdatedAt)
}

func TestBillingReceiptAlreadyExists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A receipt with the derived id exists already, as after a step that
	// created it and then failed to record its result.
	_, err := b.wfs.Receipt.Create(b.h.Context(), workflow.CreateOptions[billing.ReceiptParams]{
		ID:     billing.ReceiptID("inv-7"),
		Params: billing.ReceiptParams{InvoiceID: "inv-7", Customer: "cus_42", ChargeID: "ch_inv-7", AmountCents: 129900, Description: "Annual plan"},
	})
	require.NoError(t, err)
	b.create(t, "inv-7")
	b.h.SendEvent(billing.BillingName, "inv-7", billing.ApprovalEvent, billing.Approval{Approved: true, By: "grace"})
	b.h.RunUntilIdle()

	var out billing.Output
	b.h.RequireOutput(billing.BillingName, "inv-7", &out)
	require.Equal(t, "inv-7-receipt", out.ReceiptID)
	start := stepNamed(t, b.h.History(billing.BillingName, "inv-7"), "start receipt")
	require.Equal(t, 1, start.Attempts, "ErrInstanceAlreadyExists counts as success")
	b.h.RequireStatus(billing.ReceiptName, "inv-7-receipt", dftype.StatusComplete)
	require.Len(t, b.fakes.calls(&b.fakes.deliveries), 1, "one receipt, delivered once")
}

func TestBillingInvalidAmount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.wfs.Billing.Create(b.h.Context(), workflow.CreateOptions[billing.Params]{ID: "inv-8", Params: billing.Params{Customer: "cus_42"}})
	require.NoError(t, err)
	b.h.RunUntilIdle()
	info := b.h.RequireStatus(billing.BillingName, "inv-8", dftype.StatusErrored)
	require.Equal(t, "InvalidAmount", info.Error.Name)
	require.Empty(t, b.fakes.calls(&b.fakes.charges))
}

func TestReceiptID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "inv-1-receipt", billing.ReceiptID("inv-1"))
	long := billing.ReceiptID(strings.Repeat("a", workflow.MaxIDLength))
	require.NoError(t, workflow.ValidateInstanceID(long))
	require.Len(t, long, len("receipt-")+64)
	require.NotEqual(t, long, billing.ReceiptID(strings.Repeat("b", workflow.MaxIDLength)))
}
