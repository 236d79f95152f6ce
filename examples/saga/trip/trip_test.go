package trip_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/examples/saga/trip"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// fakeBookings books everything but what is sold out, and logs each call.
type fakeBookings struct {
	soldOut string
	mu      sync.Mutex
	log     []string
}

func (f *fakeBookings) Book(_ context.Context, kind, key string, _ trip.Params) (trip.Booking, error) {
	if kind == f.soldOut {
		return trip.Booking{}, &trip.SoldOutError{Kind: kind}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "book "+kind)
	return trip.Booking{Kind: kind, ID: fmt.Sprintf("%s-%d", kind, len(f.log))}, nil
}

func (f *fakeBookings) Cancel(_ context.Context, b trip.Booking) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "cancel "+b.ID)
	return nil
}

func (f *fakeBookings) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func TestTripBooksEverything(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc := &fakeBookings{}
		binding, err := trip.Register(h.Registry, svc)
		require.NoError(t, err)
		_, err = binding.Create(h.Context(), workflow.CreateOptions[trip.Params]{ID: "ok", Params: trip.Params{Traveler: "ada", City: "Lisbon"}})
		require.NoError(t, err)
		h.RunUntilIdle()
		var it trip.Itinerary
		h.RequireOutput(trip.Name, "ok", &it)
		require.Equal(t, "car-3", it.Car.ID)
		require.Equal(t, []string{"book flight", "book hotel", "book car"}, svc.calls())
	})
}

func TestTripCancelsWhatWasBookedWhenTheCarIsSoldOut(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc := &fakeBookings{soldOut: "car"}
		binding, err := trip.Register(h.Registry, svc)
		require.NoError(t, err)
		_, err = binding.Create(h.Context(), workflow.CreateOptions[trip.Params]{ID: "no-car"})
		require.NoError(t, err)
		h.RunUntilIdle()
		info := h.RequireStatus(trip.Name, "no-car", dftype.StatusErrored)
		require.Equal(t, "SoldOut", info.Error.Name, "the original error is kept")
		require.Equal(t, []string{"book flight", "book hotel", "cancel hotel-2", "cancel flight-1"}, svc.calls())
	})
}

func TestTripCannotBeCompensatedOnceComplete(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		svc := &fakeBookings{}
		binding, err := trip.Register(h.Registry, svc)
		require.NoError(t, err)
		inst, err := binding.Create(h.Context(), workflow.CreateOptions[trip.Params]{ID: "undo"})
		require.NoError(t, err)
		h.RunUntilIdle()
		// The trip completed: a completed instance cannot be compensated.
		require.ErrorIs(t, inst.Compensate(h.Context()), workflow.ErrInstanceTerminal)
	})
}
