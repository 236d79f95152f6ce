package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// recordHook records a transition's hook entry for the instance's task, as
// it stands in the caller's transaction, when it has one.
func recordHook(ctx context.Context, q *pgsqlc.Queries, h transition.HookWrite, workflowName, instanceID string, now *time.Time) error {
	if !h.Record() {
		return nil
	}
	return q.OutboxRecord(ctx, pgsqlc.OutboxRecordParams{
		Reason:       string(h.Reason),
		Now:          now,
		WorkflowName: workflowName,
		InstanceID:   instanceID,
	})
}

// OutboxClaim leases up to p.Max undelivered hook entries in one statement:
// those whose next attempt is due at p.Now and that are not leased, or whose
// lease expired. The entry due longest goes first (fresh entries are due when
// recorded, so they go in recording order). Each claimed entry's version and
// attempts go up by one; rows another claim holds locked are skipped, never
// waited on.
func (s *Store) OutboxClaim(ctx context.Context, p *db.OutboxClaimParams) ([]*db.OutboxEntry, error) {
	if p.Max <= 0 {
		return []*db.OutboxEntry{}, nil
	}
	rows, err := s.queries.OutboxClaim(ctx, pgsqlc.OutboxClaimParams{
		Now:         nowArg(p.Now),
		Max:         int32(min(p.Max, math.MaxInt32)),
		LockedUntil: p.LockedUntil,
	})
	if err != nil {
		return nil, fmt.Errorf("claiming hook entries: %w", interpretError(err))
	}
	entries := make([]*db.OutboxEntry, len(rows))
	for i := range rows {
		row := pgsqlc.WorkflowHookOutbox(rows[i])
		entries[i] = outboxEntryFromRow(&row)
	}
	return entries, nil
}

// OutboxDelivered marks a claimed entry delivered at p.Now and ends its
// lease; db.ErrLeaseLost when the version moved on or the entry is no longer
// held.
func (s *Store) OutboxDelivered(ctx context.Context, p *db.OutboxDeliveredParams) error {
	n, err := s.queries.OutboxDelivered(ctx, pgsqlc.OutboxDeliveredParams{
		Now:     nowArg(p.Now),
		ID:      p.ID,
		Version: p.Version,
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
	n, err := s.queries.OutboxRetry(ctx, pgsqlc.OutboxRetryParams{
		NextAttemptAt: p.NextAttemptAt,
		LastError:     textArg(p.LastError),
		ID:            p.ID,
		Version:       p.Version,
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
	n, err := s.queries.OutboxPrune(ctx, pgsqlc.OutboxPruneParams{
		DeliveredBefore: p.DeliveredBefore,
		Max:             int32(min(p.Max, math.MaxInt32)),
	})
	if err != nil {
		return 0, fmt.Errorf("pruning hook entries: %w", interpretError(err))
	}
	return int(n), nil
}
