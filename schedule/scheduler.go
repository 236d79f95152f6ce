package schedule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/internal/polltimer"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Config configures a Scheduler.
type Config struct {
	// Store is the database. Required.
	Store db.ScheduleStore
	// Registry holds the workflows a schedule may name; create and update
	// check the name against it. Required.
	Registry *workflow.Registry
	// Clock supplies "now": due times, creation times, provenance.
	//
	// Defaults to the real clock.
	Clock clock.Clock
	// Logger receives what the scheduler fired, skipped and failed.
	//
	// Defaults to slog.Default().
	Logger *slog.Logger
	// PollInterval is how often a started scheduler looks for due
	// schedules; a due time fires at most this late.
	//
	// Defaults to 1 second.
	PollInterval time.Duration
	// BatchSize is how many due schedules one query reads.
	//
	// Defaults to 100.
	BatchSize int
	// EngineLimits bound the params of a schedule (MaxPayloadBytes; see
	// workflow.EngineLimits). The host sets its own.
	//
	// Defaults to workflow.DefaultEngineLimits(): 1 MiB.
	EngineLimits workflow.EngineLimits
	// LimitsFunc, when set, returns the limited scopes of an instance the
	// scheduler is about to start (client.Client.LimitSpecs; the host sets
	// it), so that scheduled instances of a limited workflow are admitted
	// as created ones are. An error fails the firing, which is retried at
	// the next poll.
	//
	// Defaults to nil: scheduled instances are created without limits.
	LimitsFunc func(ctx context.Context, workflowName string, params, metadata json.RawMessage) ([]db.LimitSpec, error)
	// WakeFunc is called after a firing started instances of a workflow, so
	// a runner picks them up without waiting for its poll.
	//
	// Defaults to nothing.
	WakeFunc func(workflowName string)
	// RecordHooks records an OnWorkflowEnqueued outbox entry (reason create)
	// for every instance a firing starts (see package hook).
	//
	// Defaults to false.
	RecordHooks bool
	// ResolveFunc, when set, is called with a workflow name that create or
	// update is about to check and Registry does not know, so it may
	// register it: a flow registry loads a flow another process applied. An
	// error fails the call.
	//
	// Defaults to nil: the name must be in Registry.
	ResolveFunc func(ctx context.Context, workflowName string) error
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *Config) WithDefaults() *Config {
	out := *c
	if out.Clock == nil {
		out.Clock = clock.New()
	}
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	out.PollInterval = cmp.Or(out.PollInterval, time.Second)
	out.BatchSize = cmp.Or(out.BatchSize, 100)
	out.EngineLimits = out.EngineLimits.WithDefaults()
	if out.WakeFunc == nil {
		out.WakeFunc = func(string) {}
	}
	return &out
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("schedule: Config.Store is required")
	}
	if c.Registry == nil {
		return errors.New("schedule: Config.Registry is required")
	}
	if c.PollInterval <= 0 {
		return fmt.Errorf("schedule: PollInterval %s must be positive", c.PollInterval)
	}
	if c.BatchSize < 1 {
		return fmt.Errorf("schedule: BatchSize %d must be at least 1", c.BatchSize)
	}
	if err := c.EngineLimits.Validate(); err != nil {
		return fmt.Errorf("schedule: Config.%w", err)
	}
	return nil
}

// Scheduler manages cron schedules and fires them. Its methods are safe for
// concurrent use, and any number of schedulers, in one process or many, may
// fire the schedules of one database: each due time fires once.
type Scheduler struct {
	cfg *Config

	mu       sync.Mutex
	started  bool
	stopLoop context.CancelFunc
	loopDone chan struct{}
}

// New returns a scheduler for cfg; see Config for the defaults. It fires
// nothing until Start or FireDue.
func New(cfg *Config) (*Scheduler, error) {
	if cfg == nil {
		return nil, errors.New("schedule: Config is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Scheduler{cfg: cfg}, nil
}

// Start fires due schedules in the background, every PollInterval, until
// Stop or until ctx is done.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("schedule: scheduler already started")
	}
	s.started = true
	loopCtx, cancel := context.WithCancel(ctx)
	s.stopLoop, s.loopDone = cancel, make(chan struct{})
	go s.loop(loopCtx)
	return nil
}

