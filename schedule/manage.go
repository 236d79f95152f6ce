package schedule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Limits of schedule management.
const (
	// MaxCatchupLimit bounds MaxCatchup.
	MaxCatchupLimit = 1000
	// DefaultPageSize is the page length of List when none is given;
	// MaxPageSize bounds it.
	DefaultPageSize = paging.DefaultPageSize
	// MaxPageSize is the longest page of List.
	MaxPageSize = paging.MaxPageSize
	// DefaultTimeZone is the zone of a schedule created without one.
	DefaultTimeZone = "UTC"
)

// Info is a schedule as the scheduler reports it.
type Info struct {
	ID           string `json:"id"`
	WorkflowName string `json:"workflowName"`
	// Cron is the cron expression.
	Cron string `json:"cron"`
	// TimeZone is the IANA zone the expression is evaluated in.
	TimeZone string `json:"timeZone"`
	// Params are the params of every instance the schedule starts.
	Params  json.RawMessage `json:"params,omitempty"`
	Enabled bool            `json:"enabled"`
	// MaxCatchup is the most due times one firing starts after an outage.
	MaxCatchup int `json:"maxCatchup"`
	// NextFireAt is when the schedule fires next; absent while disabled.
	NextFireAt *time.Time `json:"nextFireAt,omitempty"`
	// LastFiredAt is the last due time that fired, and LastInstanceID the
	// instance it started.
	LastFiredAt    *time.Time `json:"lastFiredAt,omitempty"`
	LastInstanceID string     `json:"lastInstanceId,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
}

// info converts a stored schedule into the scheduler's report.
func info(s *db.Schedule) *Info {
	return &Info{
		ID: s.ID, WorkflowName: s.WorkflowName, Cron: s.Cron, TimeZone: s.TimeZone, Params: s.Params,
		Enabled: s.Enabled, MaxCatchup: s.MaxCatchup, NextFireAt: s.NextFireAt, LastFiredAt: s.LastFiredAt,
		LastInstanceID: s.LastInstanceID, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
}

// CreateRequest is a schedule to create; it is also the body of
// POST /schedules.
type CreateRequest struct {
	// ID identifies the schedule, with the rules of instance ids. Required.
	ID string `json:"id"`
	// WorkflowName is the workflow the schedule starts. Required.
	WorkflowName string `json:"workflowName"`
	// Cron is a five-field cron expression or a descriptor such as @daily.
	// Required.
	Cron string `json:"cron"`
	// TimeZone is an IANA zone name.
	//
	// Defaults to UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// Params are the params of every instance (JSON, at most the engine's
	// payload limit, 1 MiB by default).
	//
	// Defaults to null.
	Params json.RawMessage `json:"params,omitempty"`
	// Enabled says whether the schedule fires.
	//
	// Defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
	// MaxCatchup is the most due times one firing starts when several are
	// due at once, 1 to MaxCatchupLimit: the most recent ones.
	//
	// Defaults to 1.
	MaxCatchup int `json:"maxCatchup,omitempty"`
}

// UpdateRequest changes a schedule; absent (nil) fields are left as they
// are. It is also the body of PATCH /schedules/:id.
type UpdateRequest struct {
	WorkflowName *string `json:"workflowName,omitempty"`
	Cron         *string `json:"cron,omitempty"`
	TimeZone     *string `json:"timeZone,omitempty"`
	// Params replace the params when present (null included).
	Params     json.RawMessage `json:"params,omitempty"`
	Enabled    *bool           `json:"enabled,omitempty"`
	MaxCatchup *int            `json:"maxCatchup,omitempty"`
}

// ListParams select a page of schedules.
type ListParams struct {
	// WorkflowName filters by workflow; empty lists every workflow's.
	WorkflowName string
	// PageSize is the page length, 1 to MaxPageSize.
	//
	// Defaults to DefaultPageSize.
	PageSize int
	// Cursor continues a previous page (ListResult.NextCursor).
	Cursor string
}

// ListResult is one page of schedules, ordered by id.
type ListResult struct {
	Schedules []*Info `json:"schedules"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"cursor,omitempty"`
}

// MarshalJSON writes the page with "hasNextPage", true when NextCursor
// (JSON "cursor") is set: the paging shape of every list of the HTTP API.
func (r ListResult) MarshalJSON() ([]byte, error) {
	type plain ListResult
	return paging.MarshalPage(plain(r), r.NextCursor)
}

// Create validates and stores a new schedule, due first at the first fire
// time after now. It returns ErrAlreadyExists when the id is taken,
// workflow.ErrWorkflowNotFound for an unknown workflow, and an error
// wrapping workflow.ErrInvalidRequest (or workflow.ErrPayloadTooLarge) for
// invalid input.
func (s *Scheduler) Create(ctx context.Context, req CreateRequest) (*Info, error) {
	if err := ValidateID(req.ID); err != nil {
		return nil, err
	}
	req.TimeZone = cmp.Or(req.TimeZone, DefaultTimeZone)
	req.MaxCatchup = cmp.Or(req.MaxCatchup, 1)
	enabled := req.Enabled == nil || *req.Enabled
	if err := s.check(ctx, req.WorkflowName, req.Params, req.MaxCatchup); err != nil {
		return nil, err
	}
	spec, err := Parse(req.Cron, req.TimeZone)
	if err != nil {
		return nil, err
	}
	now := s.now()
	p := &db.ScheduleCreateParams{
		ID: req.ID, WorkflowName: req.WorkflowName, Cron: spec.String(), TimeZone: req.TimeZone,
		Params: req.Params, Enabled: enabled, MaxCatchup: req.MaxCatchup, Now: &now,
	}
	if enabled {
		p.NextFireAt = new(spec.Next(now))
	}
	created, err := s.cfg.Store.ScheduleCreate(ctx, p)
	if err != nil {
		return nil, mapError(err, req.ID)
	}
	return info(created), nil
}

// Get returns one schedule, with its next fire time; ErrNotFound when there
// is none with the id.
func (s *Scheduler) Get(ctx context.Context, id string) (*Info, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	got, err := s.cfg.Store.ScheduleGet(ctx, id)
	if err != nil {
		return nil, mapError(err, id)
	}
	return info(got), nil
}

// List returns a page of schedules ordered by id.
func (s *Scheduler) List(ctx context.Context, p ListParams) (*ListResult, error) {
	if p.WorkflowName != "" {
		if err := workflow.ValidateWorkflowName(p.WorkflowName); err != nil {
			return nil, err
		}
	}
	p.PageSize = cmp.Or(p.PageSize, DefaultPageSize)
	if p.PageSize < 1 || p.PageSize > MaxPageSize {
		return nil, fmt.Errorf("%w: pageSize must be between 1 and %d", workflow.ErrInvalidRequest, MaxPageSize)
	}
	if p.Cursor != "" {
		if err := ValidateID(p.Cursor); err != nil {
			return nil, fmt.Errorf("%w: malformed cursor", workflow.ErrInvalidRequest)
		}
	}
	rows, err := s.cfg.Store.ScheduleList(ctx, &db.ScheduleListParams{
		WorkflowName: p.WorkflowName, AfterID: p.Cursor, Limit: p.PageSize + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("listing schedules: %w", err)
	}
	res := &ListResult{Schedules: []*Info{}}
	if len(rows) > p.PageSize {
		rows = rows[:p.PageSize]
		res.NextCursor = rows[len(rows)-1].ID
	}
	for _, r := range rows {
		res.Schedules = append(res.Schedules, info(r))
	}
	return res, nil
}

// Update changes the fields req sets. A new cron expression or time zone
// moves the next fire time to the first one after now under the new rule;
// enabling a disabled schedule does the same (times that passed while it was
// disabled do not fire), and disabling clears it.
func (s *Scheduler) Update(ctx context.Context, id string, req UpdateRequest) (*Info, error) {
	return s.change(ctx, id, func(cur *db.Schedule, p *db.ScheduleUpdateParams) error {
		if req.WorkflowName != nil {
			p.WorkflowName = *req.WorkflowName
		}
		if req.Cron != nil {
			p.Cron = *req.Cron
		}
		if req.TimeZone != nil {
			p.TimeZone = cmp.Or(*req.TimeZone, DefaultTimeZone)
		}
		if req.Params != nil {
			p.Params = req.Params
		}
		if req.Enabled != nil {
			p.Enabled = *req.Enabled
		}
		if req.MaxCatchup != nil {
			p.MaxCatchup = *req.MaxCatchup
		}
		return s.check(ctx, p.WorkflowName, p.Params, p.MaxCatchup)
	})
}

// Enable makes a schedule fire again from the first fire time after now;
// an enabled schedule is left as it is.
func (s *Scheduler) Enable(ctx context.Context, id string) (*Info, error) {
	return s.change(ctx, id, func(_ *db.Schedule, p *db.ScheduleUpdateParams) error {
		p.Enabled = true
		return nil
	})
}

// Disable stops a schedule from firing until it is enabled again.
func (s *Scheduler) Disable(ctx context.Context, id string) (*Info, error) {
	return s.change(ctx, id, func(_ *db.Schedule, p *db.ScheduleUpdateParams) error {
		p.Enabled = false
		return nil
	})
}

// Delete deletes a schedule; the instances it started stay.
func (s *Scheduler) Delete(ctx context.Context, id string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if err := s.cfg.Store.ScheduleDelete(ctx, id); err != nil {
		return mapError(err, id)
	}
	return nil
}

// maxChangeAttempts bounds the read-modify-write retries of one change.
const maxChangeAttempts = 5

// change reads a schedule, lets edit set the new state, recomputes the next
// fire time and writes it fenced by the version read, retrying when a
// firing or another change got in between.
func (s *Scheduler) change(ctx context.Context, id string, edit func(cur *db.Schedule, p *db.ScheduleUpdateParams) error) (*Info, error) {
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		cur, err := s.cfg.Store.ScheduleGet(ctx, id)
		if err != nil {
			return nil, mapError(err, id)
		}
		p := &db.ScheduleUpdateParams{
			ID: id, Version: cur.Version, WorkflowName: cur.WorkflowName, Cron: cur.Cron, TimeZone: cur.TimeZone,
			Params: cur.Params, Enabled: cur.Enabled, MaxCatchup: cur.MaxCatchup, NextFireAt: cur.NextFireAt,
		}
		if err := edit(cur, p); err != nil {
			return nil, err
		}
		spec, err := Parse(p.Cron, p.TimeZone)
		if err != nil {
			return nil, err
		}
		p.Cron = spec.String()
		now := s.now()
		p.Now = &now
		switch {
		case !p.Enabled:
			p.NextFireAt = nil
		case !cur.Enabled || cur.NextFireAt == nil || p.Cron != cur.Cron || p.TimeZone != cur.TimeZone:
			p.NextFireAt = new(spec.Next(now))
		}
		updated, err := s.cfg.Store.ScheduleUpdate(ctx, p)
		if errors.Is(err, db.ErrScheduleChanged) && attempt < maxChangeAttempts {
			continue
		}
		if err != nil {
			return nil, mapError(err, id)
		}
		return info(updated), nil
	}
}

// check validates what create and update share.
func (s *Scheduler) check(ctx context.Context, workflowName string, params json.RawMessage, maxCatchup int) error {
	if err := workflow.ValidateWorkflowName(workflowName); err != nil {
		return err
	}
	_, ok := wfcore.Lookup(s.cfg.Registry, workflowName)
	if !ok && s.cfg.ResolveFunc != nil {
		if err := s.cfg.ResolveFunc(ctx, workflowName); err != nil {
			return err
		}
		_, ok = wfcore.Lookup(s.cfg.Registry, workflowName)
	}
	if !ok {
		return fmt.Errorf("%w: %q", workflow.ErrWorkflowNotFound, workflowName)
	}
	if err := s.cfg.EngineLimits.ValidatePayload("params", params); err != nil {
		return err
	}
	if maxCatchup < 1 || maxCatchup > MaxCatchupLimit {
		return fmt.Errorf("%w: maxCatchup must be between 1 and %d, got %d", workflow.ErrInvalidRequest, MaxCatchupLimit, maxCatchup)
	}
	return nil
}

// mapError turns the store's sentinels into the package's.
func mapError(err error, id string) error {
	switch {
	case errors.Is(err, db.ErrNotFound):
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	case errors.Is(err, db.ErrAlreadyExists):
		return fmt.Errorf("%w: %q", ErrAlreadyExists, id)
	}
	return err
}
