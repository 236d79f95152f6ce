package sqlite

import (
	"context"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/db/transition"
)

// ScheduleCreate inserts a schedule; db.ErrAlreadyExists when the id is taken.
func (s *Store) ScheduleCreate(ctx context.Context, p *db.ScheduleCreateParams) (*db.Schedule, error) {
	var sched *db.Schedule
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		row, err := q.ScheduleInsert(ctx, litesqlc.ScheduleInsertParams{
			ScheduleID:   p.ID,
			WorkflowName: p.WorkflowName,
			CronExpr:     p.Cron,
			TimeZone:     p.TimeZone,
			Params:       jsonArg(p.Params),
			Enabled:      boolArg(p.Enabled),
			MaxCatchup:   int64(p.MaxCatchup),
			NextFireAt:   microsPtr(p.NextFireAt),
			Now:          now,
		})
		if err != nil {
			return err
		}
		sched = scheduleFromRow(&row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("creating schedule: %w", interpretError(err))
	}
	return sched, nil
}

// ScheduleGet returns one schedule or db.ErrNotFound.
func (s *Store) ScheduleGet(ctx context.Context, id string) (*db.Schedule, error) {
	row, err := s.queriesFor(ctx, false).ScheduleGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("getting schedule: %w", interpretError(err))
	}
	return scheduleFromRow(&row), nil
}

// ScheduleList returns a page of schedules ordered by id, of one workflow or
// of all, continuing after p.AfterID.
func (s *Store) ScheduleList(ctx context.Context, p *db.ScheduleListParams) ([]*db.Schedule, error) {
	limit := int64(p.Limit)
	if p.Limit <= 0 {
		limit = defaultListLimit
	}
	var (
		rows []litesqlc.WorkflowSchedule
		err  error
	)
	if p.WorkflowName == "" {
		rows, err = s.queriesFor(ctx, false).ScheduleList(ctx, litesqlc.ScheduleListParams{AfterID: p.AfterID, Max: limit})
	} else {
		rows, err = s.queriesFor(ctx, false).ScheduleListWorkflow(ctx, litesqlc.ScheduleListWorkflowParams{
			WorkflowName: p.WorkflowName, AfterID: p.AfterID, Max: limit,
		})
	}
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
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now, err := txNow(ctx, q, p.Now)
		if err != nil {
			return err
		}
		row, err := q.ScheduleUpdate(ctx, litesqlc.ScheduleUpdateParams{
			ScheduleID:   p.ID,
			Version:      p.Version,
			WorkflowName: p.WorkflowName,
			CronExpr:     p.Cron,
			TimeZone:     p.TimeZone,
			Params:       jsonArg(p.Params),
			Enabled:      boolArg(p.Enabled),
			MaxCatchup:   int64(p.MaxCatchup),
			NextFireAt:   microsPtr(p.NextFireAt),
			Now:          now,
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
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		n, err := q.ScheduleDelete(ctx, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return db.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting schedule: %w", interpretError(err))
	}
	return nil
}

// ScheduleListDue returns up to p.Limit enabled schedules due at p.Now, the
// longest due first.
func (s *Store) ScheduleListDue(ctx context.Context, p *db.ScheduleListDueParams) ([]*db.Schedule, error) {
	if p.Limit <= 0 {
		return []*db.Schedule{}, nil
	}
	rows, err := s.queriesFor(ctx, false).ScheduleListDue(ctx, litesqlc.ScheduleListDueParams{Now: micros(p.Now), Max: int64(p.Limit)})
	if err != nil {
		return nil, fmt.Errorf("listing due schedules: %w", interpretError(err))
	}
	return schedulesFromRows(rows), nil
}

// ScheduleFire commits one firing in one write transaction, which holds the
// database's single write lock: of several schedulers racing for one due
// time, the first advances the schedule and the others find its version
// moved on and change nothing (db.ErrScheduleChanged). The instances are
// inserted as InstanceCreateMany inserts them, with their tasks and hook
// entries; an id that exists rolls the whole firing back
// (db.ErrAlreadyExists).
func (s *Store) ScheduleFire(ctx context.Context, p *db.ScheduleFireParams) (*db.ScheduleFireResult, error) {
	res := &db.ScheduleFireResult{Created: []*db.Instance{}}
	err := s.inTx(ctx, func(q *litesqlc.Queries) error {
		now := micros(p.Now)
		plan := transition.Fire(p)
		row, err := q.ScheduleAdvance(ctx, litesqlc.ScheduleAdvanceParams{
			ScheduleID:     p.ID,
			Version:        p.Version,
			NextFireAt:     micros(p.NextFireAt),
			LastFiredAt:    microsPtr(p.LastFiredAt),
			LastInstanceID: plan.LastInstanceID,
			Now:            now,
		})
		if isNoRows(err) {
			return db.ErrScheduleChanged
		}
		if err != nil {
			return err
		}
		res.Schedule = scheduleFromRow(&row)
		created, err := s.createMany(ctx, q, &db.InstanceCreateManyParams{
			WorkflowName: p.WorkflowName, Instances: p.Instances, RecordHooks: p.RecordHooks,
		}, p.Queue, now)
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

func scheduleFromRow(r *litesqlc.WorkflowSchedule) *db.Schedule {
	return &db.Schedule{
		ID:             r.ScheduleID,
		WorkflowName:   r.WorkflowName,
		Cron:           r.CronExpr,
		TimeZone:       r.TimeZone,
		Params:         rawJSON(r.Params),
		Enabled:        r.Enabled != 0,
		MaxCatchup:     int(r.MaxCatchup),
		NextFireAt:     timePtrFromMicros(r.NextFireAt),
		LastFiredAt:    timePtrFromMicros(r.LastFiredAt),
		LastInstanceID: deref(r.LastInstanceID),
		CreatedAt:      timeFromMicros(r.CreatedAt),
		UpdatedAt:      timeFromMicros(r.UpdatedAt),
		Version:        r.Version,
	}
}

func schedulesFromRows(rows []litesqlc.WorkflowSchedule) []*db.Schedule {
	out := make([]*db.Schedule, len(rows))
	for i := range rows {
		out[i] = scheduleFromRow(&rows[i])
	}
	return out
}