// Stop stops the background loop and waits until a firing in progress has
// committed or rolled back, or until ctx is done.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	stop, done := s.stopLoop, s.loopDone
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop fires due schedules every PollInterval until ctx is done. While the
// database is unavailable it tries again with backoff (backoff.Loop, in
// real time) instead of at the next poll, so a due time fires within
// moments of the database's return, and logs the outage once.
func (s *Scheduler) loop(ctx context.Context) {
	defer close(s.loopDone)
	poll := s.cfg.Clock.Timer(s.cfg.PollInterval)
	defer poll.Stop()
	outage := backoff.NewOutage(s.cfg.Logger, "firing schedules", backoff.Loop)
	for {
		_, err := s.fireDue(ctx, true)
		if ctx.Err() != nil {
			return
		}
		if unavailable, wait := outage.Round(err); unavailable {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		if err != nil {
			s.cfg.Logger.Warn("schedule: firing due schedules failed", "error", err)
		}
		polltimer.Reset(poll, s.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
}

// Started is an instance a firing started.
type Started struct {
	ScheduleID   string    `json:"scheduleId"`
	WorkflowName string    `json:"workflowName"`
	InstanceID   string    `json:"instanceId"`
	ScheduledFor time.Time `json:"scheduledFor"`
}

// FireResult is what one FireDue call did.
type FireResult struct {
	// Started are the instances this call started, per schedule in due
	// order.
	Started []Started `json:"started"`
	// Fired counts the schedules whose firing this call committed.
	Fired int `json:"fired"`
	// Lost counts the schedules another scheduler fired (or someone
	// changed) between this call's read and its commit; it left them alone.
	Lost int `json:"lost"`
}

// maxRounds bounds the batches of one FireDue call.
const maxRounds = 100

// FireDue fires every schedule that is due now and returns what it
// started. A schedule that another scheduler fires first is left alone; one
// that fails is logged, and FireDue goes on with the others and returns the
// failures joined, except after a failure because the database is
// unavailable (db.ErrUnavailable), which ends the call.
func (s *Scheduler) FireDue(ctx context.Context) (*FireResult, error) {
	return s.fireDue(ctx, false)
}

// fireDue is FireDue; quiet leaves a firing that fails because the
// database is unavailable unlogged, for a loop that logs the outage once.
func (s *Scheduler) fireDue(ctx context.Context, quiet bool) (*FireResult, error) {
	res := &FireResult{Started: []Started{}}
	var errs []error
	for range maxRounds {
		now := s.now()
		due, err := s.cfg.Store.ScheduleListDue(ctx, &db.ScheduleListDueParams{Now: now, Limit: s.cfg.BatchSize})
		if err != nil {
			return res, fmt.Errorf("listing due schedules: %w", err)
		}
		failed := 0
		for _, sched := range due {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			if err := s.fire(ctx, sched, now, res); err != nil {
				failed++
				if !quiet || !errors.Is(err, db.ErrUnavailable) {
					s.cfg.Logger.Error("schedule: firing failed", "schedule", sched.ID, "workflow", sched.WorkflowName, "error", err)
				}
				errs = append(errs, fmt.Errorf("firing schedule %q: %w", sched.ID, err))
				if errors.Is(err, db.ErrUnavailable) {
					// The next firings would wait for the database too
					// (on SQLite, a busy timeout each): the round ends.
					return res, errors.Join(errs...)
				}
			}
		}
		// A full batch may hide more due schedules; a batch with failures
		// would list the failed ones again.
		if len(due) < s.cfg.BatchSize || failed > 0 {
			break
		}
	}
	return res, errors.Join(errs...)
}

// fire commits one firing of a due schedule read at now.
func (s *Scheduler) fire(ctx context.Context, sched *db.Schedule, now time.Time, res *FireResult) error {
	if sched.NextFireAt == nil {
		return nil
	}
	spec, err := Parse(sched.Cron, sched.TimeZone)
	if err != nil {
		return err
	}
	due, skipped, next := spec.dueTimes(*sched.NextFireAt, now, max(sched.MaxCatchup, 1))
	if next.IsZero() {
		return fmt.Errorf("cron expression %q has no fire time after %s", sched.Cron, now.Format(time.RFC3339))
	}
	params := sched.Params
	if len(params) == 0 {
		params = json.RawMessage("null")
	}
	p := &db.ScheduleFireParams{
		ID: sched.ID, Version: sched.Version, WorkflowName: sched.WorkflowName,
		NextFireAt: next, Now: now, RecordHooks: s.cfg.RecordHooks,
	}
	// The instances run on the workflow's queue, in the default namespace,
	// under its deadline.
	var deadline *time.Time
	if def, registered := s.cfg.Registry.Definition(sched.WorkflowName); registered {
		p.Queue = def.Queue
		// Every instance of the firing is created at now: one deadline.
		if deadline, err = wfcore.DeadlineAt(def, time.Time{}, now); err != nil {
			return fmt.Errorf("schedule %q: %w", sched.ID, err)
		}
	}
	for _, t := range due {
		prov := &dftype.Provenance{
			Type: dftype.TriggerCron, Source: "schedule " + sched.ID, ScheduledFor: &t, ReceivedAt: now,
		}
		item := db.InstanceCreateItem{Params: params, Metadata: prov.Metadata(), DeadlineAt: deadline}
		if s.cfg.LimitsFunc != nil {
			limits, err := s.cfg.LimitsFunc(ctx, sched.WorkflowName, item.Params, item.Metadata)
			if err != nil {
				return fmt.Errorf("schedule %q: %w", sched.ID, err)
			}
			item.Limits = limits
		}
		p.Instances = append(p.Instances, item)
	}
	if len(due) > 0 {
		p.LastFiredAt = &due[len(due)-1]
	}
	fired, err := s.commit(ctx, sched, p, due)
	if errors.Is(err, db.ErrScheduleChanged) {
		res.Lost++
		return nil
	}
	if err != nil {
		return err
	}
	res.Fired++
	if skipped {
		s.cfg.Logger.Warn("schedule: due times were missed (the scheduler was not running); started the most recent ones only",
			"schedule", sched.ID, "first_missed", sched.NextFireAt.Format(time.RFC3339), "started", len(due), "max_catchup", sched.MaxCatchup)
	}
	for _, inst := range fired.Created {
		for i := range p.Instances {
			if p.Instances[i].ID == inst.ID {
				res.Started = append(res.Started, Started{
					ScheduleID: sched.ID, WorkflowName: sched.WorkflowName, InstanceID: inst.ID, ScheduledFor: due[i],
				})
				break
			}
		}
		s.cfg.Logger.Info("schedule: started an instance", "schedule", sched.ID, "workflow", sched.WorkflowName, "instance", inst.ID)
	}
	if len(fired.Created) > 0 {
		s.cfg.WakeFunc(sched.WorkflowName)
	}
	return nil
}

// maxIDTries bounds the firings of one due schedule that an instance id
// taken already refuses (db.ErrAlreadyExists): each try draws new ids.
const maxIDTries = 3

// commit commits the firing p of sched for the due times due, with new
// ids (InstanceID). A taken id refuses the whole firing, which changed
// nothing; it is tried again with other ids, and logged, so that a due
// time never passes without its instance unseen. Past maxIDTries the error
// is returned: the schedule stays due, and the next poll fires it again.
func (s *Scheduler) commit(ctx context.Context, sched *db.Schedule, p *db.ScheduleFireParams, due []time.Time) (*db.ScheduleFireResult, error) {
	for try := 1; ; try++ {
		for i := range p.Instances {
			p.Instances[i].ID = InstanceID(sched.ID, due[i])
		}
		fired, err := s.cfg.Store.ScheduleFire(ctx, p)
		if !errors.Is(err, db.ErrAlreadyExists) {
			return fired, err
		}
		s.cfg.Logger.Warn("schedule: an instance id of the firing was taken already; the firing changed nothing",
			"schedule", sched.ID, "workflow", sched.WorkflowName, "try", try, "max_tries", maxIDTries)
		if try == maxIDTries {
			return nil, fmt.Errorf("schedule %q: %d firings with new instance ids found an id taken: %w", sched.ID, try, err)
		}
	}
}

// now is the clock's time in UTC, to the microsecond both backends store.
func (s *Scheduler) now() time.Time {
	return s.cfg.Clock.Now().UTC().Truncate(time.Microsecond)
}
