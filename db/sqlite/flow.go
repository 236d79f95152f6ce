package sqlite

import (
	"context"
	"fmt"
	"slices"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

// FlowPut stores a version of a flow in one write transaction, which holds
// SQLite's write lock from its first statement: the existing version, the
// insert and the move of the flow's latest version cannot interleave with
// another put.
func (s *Store) FlowPut(ctx context.Context, p *db.FlowPutParams) (*db.FlowPutResult, error) {
	var res *db.FlowPutResult
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		existing, err := q.FlowGet(ctx, litesqlc.FlowGetParams{FlowID: p.ID, Version: p.Version})
		switch {
		case err == nil:
			if existing.Definition != string(p.Definition) {
				return db.ErrFlowVersionConflict
			}
			latest, err := q.FlowLatestGet(ctx, p.ID)
			if err != nil {
				return err
			}
			res = &db.FlowPutResult{Flow: flowFromRow(&existing), Latest: latest}
			return nil
		case !isNoRows(err):
			return err
		}
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		row, err := q.FlowInsert(ctx, litesqlc.FlowInsertParams{
			FlowID: p.ID, Version: p.Version, Name: p.Name, Definition: string(p.Definition), Now: now,
		})
		if err != nil {
			return err
		}
		latest, err := q.FlowLatestGet(ctx, p.ID)
		switch {
		case isNoRows(err):
			latest = ""
		case err != nil:
			return err
		}
		if latest == "" || db.FlowVersionSupersedes(p.Version, latest) {
			if err := q.FlowLatestUpsert(ctx, litesqlc.FlowLatestUpsertParams{FlowID: p.ID, Version: p.Version, Now: now}); err != nil {
				return err
			}
			latest = p.Version
		}
		res = &db.FlowPutResult{Flow: flowFromRow(&row), Created: true, Latest: latest}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("putting flow %s %s: %w", p.ID, p.Version, interpretError(err))
	}
	return res, nil
}

// FlowGet returns one version of a flow, or its latest when ref.Version is
// empty; db.ErrNotFound when there is none.
func (s *Store) FlowGet(ctx context.Context, ref db.FlowRef) (*db.Flow, error) {
	var (
		row litesqlc.WorkflowFlow
		err error
	)
	if ref.Version == "" {
		row, err = s.queriesFor(ctx, false).FlowGetLatest(ctx, ref.ID)
	} else {
		row, err = s.queriesFor(ctx, false).FlowGet(ctx, litesqlc.FlowGetParams{FlowID: ref.ID, Version: ref.Version})
	}
	if err != nil {
		return nil, fmt.Errorf("getting flow: %w", interpretError(err))
	}
	return flowFromRow(&row), nil
}

// FlowList returns a page of flows ordered by id, each at its latest
// version, without definitions.
func (s *Store) FlowList(ctx context.Context, p *db.FlowListParams) ([]*db.Flow, error) {
	limit := int64(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.queriesFor(ctx, false).FlowList(ctx, litesqlc.FlowListParams{AfterID: p.AfterID, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("listing flows: %w", interpretError(err))
	}
	out := make([]*db.Flow, len(rows))
	for i, r := range rows {
		out[i] = &db.Flow{ID: r.FlowID, Version: r.Version, Name: r.Name, CreatedAt: timeFromMicros(r.CreatedAt)}
	}
	return out, nil
}

// FlowVersions returns every version of a flow, lowest first, without
// definitions.
func (s *Store) FlowVersions(ctx context.Context, id string) ([]*db.Flow, error) {
	rows, err := s.queriesFor(ctx, false).FlowVersions(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("listing flow versions: %w", interpretError(err))
	}
	out := make([]*db.Flow, len(rows))
	for i, r := range rows {
		out[i] = &db.Flow{ID: r.FlowID, Version: r.Version, Name: r.Name, CreatedAt: timeFromMicros(r.CreatedAt)}
	}
	slices.SortFunc(out, func(a, b *db.Flow) int { return db.CompareFlowVersions(a.Version, b.Version) })
	return out, nil
}

func flowFromRow(r *litesqlc.WorkflowFlow) *db.Flow {
	return &db.Flow{
		ID:         r.FlowID,
		Version:    r.Version,
		Name:       r.Name,
		Definition: rawJSON(&r.Definition),
		CreatedAt:  timeFromMicros(r.CreatedAt),
	}
}
