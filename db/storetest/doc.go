// Package storetest is the conformance suite of db.Store: every backend runs
// it from its own tests and must pass it unchanged.
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) db.Store { return pgtest.NewStore(t) })
//	}
//
// The suite pins the semantics the runner, the client and the HTTP API rely
// on: fencing by task version, claim order and filters, checkpoint outcomes,
// event buffering and delivery, the instance life cycle, history pages, the
// count of lease losses (what adds to it and what resets it), the refusal of
// data the database cannot store (db.ErrInvalidData, with nothing written),
// and the hook outbox (what each change records, and leasing, fencing,
// retrying and pruning its entries). It drives time
// only through the Now parameters, with times far from the real clock, so a
// backend that reads its own clock where it should not fails.
//
// It imports db and testing helpers only; it must not know any backend.
package storetest
