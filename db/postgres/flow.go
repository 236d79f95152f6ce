package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
)

// FlowPut stores a version of a flow in one transaction. The version row is
// inserted first (ON CONFLICT DO NOTHING, so a concurrent put of the same
// version waits for the other to commit and then finds it); then the flow's
// latest row is locked (or created) and moved on when the new version
// supersedes it. Puts of different versions of one flow thus compare their
// versions one at a time, and two transactions never lock the same rows in
// opposite orders.
func (s *Store) FlowPut(ctx context.Context, p *db.FlowPutParams) (*db.FlowPutResult, error) {
	var res *db.FlowPutResult
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.FlowInsert(ctx, pgsqlc.FlowInsertParams{
			FlowID: p.ID, Version: p.Version, Name: p.Name, Definition: p.Definition, Now: p.Now,
		})
		if isNoRows(err) {
			existing, err := q.FlowGet(ctx, pgsqlc.FlowGetParams{FlowID: p.ID, Version: p.Version})
			if err != nil {
				return err
			}
			if !bytes.Equal(existing.Definition, p.Definition) {
				return db.ErrFlowVersionConflict
			}
			latest, err := q.FlowLatestLock(ctx, pgsqlc.FlowLatestLockParams{FlowID: p.ID, Version: p.Version, Now: p.Now})
			if err != nil {
				return err
			}
			res = &db.FlowPutResult{Flow: flowFromRow(&existing), Latest: latest}
			return nil
		}
		if err != nil {
			return err
		}
		latest, err := q.FlowLatestLock(ctx, pgsqlc.FlowLatestLockParams{FlowID: p.ID, Version: p.Version, Now: p.Now})
		if err != nil {
			return err
		}
		if latest != p.Version && db.FlowVersionSupersedes(p.Version, latest) {
			if err := q.FlowLatestSet(ctx, pgsqlc.FlowLatestSetParams{FlowID: p.ID, Version: p.Version, Now: p.Now}); err != nil {
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
		row pgsqlc.WorkflowFlow
		err error
	)
	if ref.Version == "" {
		row, err = s.queries.FlowGetLatest(ctx, ref.ID)
	} else {
		row, err = s.queries.FlowGet(ctx, pgsqlc.FlowGetParams{FlowID: ref.ID, Version: ref.Version})
	}
	if err != nil {
		return nil, fmt.Errorf("getting flow: %w", interpretError(err))
	}
	return flowFromRow(&row), nil
}

// FlowList returns a page of flows ordered by id, each at its latest
// version, without definitions.
func (s *Store) FlowList(ctx context.Context, p *db.FlowListParams) ([]*db.Flow, error) {
	limit := int32(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.queries.FlowList(ctx, pgsqlc.FlowListParams{AfterID: p.AfterID, Max: limit})
	if err != nil {
		return nil, fmt.Errorf("listing flows: %w", interpretError(err))
	}
	out := make([]*db.Flow, len(rows))
	for i, r := range rows {
		out[i] = &db.Flow{ID: r.FlowID, Version: r.Version, Name: r.Name, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}

// FlowVersions returns every version of a flow, lowest first, without
// definitions.
func (s *Store) FlowVersions(ctx context.Context, id string) ([]*db.Flow, error) {
	rows, err := s.queries.FlowVersions(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("listing flow versions: %w", interpretError(err))
	}
	out := make([]*db.Flow, len(rows))
	for i, r := range rows {
		out[i] = &db.Flow{ID: r.FlowID, Version: r.Version, Name: r.Name, CreatedAt: r.CreatedAt.UTC()}
	}
	slices.SortFunc(out, func(a, b *db.Flow) int { return db.CompareFlowVersions(a.Version, b.Version) })
	return out, nil
}

func flowFromRow(r *pgsqlc.WorkflowFlow) *db.Flow {
	return &db.Flow{
		ID:         r.FlowID,
		Version:    r.Version,
		Name:       r.Name,
		Definition: rawJSON(r.Definition),
		CreatedAt:  r.CreatedAt.UTC(),
	}
}
