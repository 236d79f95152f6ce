package db

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrScheduleChanged means a fenced schedule write named a version that is no
// longer the schedule's: another scheduler fired it first, or it was updated,
// disabled or deleted in the meantime. The write changed nothing; the caller
// reads the schedule again (or drops its work, when it was firing).
var ErrScheduleChanged = errors.New("db: schedule changed")

// Schedule is a cron schedule: it starts an instance of WorkflowName at every
// time Cron names in TimeZone. The store keeps the schedule and when it is
// next due; the cron evaluation itself happens above the store.
type Schedule struct {
	ID           string
	WorkflowName string
	// Cron is the cron expression, as given.
	Cron string
	// TimeZone is the IANA name of the zone Cron is evaluated in.
	TimeZone string
	// Params are the params of every instance the schedule starts (JSON or nil).
	Params  json.RawMessage
	Enabled bool
	// MaxCatchup is the most due times one firing starts when several are
	// due at once (after an outage); at least 1.
	MaxCatchup int
	// NextFireAt is the next due time; nil while the schedule is disabled.
	NextFireAt *time.Time
	// LastFiredAt is the most recent due time that started an instance.
	LastFiredAt *time.Time
	// LastInstanceID is the id of the instance started for LastFiredAt.
	LastInstanceID string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Version is the fencing token: every update and every firing moves it
	// on. It starts at a random value, so a schedule deleted and created
	// again under the same id does not accept the old one's firings.
	Version int64
}

// ScheduleCreateParams are the arguments of Store.ScheduleCreate.
type ScheduleCreateParams struct {
	ID           string
	WorkflowName string
	Cron         string
	TimeZone     string
	Params       json.RawMessage
	Enabled      bool
	MaxCatchup   int
	// NextFireAt is the first due time; nil for a disabled schedule.
	NextFireAt *time.Time
	// Now is the creation time; nil means the database clock.
	Now *time.Time
}

// ScheduleUpdateParams are the arguments of Store.ScheduleUpdate: the whole
// new state of the schedule, written only when Version is still the
// schedule's.
type ScheduleUpdateParams struct {
	ID string
	// Version is the version the caller read; the update is fenced by it.
	Version      int64
	WorkflowName string
	Cron         string
	TimeZone     string
	Params       json.RawMessage
	Enabled      bool
	MaxCatchup   int
	// NextFireAt is the next due time; nil for a disabled schedule.
	NextFireAt *time.Time
	// Now is the update time; nil means the database clock.
	Now *time.Time
}

// ScheduleListParams are the arguments of Store.ScheduleList. Schedules are
// ordered by id; a page continues after AfterID.
type ScheduleListParams struct {
	// WorkflowName filters by workflow; empty lists every workflow's.
	WorkflowName string
	// AfterID continues after the schedule with this id; empty starts at the first.
	AfterID string
	// Limit is the page length.
	//
	// Defaults to 50.
	Limit int
}

// ScheduleListDueParams are the arguments of Store.ScheduleListDue.
type ScheduleListDueParams struct {
	// Now is compared with next_fire_at.
	Now time.Time
	// Limit is the most schedules returned.
	Limit int
}

// ScheduleFireParams are the arguments of Store.ScheduleFire: the instances
// one firing of a schedule starts and where the schedule goes next, committed
// together.
type ScheduleFireParams struct {
	ID string
	// Version is the version the caller read; the firing is fenced by it.
	Version int64
	// WorkflowName is the workflow of the instances, the schedule's.
	WorkflowName string
	// Instances are the instances to start, one per due time, oldest first.
	// An id that exists already refuses the whole firing (ErrAlreadyExists:
	// nothing is created and the schedule does not advance), so that a due
	// time never passes without its instance unseen.
	Instances []InstanceCreateItem
	// NextFireAt is the schedule's next due time after this firing.
	NextFireAt time.Time
	// LastFiredAt is the due time of the last of Instances; nil (no instance)
	// keeps the schedule's.
	LastFiredAt *time.Time
	// Now is the time of the firing: the instances' creation time and the
	// run_at of their first tasks.
	Now time.Time
	// RecordHooks records an OnWorkflowEnqueued outbox entry (reason create)
	// per created instance.
	RecordHooks bool
	// Queue is the task queue of the instances (the workflow's); empty
	// means workflow.DefaultQueue. They are created in
	// workflow.DefaultNamespace at priority 0.
	Queue string
}

// ScheduleFireResult is what a committed firing did.
type ScheduleFireResult struct {
	// Schedule is the schedule after the firing.
	Schedule *Schedule
	// Created are the instances the firing created, in the order given.
	Created []*Instance
}

// ScheduleStore is the persistence of cron schedules, part of Store. Every
// method is one transaction.
type ScheduleStore interface {
	// ScheduleCreate inserts a schedule; ErrAlreadyExists when the id is taken.
	ScheduleCreate(ctx context.Context, p *ScheduleCreateParams) (*Schedule, error)
	// ScheduleGet returns one schedule or ErrNotFound.
	ScheduleGet(ctx context.Context, id string) (*Schedule, error)
	// ScheduleList returns a page of schedules ordered by id.
	ScheduleList(ctx context.Context, p *ScheduleListParams) ([]*Schedule, error)
	// ScheduleUpdate rewrites a schedule whose version is p.Version and moves
	// its version on. It returns ErrNotFound when the schedule does not exist
	// and ErrScheduleChanged when its version moved on.
	ScheduleUpdate(ctx context.Context, p *ScheduleUpdateParams) (*Schedule, error)
	// ScheduleDelete deletes a schedule (the instances it started stay);
	// ErrNotFound when it does not exist.
	ScheduleDelete(ctx context.Context, id string) error
	// ScheduleListDue returns up to Limit enabled schedules whose next fire
	// time is at or before Now, the longest due first. It locks nothing.
	ScheduleListDue(ctx context.Context, p *ScheduleListDueParams) ([]*Schedule, error)
	// ScheduleFire commits one firing in one transaction: it advances an
	// enabled schedule whose version is still p.Version to p.NextFireAt and
	// creates p.Instances (queued, each with a task due now, as
	// InstanceCreate does), with hook entries and wake notifications as
	// InstanceCreate records them. When the version moved on, or the
	// schedule is disabled or gone, it returns ErrScheduleChanged and
	// changes nothing, so a due time fires exactly once however many
	// schedulers race for it. When an id of p.Instances exists it returns
	// ErrAlreadyExists and changes nothing.
	ScheduleFire(ctx context.Context, p *ScheduleFireParams) (*ScheduleFireResult, error)
}
