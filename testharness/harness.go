package testharness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/workflow"
)

// DefaultStart is where the fake clock starts.
var DefaultStart = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)

// maxRounds bounds RunUntilIdle so a workflow that never settles fails the
// test instead of hanging it.
const maxRounds = 10000

// Option configures a Harness.
type Option func(*options)

type options struct {
	store     db.Store
	backend   *Backend
	start     time.Time
	runnerCfg func(*runner.Config)
	jitter    *float64
	logger    *slog.Logger
	hooks     *hook.Config
	observer  duraflow.Observer
	tracer    trace.TracerProvider
	limits    workflow.EngineLimits
}

// WithHooks turns the durable hooks on (duraflow.Config.Hooks): the client
// and the runner record hook outbox entries, and Harness.Hooks delivers
// them to cfg.OnWorkflowEnqueued when the test calls its DeliverDue. The
// store, the clock and the logger are the harness's: leave them empty.
func WithHooks(cfg *hook.Config) Option { return func(o *options) { o.hooks = cfg } }

// WithStore runs the harness on the given store instead of a fresh one.
func WithStore(s db.Store) Option { return func(o *options) { o.store = s } }

// WithStart sets the fake clock's starting time.
func WithStart(t time.Time) Option { return func(o *options) { o.start = t } }

// WithRunnerConfig adjusts the runner's configuration before it is built
// (see duraflow.Config.Runner: the store, registry, clock, logger, wake-ups
// and hooks are the harness's).
func WithRunnerConfig(f func(*runner.Config)) Option { return func(o *options) { o.runnerCfg = f } }

// WithJitter fixes the draw of every retry's jitter at r, in [0, 1)
// (runner.Config.JitterFunc): 0.5 makes each wait exactly what its backoff
// says, 0 and 1 the ends of the ±20% spread. Without it the draw is random.
func WithJitter(r float64) Option {
	return func(o *options) { o.jitter = &r }
}

// WithLogger sends the runner's logs to l (by default they are discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithObserver gives the host an observer (duraflow.Config.Observer), such
// as *metrics.Metrics, so a test can check what the runner and client
// report.
func WithObserver(obs duraflow.Observer) Option { return func(o *options) { o.observer = obs } }

// WithEngineLimits gives the host other limits than the engine's defaults
// (duraflow.Config.EngineLimits), so a test runs its workflows under the
// payload, step and batch limits of the deployment: a workflow that takes
// more than 1024 steps on a host with a raised MaxStepsPerRun, say.
func WithEngineLimits(l workflow.EngineLimits) Option { return func(o *options) { o.limits = l } }

// WithTracerProvider turns tracing on (duraflow.Config.TracerProvider),
// so a test can check the spans, with the SDK's in-memory exporter
// (go.opentelemetry.io/otel/sdk/trace/tracetest) for one.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// Harness is a host (duraflow.New) whose client and runner share a fake
// clock, driven by the test: nothing runs in the background.
type Harness struct {
	t testing.TB
	// Clock is the fake clock every component reads.
	Clock *clock.Mock
	// Store is the database.
	Store db.Store
	// Registry is where the test registers its workflows.
	Registry *workflow.Registry
	// Client is the management client (the registry's bindings use it).
	Client *client.Client
	// Runner executes the workflows; the harness drives it with RunDue.
	Runner *runner.Runner
	// Hooks delivers the recorded hook entries when the test calls its
	// DeliverDue; nil without WithHooks.
	Hooks *hook.Deliverer
	// Host is the host the harness built, with RunOnDemand.
	Host  *duraflow.Host
	ctx   context.Context
	mocks *mocks
}

