// Package flows holds four example JSON flows, which dev applies with
//
//	go run ./cmd/duraflow dev --flows examples/flows
//
// The flows are:
//
//   - order.json (flow "order"): a transform totals the order, an http step
//     reserves its items at the inventory service — in dev, the stub at
//     http://stub.localhost (package internal/devstub) — and a branch
//     routes it: rejected when items are short, held for review above
//     500.00, accepted otherwise.
//   - approval.json (flow "expense-approval"): expenses up to 100 are
//     approved at once; larger ones wait up to a day for an event of type
//     approval, and expire without one.
//   - saga.json (flow "order-saga"): a subflow step places the order by
//     invoking the order flow, then an http step charges the card at the
//     stub's payment service (the card "declined" is refused). The subflow
//     step's compensate names the subflow step "release": when the charge
//     fails, the flow fails and its compensation invokes the
//     inventory-release flow to release the order's reservation.
//   - release.json (flow "inventory-release"): releases a reservation at
//     the stub's inventory service; order-saga's compensation.
//
// The package's test runs them all on every backend with a fake clock.
//
// testdata/broken.json is a flow with three mistakes (an initial step that
// does not exist, a misspelt field and step type), which dev's --flows does
// not pick up: the transcript in docs/cli.md applies it to show flows apply
// listing every problem at once.
package flows
