package postgres

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// ScheduleCreate inserts a schedule; db.ErrAlreadyExists when the id is taken.
func (s *Store) ScheduleCreate(ctx context.Context, p *db.ScheduleCreateParams) (*db.Schedule, error) {
	row, err := s.queries.ScheduleInsert(ctx, pgsqlc.ScheduleInsertParams{
		ScheduleID:   p.ID,
		WorkflowName: p.WorkflowName,
		CronExpr:     p.Cron,
		TimeZone:     p.TimeZone,
		Params:       jsonArg(p.Params),
		Enabled:      p.Enabled,
		MaxCatchup:   int32(p.MaxCatchup),
		NextFireAt:   p.NextFireAt,
		Now:          p.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("creating schedule: %w", interpretError(err))
	}
	return scheduleFromRow(&row), nil
}

// ScheduleGet returns one schedule or db.ErrNotFound.
func (s *Store) ScheduleGet(ctx context.Context, id string) (*db.Schedule, error) {
	row, err := s.queries.ScheduleGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("getting schedule: %w", interpretError(err))
	}
	return scheduleFromRow(&row), nil
}

// ScheduleList returns a page of schedules ordered by id, of one workflow or
// of all, continuing after p.AfterID.
func (s *Store) ScheduleList(ctx context.Context, p *db.ScheduleListParams) ([]*db.Schedule, error) {
	limit := int32(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := s.queries.ScheduleList(ctx, pgsqlc.ScheduleListParams{
		WorkflowName: textArg(p.WorkflowName),
		AfterID:      p.AfterID,
		Max:          limit,
	})
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", interpretError(err))
	}
	return schedulesFromRows(rows), nil
}

// ScheduleUpdate rewrites a schedule whose version is p.Version and moves its
// version on: db.ErrNotFound when it does not exist, db.ErrScheduleChanged
// when its version moved on.
func (s *Store) ScheduleUpdate(ctx context.Context, p *db.ScheduleUpdateParams) (*db.Schedule, error) {
	var sched *db.Schedule
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		row, err := q.ScheduleUpdate(ctx, pgsqlc.ScheduleUpdateParams{
			ScheduleID:   p.ID,
			Version:      p.Version,
			WorkflowName: p.WorkflowName,
			CronExpr:     p.Cron,
			TimeZone:     p.TimeZone,
			Params:       jsonArg(p.Params),
			Enabled:      p.Enabled,
			MaxCatchup:   int32(p.MaxCatchup),
			NextFireAt:   p.NextFireAt,
			Now:          p.Now,
		})
		if isNoRows(err) {
			if _, err := q.ScheduleGet(ctx, p.ID); err != nil {
				return err
			}
			return db.ErrScheduleChanged
		}
		if err != nil {
			return err
		}
		sched = scheduleFromRow(&row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("updating schedule: %w", interpretError(err))
	}
	return sched, nil
}

// ScheduleDelete deletes a schedule; db.ErrNotFound when it does not exist.
func (s *Store) ScheduleDelete(ctx context.Context, id string) error {
	n, err := s.queries.ScheduleDelete(ctx, id)
	if err != nil {
		return fmt.Errorf("deleting schedule: %w", interpretError(err))
	}
	if n == 0 {
		return fmt.Errorf("deleting schedule: %w", db.ErrNotFound)
	}
	return nil
}

// ScheduleListDue returns up to p.Limit enabled schedules due at p.Now, the
// longest due first. It locks nothing: ScheduleFire is fenced by version.
func (s *Store) ScheduleListDue(ctx context.Context, p *db.ScheduleListDueParams) ([]*db.Schedule, error) {
	if p.Limit <= 0 {
		return []*db.Schedule{}, nil
	}
	rows, err := s.queries.ScheduleListDue(ctx, pgsqlc.ScheduleListDueParams{Now: p.Now, Max: int32(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("listing due schedules: %w", interpretError(err))
	}
	return schedulesFromRows(rows), nil
}

// ScheduleFire commits one firing in one transaction. The fenced update of
// the schedule goes first: of several schedulers racing for one due time,
// the others block on the row until the first commits, then find the
// version moved on and change nothing (db.ErrScheduleChanged). The instances
// are inserted as InstanceCreateMany inserts them, with their tasks, hook
// entries and a wake notification; an id that exists rolls the whole
// firing back (db.ErrAlreadyExists).
func (s *Store) ScheduleFire(ctx context.Context, p *db.ScheduleFireParams) (*db.ScheduleFireResult, error) {
	res := &db.ScheduleFireResult{Created: []*db.Instance{}}
	err := s.inTx(ctx, func(q *pgsqlc.Queries) error {
		plan := transition.Fire(p)
		row, err := q.ScheduleAdvance(ctx, pgsqlc.ScheduleAdvanceParams{
			ScheduleID:     p.ID,
			Version:        p.Version,
			NextFireAt:     p.NextFireAt,
			LastFiredAt:    p.LastFiredAt,
			LastInstanceID: plan.LastInstanceID,
			Now:            p.Now,
		})
		if isNoRows(err) {
			return db.ErrScheduleChanged
		}
		if err != nil {
			return err
		}
		res.Schedule = scheduleFromRow(&row)
		if len(p.Instances) == 0 {
			return nil
		}
		now := p.Now
		created, err := s.createMany(ctx, q, &db.InstanceCreateManyParams{
			WorkflowName: p.WorkflowName, Instances: p.Instances, Now: &now, RecordHooks: p.RecordHooks,
		}, p.Queue)
		if err == nil && len(created) != len(p.Instances) {
			// An id is taken: the whole firing rolls back.
			return db.ErrAlreadyExists
		}
		for _, c := range created {
			res.Created = append(res.Created, c.Instance)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("firing schedule: %w", interpretError(err))
	}
	return res, nil
}

func scheduleFromRow(r *pgsqlc.WorkflowSchedule) *db.Schedule {
	return &db.Schedule{
		ID:             r.ScheduleID,
		WorkflowName:   r.WorkflowName,
		Cron:           r.CronExpr,
		TimeZone:       r.TimeZone,
		Params:         rawJSON(r.Params),
		Enabled:        r.Enabled,
		MaxCatchup:     int(r.MaxCatchup),
		NextFireAt:     utcPtr(r.NextFireAt),
		LastFiredAt:    utcPtr(r.LastFiredAt),
		LastInstanceID: deref(r.LastInstanceID),
		CreatedAt:      r.CreatedAt.UTC(),
		UpdatedAt:      r.UpdatedAt.UTC(),
		Version:        r.Version,
	}
}

func schedulesFromRows(rows []pgsqlc.WorkflowSchedule) []*db.Schedule {
	out := make([]*db.Schedule, len(rows))
	for i := range rows {
		out[i] = scheduleFromRow(&rows[i])
	}
	return out
}