// New returns a harness on a fresh database of DefaultBackend (in-memory
// SQLite unless DURAFLOW_TEST_BACKEND says otherwise), or of the backend or
// store given with WithBackend or WithStore.
func New(t testing.TB, opts ...Option) *Harness {
	t.Helper()
	o := options{start: DefaultStart, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, opt := range opts {
		opt(&o)
	}
	if o.store == nil {
		b := DefaultBackend()
		if o.backend != nil {
			b = *o.backend
		}
		o.store = b.NewStore(t)
	}
	clk := clock.NewMock()
	clk.Set(o.start)
	reg := workflow.NewRegistry()
	// The harness's runner serves every task queue, so a workflow
	// registered on a queue of its own runs as any other.
	rc := &runner.Config{
		ID: "harness", LeaseDuration: runner.DefaultLeaseDuration, MaxConcurrency: runner.DefaultMaxConcurrency,
		Queues: []string{runner.AllQueues},
	}
	if o.runnerCfg != nil {
		o.runnerCfg(rc)
	}
	if r := o.jitter; r != nil {
		rc.JitterFunc = func() float64 { return *r }
	}
	ms := &mocks{t: t, workflows: map[string][]*WorkflowMock{}}
	own := rc.StepOverrideFunc
	rc.StepOverrideFunc = func(workflowName, step string) workflow.StepFunc {
		if fn := ms.stepOverride(workflowName, step); fn != nil {
			return fn
		}
		if own != nil {
			return own(workflowName, step)
		}
		return nil
	}
	// The harness drives the runner with RunDue and never starts the host.
	// A runner that is not started reserves nothing for eager start, so
	// creates stay queued until RunDue: a test sees every instance queued
	// first, as on a fresh deployment. A test that starts h.Runner gets
	// eager start.
	host, err := duraflow.New(o.store, &duraflow.Config{
		Registry: reg, Clock: clk, Logger: o.logger, RunMode: duraflow.RunOnDemand, Runner: rc,
		Hooks: o.hooks, DisableScheduler: true, PollOnly: true, Observer: o.observer, TracerProvider: o.tracer,
		EngineLimits: o.limits,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h := &Harness{
		t: t, Clock: clk, Store: o.store, Registry: reg, Client: host.Client(), Runner: host.Runner(),
		Hooks: host.Hooks(), Host: host, ctx: ctx, mocks: ms,
	}
	t.Cleanup(func() {
		cancel()
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = host.Stop(stopCtx)
		h.reportMocks()
	})
	return h
}

// Context returns a context that lives as long as the test.
func (h *Harness) Context() context.Context { return h.ctx }

// Now returns the fake clock's time.
func (h *Harness) Now() time.Time { return h.Clock.Now() }

// Advance moves the fake clock forward by d without running anything.
func (h *Harness) Advance(d time.Duration) { h.Clock.Add(d) }

// RunDue runs every task that is due now, once, and returns how many ran.
func (h *Harness) RunDue() int {
	h.t.Helper()
	n, err := h.Runner.RunDue(h.ctx, 1000)
	require.NoError(h.t, err, "running due tasks")
	return n
}

// RunUntilIdle runs all due work, jumps the clock to the next sleep or retry
// and repeats, until no instance can move without outside help: every
// non-terminal instance is paused or waits only for an event. It fails the
// test when an instance is stuck (it can never move on) and names what it
// waits for.
func (h *Harness) RunUntilIdle() {
	h.t.Helper()
	for round := 0; round < maxRounds; round++ {
		if h.RunDue() > 0 {
			continue
		}
		next, stuck := h.nextWake()
		if len(stuck) > 0 {
			h.t.Fatalf("testharness: RunUntilIdle found stuck instances:\n  %s", strings.Join(stuck, "\n  "))
		}
		if next == nil {
			return
		}
		if next.After(h.Clock.Now()) {
			h.Clock.Set(*next)
		}
	}
	h.t.Fatalf("testharness: RunUntilIdle did not settle after %d rounds (a workflow loops forever?)", maxRounds)
}

// nextWake returns the earliest time at which an instance moves without
// outside help, and a description of every instance that never will.
func (h *Harness) nextWake() (*time.Time, []string) {
	h.t.Helper()
	var next *time.Time
	consider := func(t time.Time) {
		if next == nil || t.Before(*next) {
			next = &t
		}
	}
	var stuck []string
	for _, inst := range h.nonTerminal() {
		if inst.Status == dftype.StatusPaused {
			continue
		}
		ref := db.InstanceRef{WorkflowName: inst.WorkflowName, ID: inst.ID}
		task, err := h.Store.TaskGet(h.ctx, ref)
		if errors.Is(err, db.ErrNotFound) && inst.WaitingFor != nil {
			continue // waits for a slot another instance holds: it moves when that one ends
		}
		if err != nil {
			stuck = append(stuck, fmt.Sprintf("%s/%s: status %s, no task (%v)", inst.WorkflowName, inst.ID, inst.Status, err))
			continue
		}
		if _, ok := wfcore.Lookup(h.Registry, inst.WorkflowName); !ok {
			stuck = append(stuck, fmt.Sprintf("%s/%s: status %s, workflow %q is not registered in this harness", inst.WorkflowName, inst.ID, inst.Status, inst.WorkflowName))
			continue
		}
		if task.Status == db.TaskStatusProcessing && task.LockedUntil != nil {
			consider(*task.LockedUntil) // a crashed holder: reclaimable when its lease expires
			continue
		}
		if inst.Status != dftype.StatusWaiting {
			consider(task.RunAt)
			continue
		}
		steps, err := h.Store.StepList(h.ctx, &db.StepListParams{WorkflowName: inst.WorkflowName, InstanceID: inst.ID, RunNumber: inst.RunNumber})
		require.NoError(h.t, err)
		timers := 0
		for _, s := range steps {
			switch {
			case s.Status == db.StepStatusWaiting && s.Type == db.StepTypeSleep && s.WakeAt != nil:
				consider(*s.WakeAt)
				timers++
			case s.Status == db.StepStatusRetrying && s.NextRetryAt != nil:
				consider(*s.NextRetryAt)
				timers++
			}
		}
		if timers == 0 && !task.RunAt.After(h.Clock.Now()) {
			consider(task.RunAt)
		}
		if task.Kind == db.TaskKindRetry && timers == 0 {
			consider(task.RunAt) // a workflow retry: the run is due again then
		}
		if inst.DeadlineAt != nil {
			consider(*inst.DeadlineAt) // the deadline ends it, whatever it waits for
		}
	}
	return next, stuck
}

func (h *Harness) nonTerminal() []*db.Instance {
	var out []*db.Instance
	p := &db.InstanceListParams{
		Statuses: []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause, dftype.StatusPaused},
		Limit:    500,
	}
	for {
		page, err := h.Store.InstanceList(h.ctx, p)
		require.NoError(h.t, err, "listing instances")
		out = append(out, page...)
		if len(page) < p.Limit {
			return out
		}
		last := page[len(page)-1]
		p.Cursor = &db.InstanceCursor{UpdatedAt: last.UpdatedAt, WorkflowName: last.WorkflowName, ID: last.ID}
	}
}

// Waiting describes what each waiting instance waits for, one line each,
// sorted: "<workflow>/<id>: event <type> until <time>" or "sleep <step> until <time>".
func (h *Harness) Waiting() []string {
	h.t.Helper()
	var out []string
	for _, inst := range h.nonTerminal() {
		steps, err := h.Store.StepList(h.ctx, &db.StepListParams{WorkflowName: inst.WorkflowName, InstanceID: inst.ID, RunNumber: inst.RunNumber})
		require.NoError(h.t, err)
		for _, s := range steps {
			if s.Status != db.StepStatusWaiting && s.Status != db.StepStatusRetrying {
				continue
			}
			var what string
			switch {
			case s.Type == db.StepTypeWaitForEvent:
				what = fmt.Sprintf("event %s until %s", s.WaitEventType, s.WakeAt.Format(time.RFC3339))
			case s.Type == db.StepTypeInvoke:
				what = fmt.Sprintf("child of step %s until %s", s.Key, s.WakeAt.Format(time.RFC3339))
			case s.Status == db.StepStatusRetrying:
				what = fmt.Sprintf("retry of %s at %s", s.Key, s.NextRetryAt.Format(time.RFC3339))
			default:
				what = fmt.Sprintf("sleep %s until %s", s.Key, s.WakeAt.Format(time.RFC3339))
			}
			out = append(out, fmt.Sprintf("%s/%s (%s): %s", inst.WorkflowName, inst.ID, inst.Status, what))
		}
	}
	sort.Strings(out)
	return out
}

// SendEvent sends an event to an instance and fails the test on error.
func (h *Harness) SendEvent(workflowName, id, eventType string, payload any) {
	h.t.Helper()
	raw, err := h.Client.EngineLimits().MarshalPayload("event payload", payload)
	require.NoError(h.t, err)
	require.NoError(h.t, h.Client.SendEvent(h.ctx, workflowName, id, eventType, raw), "sending event %s to %s/%s", eventType, workflowName, id)
}

// Status returns an instance's current state and fails the test on error.
func (h *Harness) Status(workflowName, id string) *dftype.InstanceInfo {
	h.t.Helper()
	info, err := h.Client.Get(h.ctx, workflowName, id)
	require.NoError(h.t, err, "reading %s/%s", workflowName, id)
	return info
}

// RequireStatus fails the test unless the instance has the status.
func (h *Harness) RequireStatus(workflowName, id string, want dftype.InstanceStatus) *dftype.InstanceInfo {
	h.t.Helper()
	info := h.Status(workflowName, id)
	if info.Status != want {
		msg := fmt.Sprintf("instance %s/%s: status %s, want %s", workflowName, id, info.Status, want)
		if info.Error != nil {
			msg += fmt.Sprintf(" (error %s: %s)", info.Error.Name, info.Error.Message)
		}
		if w := h.Waiting(); len(w) > 0 {
			msg += "\nwaiting:\n  " + strings.Join(w, "\n  ")
		}
		h.t.Fatal(msg)
	}
	return info
}

// RequireOutput fails the test unless the instance is complete; it decodes
// the output into out.
func (h *Harness) RequireOutput(workflowName, id string, out any) {
	h.t.Helper()
	info := h.RequireStatus(workflowName, id, dftype.StatusComplete)
	require.NoError(h.t, json.Unmarshal(info.Output, out), "decoding output of %s/%s", workflowName, id)
}

// History returns the steps and events of the instance's current run,
// every page of them.
func (h *Harness) History(workflowName, id string) *client.History {
	h.t.Helper()
	hist, err := h.Client.History(h.ctx, workflowName, id, client.HistoryParams{})
	require.NoError(h.t, err)
	for next := hist.NextCursor; next != ""; {
		page, err := h.Client.History(h.ctx, workflowName, id, client.HistoryParams{Run: hist.RunNumber, Cursor: next})
		require.NoError(h.t, err)
		hist.Steps = append(hist.Steps, page.Steps...)
		hist.Events = append(hist.Events, page.Events...)
		next = page.NextCursor
	}
	hist.NextCursor = ""
	return hist
}
