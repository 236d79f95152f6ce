package flows_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/devstub"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type testBundle struct {
	h      *testharness.Harness
	client *client.Client
}

// setup applies both example flows on a harness whose http steps reach the
// dev stub, as duraflow dev wires them.
func setup(t *testing.T, b testharness.Backend) *testBundle {
	t.Helper()
	stub, err := devstub.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, stub.Shutdown(context.Background())) })
	httpH, err := flow.NewHTTPHandler(devstub.HTTPHandlerConfig(stub.Addr(), nil))
	require.NoError(t, err)
	handlers, err := flow.NewHandlers(flow.WithHandler(httpH))
	require.NoError(t, err)

	h := testharness.New(t, testharness.WithBackend(b))
	flows, err := flow.New(&flow.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Handlers: handlers})
	require.NoError(t, err)
	for _, file := range []string{"order.json", "approval.json"} {
		def, err := os.ReadFile(file)
		require.NoError(t, err)
		res, err := flows.Apply(h.Context(), def)
		require.NoError(t, err, file)
		require.Empty(t, res.Warnings, file)
	}
	c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: flows.Metadata})
	require.NoError(t, err)
	return &testBundle{h: h, client: c}
}

func (b *testBundle) create(t *testing.T, name, id, params string) {
	t.Helper()
	_, err := b.client.Create(b.h.Context(), name, workflow.CreateRequest{ID: id, Params: json.RawMessage(params)})
	require.NoError(t, err)
}

func (b *testBundle) output(t *testing.T, name, id string) string {
	t.Helper()
	info := b.h.RequireStatus(name, id, workflow.StatusComplete)
	return string(info.Output)
}

func TestOrderFlow(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "order", "small", `{"orderId":"A-1","items":[{"sku":"book","qty":2,"priceCents":1250},{"sku":"pen","qty":10,"priceCents":120}]}`)
		b.create(t, "order", "big", `{"orderId":"A-2","items":[{"sku":"desk","qty":2,"priceCents":45000}]}`)
		b.create(t, "order", "short", `{"orderId":"A-3","items":[{"sku":"book","qty":1,"priceCents":1250},{"sku":"unobtainium","qty":1,"priceCents":99}]}`)
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"status":"accepted","orderId":"A-1","totalCents":3700,"reservation":"R-A-1"}`, b.output(t, "order", "small"))
		require.JSONEq(t, `{"status":"review","orderId":"A-2","totalCents":90000,"reservation":"R-A-2"}`, b.output(t, "order", "big"))
		require.JSONEq(t, `{"status":"rejected","orderId":"A-3","missing":["unobtainium"]}`, b.output(t, "order", "short"))

		var steps []string
		for _, s := range b.h.History("order", "small").Steps {
			steps = append(steps, s.Name+" "+s.Status)
		}
		require.Equal(t, []string{"total#1 complete", "reserve#1 complete", "route#1 complete", "accept#1 complete"}, steps)
	})
}

func TestApprovalFlow(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "expense-approval", "small", `{"expenseId":"E-1","amount":40,"submitter":" Ada "}`)
		b.create(t, "expense-approval", "yes", `{"expenseId":"E-2","amount":420,"submitter":"Grace"}`)
		b.create(t, "expense-approval", "no", `{"expenseId":"E-3","amount":1000,"submitter":"Linus"}`)
		b.create(t, "expense-approval", "late", `{"expenseId":"E-4","amount":250,"submitter":"Ken"}`)
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"status":"approved","by":"policy","expenseId":"E-1","amount":40}`, b.output(t, "expense-approval", "small"))
		for _, id := range []string{"yes", "no", "late"} {
			b.h.RequireStatus("expense-approval", id, workflow.StatusWaiting)
		}

		b.h.SendEvent("expense-approval", "yes", "approval", map[string]any{"approved": true, "by": "grace"})
		b.h.SendEvent("expense-approval", "no", "approval", map[string]any{"approved": false, "by": "ken"})
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"status":"approved","by":"grace","expenseId":"E-2","amount":420}`, b.output(t, "expense-approval", "yes"))
		require.JSONEq(t, `{"status":"rejected","by":"ken","expenseId":"E-3","amount":1000}`, b.output(t, "expense-approval", "no"))

		b.h.Advance(24*time.Hour + time.Second)
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"status":"expired","expenseId":"E-4","amount":250}`, b.output(t, "expense-approval", "late"))
	})
}

// TestOrderFlowWithMockedReservation replaces the flow's http step by its
// step name (the step id and its visit, "reserve#1"): the inventory service
// is not called, the mocked answer is routed as a real one would be.
func TestOrderFlowWithMockedReservation(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		reserve := b.h.OnStep("reserve#1").InWorkflow("order").Return(map[string]any{
			"status": 200, "body": map[string]any{"reserved": false, "missing": []string{"book"}},
		})
		b.create(t, "order", "small", `{"orderId":"A-1","items":[{"sku":"book","qty":2,"priceCents":1250}]}`)
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"status":"rejected","orderId":"A-1","missing":["book"]}`, b.output(t, "order", "small"))
		require.Equal(t, 1, reserve.Calls())
	})
}
