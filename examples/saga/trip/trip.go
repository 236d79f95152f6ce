// Package trip is a saga: book a flight, a hotel and a car, and when one
// of them cannot be booked, cancel what was booked, in the reverse order.
// Each booking registers its cancellation with workflow.DoWithCompensation;
// the engine runs the cancellations as durable steps when the workflow
// fails or when a caller asks for it (Client.Compensate).
package trip

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/workflow"
)

// Name is the workflow's registered name.
const Name = "trip"

// Params say what to book.
type Params struct {
	Traveler string `json:"traveler"`
	City     string `json:"city"`
}

// Booking is what a service returns for a reservation.
type Booking struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// Itinerary is the workflow's output: the three bookings.
type Itinerary struct {
	Flight Booking `json:"flight"`
	Hotel  Booking `json:"hotel"`
	Car    Booking `json:"car"`
}

// Bookings is the outside world the workflow books with. Book and Cancel
// must be idempotent for one idempotency key (a step attempt cut short by
// a crash runs again).
type Bookings interface {
	// Book reserves kind ("flight", "hotel", "car") for p.
	Book(ctx context.Context, kind, idempotencyKey string, p Params) (Booking, error)
	// Cancel cancels a booking.
	Cancel(ctx context.Context, b Booking) error
}

// Register registers the trip workflow, booking through svc.
func Register(reg *workflow.Registry, svc Bookings) (*workflow.Binding[Params, Itinerary], error) {
	return workflow.Register(reg, Name, func(ctx context.Context, ev workflow.Event[Params], step workflow.Step) (Itinerary, error) {
		var it Itinerary
		for _, leg := range []struct {
			kind string
			dst  *Booking
		}{{"flight", &it.Flight}, {"hotel", &it.Hotel}, {"car", &it.Car}} {
			b, err := workflow.DoWithCompensation(step, "book "+leg.kind,
				func(ctx context.Context) (Booking, error) {
					return svc.Book(ctx, leg.kind, fmt.Sprintf("%s/%s", ev.InstanceID, leg.kind), ev.Payload)
				},
				func(ctx context.Context, b Booking) error { return svc.Cancel(ctx, b) },
				workflow.WithRetries(workflow.RetryPolicy{Limit: 2, NonRetryable: []string{"SoldOut"}}),
				workflow.CompensationOptions(workflow.WithRetries(workflow.RetryPolicy{Limit: 10})),
			)
			if err != nil {
				return Itinerary{}, err
			}
			*leg.dst = b
		}
		return it, nil
	})
}

// SoldOutError is the error of a booking that cannot be made: it fails the
// step at once (the step's policy names it non-retryable).
type SoldOutError struct{ Kind string }

func (e *SoldOutError) Error() string { return "no " + e.Kind + " left" }

// ErrorName names the error for retry policies and the instance's error.
func (e *SoldOutError) ErrorName() string { return "SoldOut" }
