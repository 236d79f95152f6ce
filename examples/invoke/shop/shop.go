// Package shop is a parent workflow that waits for child workflows: an
// order fans out one "reserve-item" child per line with
// workflow.InvokeAll, at most MaxInFlight of them running at once, then
// invokes a "charge" child for what could be reserved and waits for its
// receipt with workflow.Invoke. A line whose child failed reaches the
// order as a *workflow.ChildError, and the order goes on without it.
package shop

import (
	"context"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/workflow"
)

// Registered workflow names.
const (
	OrderName   = "shop-order"
	ReserveName = "reserve-item"
	ChargeName  = "charge"
)

// MaxInFlight bounds the reservation children an order runs at once.
const MaxInFlight = 2

// Line is one line of an order: the params of a "reserve-item" child.
type Line struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Price int    `json:"price"` // per unit, in cents
}

// Order is the params of the order workflow.
type Order struct {
	Customer string `json:"customer"`
	Lines    []Line `json:"lines"`
}

// Reservation is the output of a "reserve-item" child.
type Reservation struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
	ID  string `json:"id"`
}

// Payment is the params of a "charge" child.
type Payment struct {
	Customer string `json:"customer"`
	Amount   int    `json:"amount"` // in cents
}

// Unavailable is a line whose reservation child failed.
type Unavailable struct {
	SKU    string `json:"sku"`
	Child  string `json:"child"`  // the child's instance id
	Reason string `json:"reason"` // the child's error message
}

// Summary is the output of the order workflow.
type Summary struct {
	Reserved    []Reservation `json:"reserved"`
	Unavailable []Unavailable `json:"unavailable,omitempty"`
	Amount      int           `json:"amount"`
	Receipt     string        `json:"receipt"`
}

// ErrNothingReserved is the order's error when no line could be reserved.
var ErrNothingReserved = errors.New("no line of the order could be reserved")

// Services is the outside world the children call. Each call must be
// idempotent for one idempotency key (a step attempt cut short by a crash
// runs again).
type Services interface {
	// Reserve reserves qty units of sku and returns the reservation's id.
	Reserve(ctx context.Context, idempotencyKey, sku string, qty int) (string, error)
	// Charge charges the customer and returns the receipt's id.
	Charge(ctx context.Context, idempotencyKey string, p Payment) (string, error)
}

// OutOfStockError is the error of a reservation that cannot be made: it
// fails the "reserve-item" child at once (non-retryable).
type OutOfStockError struct{ SKU string }

func (e *OutOfStockError) Error() string { return "out of stock: " + e.SKU }

// ErrorName names the error for retry policies and the instance's error.
func (e *OutOfStockError) ErrorName() string { return "OutOfStock" }

// Bindings are the typed bindings of the three workflows.
type Bindings struct {
	Order   *workflow.Binding[Order, Summary]
	Reserve *workflow.Binding[Line, Reservation]
	Charge  *workflow.Binding[Payment, string]
}

// Register registers the order workflow and its two children, calling svc.
func Register(reg *workflow.Registry, svc Services) (*Bindings, error) {
	var b Bindings
	var err error
	b.Reserve, err = workflow.Register(reg, ReserveName, func(ctx context.Context, ev workflow.Event[Line], step workflow.Step) (Reservation, error) {
		id, err := workflow.Do(step, "reserve", func(ctx context.Context) (string, error) {
			return svc.Reserve(ctx, ev.InstanceID, ev.Payload.SKU, ev.Payload.Qty)
		}, workflow.WithRetries(workflow.RetryPolicy{Limit: 3, NonRetryable: []string{"OutOfStock"}}))
		if err != nil {
			return Reservation{}, err
		}
		return Reservation{SKU: ev.Payload.SKU, Qty: ev.Payload.Qty, ID: id}, nil
	})
	if err != nil {
		return nil, err
	}
	b.Charge, err = workflow.Register(reg, ChargeName, func(ctx context.Context, ev workflow.Event[Payment], step workflow.Step) (string, error) {
		return workflow.Do(step, "charge", func(ctx context.Context) (string, error) {
			return svc.Charge(ctx, ev.InstanceID, ev.Payload)
		}, workflow.WithRetries(workflow.RetryPolicy{Limit: 3}))
	})
	if err != nil {
		return nil, err
	}
	b.Order, err = workflow.Register(reg, OrderName, order)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// order is the parent: it reserves every line (children, MaxInFlight at
// once), then charges for what was reserved (one more child).
func order(ctx context.Context, ev workflow.Event[Order], step workflow.Step) (Summary, error) {
	calls := make([]workflow.InvokeCall, len(ev.Payload.Lines))
	for i, l := range ev.Payload.Lines {
		calls[i] = workflow.InvokeCall{
			Name:    fmt.Sprintf("reserve %d %s", i, l.SKU),
			Options: workflow.InvokeOptions{Workflow: ReserveName, Params: l},
		}
	}
	reservations, errs, err := workflow.InvokeAll[Reservation](step, calls, MaxInFlight)
	if err != nil {
		return Summary{}, err // suspended until a child ends, or a store error
	}
	var s Summary
	for i, l := range ev.Payload.Lines {
		var childErr *workflow.ChildError
		switch {
		case errs[i] == nil:
			s.Reserved = append(s.Reserved, reservations[i])
			s.Amount += l.Qty * l.Price
		case errors.As(errs[i], &childErr):
			s.Unavailable = append(s.Unavailable, Unavailable{SKU: l.SKU, Child: childErr.InstanceID, Reason: childErr.ChildErrorMessage})
		default:
			return Summary{}, errs[i] // the child could not be started or timed out
		}
	}
	if len(s.Reserved) == 0 {
		return Summary{}, workflow.NonRetryable(ErrNothingReserved)
	}
	s.Receipt, err = workflow.Invoke[string](step, "charge", workflow.InvokeOptions{
		Workflow: ChargeName, Params: Payment{Customer: ev.Payload.Customer, Amount: s.Amount},
	})
	if err != nil {
		return Summary{}, err // a *workflow.ChildError if the charge failed
	}
	return s, nil
}
