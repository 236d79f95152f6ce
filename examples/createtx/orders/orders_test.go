package orders_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/createtx/orders"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func ship(_ context.Context, o orders.Order) (string, error) { return "shipped " + o.ID, nil }

func newService(t *testing.T, h *testharness.Harness) (*orders.Service, *workflow.Binding[orders.Order, string]) {
	t.Helper()
	fulfil, err := orders.Register(h.Registry, ship)
	require.NoError(t, err)
	svc, err := orders.New(h.Context(), h.Store, fulfil)
	require.NoError(t, err)
	return svc, fulfil
}

func TestPlaceCommitsTheRowAndTheInstanceTogether(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc, _ := newService(t, h)
		_, err := svc.Place(h.Context(), orders.Order{ID: "o-1", Total: 4000}, nil)
		require.NoError(t, err)

		ok, err := svc.Exists(h.Context(), "o-1")
		require.NoError(t, err)
		require.True(t, ok, "the row is committed")
		h.RequireStatus(orders.Name, "o-1", dftype.StatusQueued)
		h.RunUntilIdle()
		var out string
		h.RequireOutput(orders.Name, "o-1", &out)
		require.Equal(t, "shipped o-1", out)
	})
}

func TestARefusedOrderLeavesNeitherRowNorInstance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc, fulfil := newService(t, h)
		errNoCredit := errors.New("no credit")
		_, err := svc.Place(h.Context(), orders.Order{ID: "o-2", Total: 99_00}, func(orders.Order) error { return errNoCredit })
		require.ErrorIs(t, err, errNoCredit)

		ok, err := svc.Exists(h.Context(), "o-2")
		require.NoError(t, err)
		require.False(t, ok, "the row was rolled back")
		_, err = fulfil.Get(h.Context(), "o-2")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "the instance was rolled back with it")
		require.Zero(t, h.RunDue(), "no task was left behind")

		// The id is free again: the order can be placed once its check passes.
		_, err = svc.Place(h.Context(), orders.Order{ID: "o-2", Total: 99_00}, nil)
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus(orders.Name, "o-2", dftype.StatusComplete)
	})
}

func TestASecondOrderWithTheSameIDLeavesTheFirstAlone(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc, _ := newService(t, h)
		_, err := svc.Place(h.Context(), orders.Order{ID: "o-3", Total: 100}, nil)
		require.NoError(t, err)
		_, err = svc.Place(h.Context(), orders.Order{ID: "o-3", Total: 200}, nil)
		require.Error(t, err, "the row's primary key refuses it")
		h.RunUntilIdle()
		info := h.RequireStatus(orders.Name, "o-3", dftype.StatusComplete)
		require.JSONEq(t, `{"id":"o-3","total":100}`, string(info.Params))
	})
}
