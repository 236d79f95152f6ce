package flows_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/devstub"
	"github.com/duraflow/duraflow/testharness"
)

type testBundle struct {
	h      *testharness.Harness
	client *client.Client
}

// setup applies every example flow on a harness whose http steps reach the
// dev stub, as duraflow dev wires them (in name order, as dev applies
// them), and binds the registry to a client that pins flow versions, as
// dev's host does, so that subflow steps start their children through it.
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
	files, err := filepath.Glob("*.json")
	require.NoError(t, err)
	require.Equal(t, []string{"approval.json", "order.json", "release.json", "saga.json"}, files)
	for _, file := range files {
		def, err := os.ReadFile(file)
		require.NoError(t, err)
		res, err := flows.Apply(h.Context(), def)
		require.NoError(t, err, file)
		require.Empty(t, res.Warnings, file)
	}
	c, err := client.New(&client.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, MetadataFunc: flows.Metadata})
	require.NoError(t, err)
	h.Registry.Bind(c)
	return &testBundle{h: h, client: c}
}

func (b *testBundle) create(t *testing.T, name, id, params string) {
	t.Helper()
	_, err := b.client.Create(b.h.Context(), name, dftype.CreateRequest{ID: id, Params: json.RawMessage(params)})
	require.NoError(t, err)
}

func (b *testBundle) output(t *testing.T, name, id string) string {
	t.Helper()
	info := b.h.RequireStatus(name, id, dftype.StatusComplete)
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
			b.h.RequireStatus("expense-approval", id, dftype.StatusWaiting)
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

// childSteps maps the step that started each child of an instance to the
// child's workflow and id.
func (b *testBundle) childSteps(t *testing.T, name, id string) map[string]*dftype.InstanceInfo {
	t.Helper()
	children, err := b.client.Children(b.h.Context(), name, id)
	require.NoError(t, err)
	out := map[string]*dftype.InstanceInfo{}
	for _, c := range children {
		out[c.Parent.StepKey] = c
	}
	return out
}

// TestOrderSagaFlow runs order-saga: its subflow places the order through
// the order flow; a declined charge fails the flow, and the compensation of
// the placed order invokes the inventory-release flow.
func TestOrderSagaFlow(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		items := `"items":[{"sku":"book","qty":2,"priceCents":1250},{"sku":"pen","qty":10,"priceCents":120}]`
		b.create(t, "order-saga", "paid", `{"order":{"orderId":"S-1",`+items+`},"card":"4242"}`)
		b.create(t, "order-saga", "declined", `{"order":{"orderId":"S-2",`+items+`},"card":"declined"}`)
		b.create(t, "order-saga", "short", `{"order":{"orderId":"S-3","items":[{"sku":"unobtainium","qty":1,"priceCents":99}]},"card":"4242"}`)
		b.h.RunUntilIdle()

		require.JSONEq(t, `{"status":"confirmed","orderId":"S-1","totalCents":3700,"reservation":"R-S-1","payment":"P-S-1"}`, b.output(t, "order-saga", "paid"))
		require.JSONEq(t, `{"status":"rejected","orderId":"S-3"}`, b.output(t, "order-saga", "short"))
		for _, id := range []string{"paid", "short"} {
			steps := b.childSteps(t, "order-saga", id)
			require.Len(t, steps, 1, "nothing is undone when the flow succeeds")
			require.Equal(t, "order", steps["place#1"].WorkflowName)
		}

		info := b.h.RequireStatus("order-saga", "declined", dftype.StatusErrored)
		require.Equal(t, "HTTP_ERROR", info.Error.Name, "the original error is kept")
		require.Contains(t, info.Error.Message, "card declined")
		steps := b.childSteps(t, "order-saga", "declined")
		require.Len(t, steps, 2)
		require.Equal(t, "order", steps["place#1"].WorkflowName)
		release := steps["compensate:place#1"]
		require.NotNil(t, release, "the compensation of place invoked the release")
		require.Equal(t, "inventory-release", release.WorkflowName)
		require.JSONEq(t, `{"released":true,"reservation":"R-S-2"}`, b.output(t, "inventory-release", release.ID))
		var hist []string
		for _, s := range b.h.History("order-saga", "declined").Steps {
			hist = append(hist, s.Name+" "+s.Status)
		}
		require.Equal(t, []string{"place#1 complete", "check#1 complete", "bill#1 complete", "charge#1 errored", "compensate:place#1 complete"}, hist)
	})
}
