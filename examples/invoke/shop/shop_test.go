package shop_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/invoke/shop"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// fakeServices reserves everything but what is out of stock, and logs
// each call.
type fakeServices struct {
	outOfStock map[string]bool
	onReserve  func() // called at each reservation, before it is made

	mu  sync.Mutex
	log []string
}

func (f *fakeServices) Reserve(_ context.Context, key, sku string, qty int) (string, error) {
	if f.onReserve != nil {
		f.onReserve()
	}
	if f.outOfStock[sku] {
		return "", &shop.OutOfStockError{SKU: sku}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("reserve %s x%d", sku, qty))
	return "R-" + sku, nil
}

func (f *fakeServices) Charge(_ context.Context, key string, p shop.Payment) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("charge %s %d", p.Customer, p.Amount))
	return "RCPT-1", nil
}

func (f *fakeServices) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

var lines = []shop.Line{{SKU: "tea", Qty: 2, Price: 400}, {SKU: "mug", Qty: 1, Price: 1200}, {SKU: "pot", Qty: 1, Price: 3000}}

func TestOrderReservesEveryLineThenCharges(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc := &fakeServices{}
		bind, err := shop.Register(h.Registry, svc)
		require.NoError(t, err)
		_, err = bind.Order.Create(h.Context(), workflow.CreateOptions[shop.Order]{ID: "o1", Params: shop.Order{Customer: "ada", Lines: lines}})
		require.NoError(t, err)
		h.RunUntilIdle()

		var s shop.Summary
		h.RequireOutput(shop.OrderName, "o1", &s)
		require.Equal(t, []shop.Reservation{{SKU: "tea", Qty: 2, ID: "R-tea"}, {SKU: "mug", Qty: 1, ID: "R-mug"}, {SKU: "pot", Qty: 1, ID: "R-pot"}}, s.Reserved)
		require.Empty(t, s.Unavailable)
		require.Equal(t, 5000, s.Amount)
		require.Equal(t, "RCPT-1", s.Receipt)
		require.Equal(t, "charge ada 5000", svc.calls()[3], "the charge comes after every reservation")

		children, err := h.Client.Children(h.Context(), shop.OrderName, "o1")
		require.NoError(t, err)
		require.Len(t, children, 4, "three reservations and one charge, each started once")
		for _, c := range children {
			require.Equal(t, dftype.StatusComplete, c.Status)
			require.NotNil(t, c.Parent, "child %s knows its parent", c.ID)
			require.Equal(t, "o1", c.Parent.InstanceID)
		}
	})
}

func TestOrderGoesOnWithoutALineThatIsOutOfStock(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc := &fakeServices{outOfStock: map[string]bool{"mug": true}}
		bind, err := shop.Register(h.Registry, svc)
		require.NoError(t, err)
		_, err = bind.Order.Create(h.Context(), workflow.CreateOptions[shop.Order]{ID: "o2", Params: shop.Order{Customer: "bob", Lines: lines}})
		require.NoError(t, err)
		h.RunUntilIdle()

		var s shop.Summary
		h.RequireOutput(shop.OrderName, "o2", &s)
		require.Len(t, s.Reserved, 2)
		require.Len(t, s.Unavailable, 1)
		require.Equal(t, "mug", s.Unavailable[0].SKU)
		require.Contains(t, s.Unavailable[0].Reason, "out of stock: mug", "the child's error reached the parent as a ChildError")
		require.Equal(t, 3800, s.Amount, "the unavailable line is not charged")
		require.Equal(t, []string{"reserve tea x2", "reserve pot x1", "charge bob 3800"}, svc.calls())

		child := h.RequireStatus(shop.ReserveName, s.Unavailable[0].Child, dftype.StatusErrored)
		require.Equal(t, "OutOfStock", child.Error.Name)
	})
}

func TestOrderFailsWhenNothingCanBeReserved(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc := &fakeServices{outOfStock: map[string]bool{"tea": true, "mug": true, "pot": true}}
		bind, err := shop.Register(h.Registry, svc)
		require.NoError(t, err)
		_, err = bind.Order.Create(h.Context(), workflow.CreateOptions[shop.Order]{ID: "o3", Params: shop.Order{Customer: "cy", Lines: lines}})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus(shop.OrderName, "o3", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, shop.ErrNothingReserved.Error())
		require.Empty(t, svc.calls(), "no charge")
		children, err := h.Client.Children(h.Context(), shop.OrderName, "o3")
		require.NoError(t, err)
		require.Len(t, children, 3, "no charge child")
	})
}

func TestOrderRunsAtMostMaxInFlightReservationsAtOnce(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var many []shop.Line
		for i := range 7 {
			many = append(many, shop.Line{SKU: fmt.Sprintf("sku%d", i), Qty: 1, Price: 100})
		}
		var mu sync.Mutex
		maxRunning, reservations := 0, 0
		svc := &fakeServices{onReserve: func() {
			// Count the reservation children that have not ended, this
			// one included.
			children, err := h.Client.Children(h.Context(), shop.OrderName, "o4")
			require.NoError(t, err)
			running := 0
			for _, c := range children {
				if c.WorkflowName == shop.ReserveName && !c.Status.Terminal() {
					running++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			reservations++
			maxRunning = max(maxRunning, running)
		}}
		bind, err := shop.Register(h.Registry, svc)
		require.NoError(t, err)
		_, err = bind.Order.Create(h.Context(), workflow.CreateOptions[shop.Order]{ID: "o4", Params: shop.Order{Customer: "di", Lines: many}})
		require.NoError(t, err)
		h.RunUntilIdle()

		var s shop.Summary
		h.RequireOutput(shop.OrderName, "o4", &s)
		require.Len(t, s.Reserved, 7)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 7, reservations)
		require.Equal(t, shop.MaxInFlight, maxRunning, "the order keeps MaxInFlight reservations running, never more")
	})
}
