package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// recordHook records a transition's hook entry for the instance's task, as
// it stands in the caller's write transaction, when it has one.
func recordHook(ctx context.Context, q *litesqlc.Queries, h transition.HookWrite, workflowName, instanceID string, now int64) error {
	if !h.Record() {
		return nil
	}
	return q.OutboxRecord(ctx, litesqlc.OutboxRecordParams{
		Reason:       string(h.Reason),
		Now:          now,
		WorkflowName: workflowName,
		InstanceID:   instanceID,
	})
}

// OutboxClaim leases up to p.Max undelivered hook entries in one write
// transaction: those whose next attempt is due at p.Now and that are not
// leased, or whose lease expired. The entry due longest goes first (fresh
// entries are due when recorded, so they go in recording order). Each
// claimed entry's version and attempts go up by one. The transaction holds
// the database's single write lock, so concurrent claims never share an
// entry.
func (s *Store) OutboxClaim(ctx context.Context, p *db.OutboxClaimParams) ([]*db.OutboxEntry, error) {
	if p.Max <= 0 {
		return []*db.OutboxEntry{}, nil
	}
	var entries []*db.OutboxEntry
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, nowArg(p.Now))
		if err != nil {
			return err
		}
		rows, err := q.OutboxClaim(ctx, litesqlc.OutboxClaimParams{
			LockedUntil: micros(p.LockedUntil),
			Now:         now,
			Max:         int64(p.Max),
		})
		if err != nil {
			return err
		}
		entries = make([]*db.OutboxEntry, len(rows))
		for i := range rows {
			entries[i] = outboxEntryFromRow(&rows[i])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claiming hook entries: %w", interpretError(err))
	}
	// RETURNING has no order; the claim order is the contract's.
	slices.SortFunc(entries, func(a, b *db.OutboxEntry) int {
		return cmp.Or(a.NextAttemptAt.Compare(b.NextAttemptAt), cmp.Compare(a.ID, b.ID))
	})
	return entries, nil
}

// OutboxDelivered marks a claimed entry delivered at p.Now and ends its
// lease; db.ErrLeaseLost when the version moved on or the entry is no longer
// held.
func (s *Store) OutboxDelivered(ctx context.Context, p *db.OutboxDeliveredParams) error {
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, nowArg(p.Now))
		if err != nil {
			return err
		}
		n, err = q.OutboxDelivered(ctx, litesqlc.OutboxDeliveredParams{
			Now:     now,
			ID:      p.ID,
			Version: p.Version,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("marking hook entry delivered: %w", interpretError(err))
	}
	if n == 0 {
		return db.ErrLeaseLost
	}
	return nil
}

// OutboxRetry ends the lease of a claimed entry, which is claimed again from
// p.NextAttemptAt, and records p.LastError; db.ErrLeaseLost when the version
// moved on or the entry is no longer held.
func (s *Store) OutboxRetry(ctx context.Context, p *db.OutboxRetryParams) error {
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) (err error) {
		n, err = q.OutboxRetry(ctx, litesqlc.OutboxRetryParams{
			NextAttemptAt: micros(p.NextAttemptAt),
			LastError:     textArg(p.LastError),
			ID:            p.ID,
			Version:       p.Version,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("retrying hook entry: %w", interpretError(err))
	}
	if n == 0 {
		return db.ErrLeaseLost
	}
	return nil
}

// OutboxPrune deletes up to p.Max entries delivered before
// p.DeliveredBefore, oldest delivery first, and returns how many it deleted.
// Undelivered entries are never pruned; p.Max <= 0 deletes nothing.
func (s *Store) OutboxPrune(ctx context.Context, p *db.OutboxPruneParams) (int, error) {
	if p.Max <= 0 {
		return 0, nil
	}
	var n int64
	err := s.inTx(ctx, func(q *litesqlc.Queries) (err error) {
		n, err = q.OutboxPrune(ctx, litesqlc.OutboxPruneParams{
			DeliveredBefore: micros(p.DeliveredBefore),
			Max:             int64(p.Max),
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning hook entries: %w", interpretError(err))
	}
	return int(n), nil
}
