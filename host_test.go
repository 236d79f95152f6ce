package duraflow_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

type greetParams struct {
	Name string `json:"name"`
}

type greetOutput struct {
	Greeting string `json:"greeting"`
}

// register registers the test's workflow, one step and an output.
func register(reg *workflow.Registry) *workflow.Binding[greetParams, greetOutput] {
	return workflow.MustRegister(reg, "greet", func(ctx context.Context, ev workflow.Event[greetParams], step workflow.Step) (greetOutput, error) {
		g, err := workflow.Do(step, "greet", func(ctx context.Context) (string, error) {
			return "hello, " + ev.Payload.Name, nil
		})
		return greetOutput{Greeting: g}, err
	})
}

// startHost builds and starts a host over store whose runner polls once an
// hour, so that only wake-ups and eager starts move work in a test.
func startHost(t *testing.T, store db.Store, cfg *duraflow.Config) *duraflow.Host {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger
	}
	if cfg.Runner == nil && cfg.RunMode != duraflow.RunNone {
		cfg.Runner = &runner.Config{PollInterval: time.Hour}
	}
	h, err := duraflow.New(store, cfg)
	require.NoError(t, err)
	require.NoError(t, h.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.Stop(ctx))
	})
	if r := h.Runner(); r != nil && cfg.RunMode == duraflow.RunBackground {
		// While the loop claims it holds every free slot, and an instance
		// created meanwhile would be queued, not started: wait for its first
		// claim, and on a listening host for the one the listener's first
		// wake-up makes.
		polls := int64(1)
		if l := h.Listening(); l != nil {
			select {
			case <-l:
			case <-time.After(10 * time.Second):
				t.Fatal("the host did not listen")
			}
			polls = 2
		}
		require.Eventually(t, func() bool { return r.Polls() >= polls }, 10*time.Second, time.Millisecond)
	}
	return h
}

func waitDone[O any](t *testing.T, inst *workflow.Instance[O]) *workflow.Status[O] {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := inst.Wait(ctx, 5*time.Millisecond)
	require.NoError(t, err)
	return st
}

func TestHostRunsAWorkflowEndToEnd(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		h := startHost(t, b.NewStore(t), &duraflow.Config{Registry: reg})

		// The binding goes through the host's client: New bound the registry.
		inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "ada", Params: greetParams{Name: "Ada"}})
		require.NoError(t, err)
		st := waitDone(t, inst)
		require.Equal(t, dftype.StatusComplete, st.Status)
		require.Equal(t, "hello, Ada", st.Output.Greeting)

		// The runner has a free slot and the client hands it new instances:
		// the instance started eagerly, without a claim.
		require.EqualValues(t, 1, h.Runner().EagerStarts())
		require.Zero(t, h.Runner().Claimed())
	})
}

func TestHostQueuesWithoutEagerStartAndWakesItsRunner(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		h := startHost(t, b.NewStore(t), &duraflow.Config{
			Registry: reg, Runner: &runner.Config{PollInterval: time.Hour, DisableEagerStart: true},
		})
		inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "grace", Params: greetParams{Name: "Grace"}})
		require.NoError(t, err)
		// The runner polls once an hour: the client's in-process wake-up
		// made it claim the instance.
		require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status)
		require.Zero(t, h.Runner().EagerStarts())
		require.EqualValues(t, 1, h.Runner().Claimed())
	})
}

// TestPostgresHostIsWokenByAnotherProcess: a create made through another
// host's client on the same database reaches this host's runner through the
// store's wake listener (LISTEN/NOTIFY), long before its hourly poll.
func TestPostgresHostIsWokenByAnotherProcess(t *testing.T) {
	t.Parallel()
	store := pgtest.NewStore(t)
	regA := workflow.NewRegistry()
	register(regA)
	a := startHost(t, store, &duraflow.Config{Registry: regA})
	select {
	case <-a.Listening():
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not listen")
	}

	// Another host, with no runner, over its own store on the same schema
	// and channel: it cannot wake a's runner in process.
	other := postgres.New(store.Pool(), postgres.WithWakeChannel(store.WakeChannel()))
	regB := workflow.NewRegistry()
	greetB := register(regB)
	b := startHost(t, other, &duraflow.Config{Registry: regB, RunMode: duraflow.RunNone})
	require.Nil(t, b.Runner())
	require.Nil(t, b.Listening(), "a host without a runner or hooks does not listen")

	inst, err := greetB.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "linus", Params: greetParams{Name: "Linus"}})
	require.NoError(t, err)
	require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status)
	require.EqualValues(t, 1, a.Runner().Claimed())
}

func TestHostPollOnlyDoesNotListen(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	register(reg)
	h, err := duraflow.New(pgtest.NewStore(t), &duraflow.Config{Registry: reg, PollOnly: true})
	require.NoError(t, err)
	require.Nil(t, h.Listening())
	require.NoError(t, h.Stop(t.Context()))
}

func TestHostDeliversHooks(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		var mu sync.Mutex
		var got []hook.Enqueued
		reg := workflow.NewRegistry()
		greet := register(reg)
		startHost(t, b.NewStore(t), &duraflow.Config{
			Registry: reg,
			Hooks: &hook.Config{
				PollInterval: time.Hour,
				OnWorkflowEnqueued: func(ctx context.Context, e hook.Enqueued) error {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, e)
					return nil
				},
			},
		})
		inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "x"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status)
		// The client recorded the entry (hooks are on everywhere once
		// Config.Hooks is set), and its wake-up made the deliverer, which
		// polls once an hour, deliver it.
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 1
		}, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, "greet", got[0].WorkflowName)
		require.Equal(t, "create", got[0].Reason)
	})
}

func TestHostParts(t *testing.T) {
	t.Parallel()
	store := testharness.SQLiteMemory.NewStore(t)
	reg := workflow.NewRegistry()
	register(reg)
	h, err := duraflow.New(store, &duraflow.Config{Registry: reg, Flows: &flow.Config{}})
	require.NoError(t, err)
	require.NotNil(t, h.Client())
	require.NotNil(t, h.Runner())
	require.NotNil(t, h.Scheduler())
	require.NotNil(t, h.Flows())
	require.Nil(t, h.Hooks())
	require.Nil(t, h.Listening(), "SQLite offers no wake listener")
	require.Same(t, reg, h.Client().Registry())

	h2, err := duraflow.New(store, &duraflow.Config{Registry: workflow.NewRegistry(), RunMode: duraflow.RunNone, DisableScheduler: true})
	require.NoError(t, err)
	require.Nil(t, h2.Runner())
	require.Nil(t, h2.Scheduler())
	require.Nil(t, h2.Flows())

	require.NoError(t, h.Start(t.Context()))
	require.ErrorContains(t, h.Start(t.Context()), "already started")
	require.NoError(t, h.Stop(t.Context()))
	require.NoError(t, h.Stop(t.Context()), "Stop twice")
	require.ErrorContains(t, h.Start(t.Context()), "stopped")
	require.NoError(t, h2.Stop(t.Context()), "Stop without Start")
}

func TestNewReportsConfigErrors(t *testing.T) {
	t.Parallel()
	store := testharness.SQLiteMemory.NewStore(t)
	reg := workflow.NewRegistry()
	hookFunc := func(context.Context, hook.Enqueued) error { return nil }
	for _, tc := range []struct {
		name  string
		store db.Store
		cfg   *duraflow.Config
		want  []string
	}{
		{"no store", nil, &duraflow.Config{Registry: reg}, []string{"a store is required"}},
		{"no config", store, nil, []string{"a Config is required"}},
		{"no registry", store, &duraflow.Config{}, []string{"Config.Registry is required"}},
		{
			"host fields in the runner's config", store,
			&duraflow.Config{Registry: reg, Runner: &runner.Config{Store: store, RecordHooks: true, WakeFunc: func(string) {}}},
			[]string{
				"Config.Runner.Store must be left empty: the host sets it",
				"Config.Runner.WakeFunc must be left empty",
				"Config.Runner.RecordHooks must be left empty: hook entries are recorded when Config.Hooks is set",
			},
		},
		{
			"host fields in the scheduler's config", store,
			&duraflow.Config{Registry: reg, Scheduler: &schedule.Config{Registry: reg, ResolveFunc: func(context.Context, string) error { return nil }}},
			[]string{"Config.Scheduler.Registry must be left empty", "Config.Scheduler.ResolveFunc must be left empty"},
		},
		{
			"host fields in the hooks' and flows' configs", store,
			&duraflow.Config{Registry: reg, Hooks: &hook.Config{Store: store}, Flows: &flow.Config{Logger: quietLogger}},
			[]string{"Config.Hooks.OnWorkflowEnqueued is required", "Config.Hooks.Store must be left empty", "Config.Flows.Logger must be left empty"},
		},
		{
			"engine limits out of range", store,
			&duraflow.Config{Registry: reg, EngineLimits: workflow.EngineLimits{MaxStepsPerRun: 200_000, MaxPayloadBytes: 10}},
			[]string{
				"Config.EngineLimits.MaxPayloadBytes 10 must be between 1024 and 67108864",
				"Config.EngineLimits.MaxStepsPerRun 200000 must be between 1 and 100000",
			},
		},
		{
			"engine limits in the parts' configs", store,
			&duraflow.Config{
				Registry: reg, Runner: &runner.Config{EngineLimits: workflow.EngineLimits{MaxStepsPerRun: 5}},
				Scheduler: &schedule.Config{EngineLimits: workflow.EngineLimits{MaxPayloadBytes: 5000}},
			},
			[]string{
				"Config.Runner.EngineLimits must be left empty: the host sets it from Config.EngineLimits",
				"Config.Scheduler.EngineLimits must be left empty: the host sets it from Config.EngineLimits",
			},
		},
		{"runner without running", store, &duraflow.Config{Registry: reg, RunMode: duraflow.RunNone, Runner: &runner.Config{}}, []string{"RunMode is RunNone"}},
		{"unknown run mode", store, &duraflow.Config{Registry: reg, RunMode: 7}, []string{"Config.RunMode 7 is unknown"}},
		{
			"scheduler config and no scheduler", store,
			&duraflow.Config{Registry: reg, DisableScheduler: true, Scheduler: &schedule.Config{}},
			[]string{"Config.Scheduler is set but Config.DisableScheduler is true"},
		},
		{"a part refuses its config", store, &duraflow.Config{Registry: reg, Runner: &runner.Config{LeaseDuration: time.Millisecond}}, []string{"building the runner", "LeaseDuration"}},
		{
			"hooks refuse their config", store,
			&duraflow.Config{Registry: reg, Hooks: &hook.Config{OnWorkflowEnqueued: hookFunc, CallTimeout: time.Minute, Lease: time.Second}},
			[]string{"building the hook deliverer", "CallTimeout"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, err := duraflow.New(tc.store, tc.cfg)
			require.Error(t, err)
			require.Nil(t, h)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
			require.True(t, strings.HasPrefix(err.Error(), "duraflow: "), err.Error())
		})
	}
}

// TestNewEngineLimits: the host's EngineLimits are its client's, and a
// zero one is the engine's defaults.
func TestNewEngineLimits(t *testing.T) {
	t.Parallel()
	store := testharness.SQLiteMemory.NewStore(t)
	h, err := duraflow.New(store, &duraflow.Config{Registry: workflow.NewRegistry(), Logger: quietLogger})
	require.NoError(t, err)
	require.Equal(t, workflow.DefaultEngineLimits(), h.Client().EngineLimits())
	h, err = duraflow.New(store, &duraflow.Config{Registry: workflow.NewRegistry(), Logger: quietLogger,
		EngineLimits: workflow.EngineLimits{MaxPayloadBytes: 8 << 20, MaxBatchSize: 500}})
	require.NoError(t, err)
	require.Equal(t, workflow.EngineLimits{MaxPayloadBytes: 8 << 20, MaxStepsPerRun: 1024, MaxBatchSize: 500}, h.Client().EngineLimits())
}

// TestStopLeavesNoGoroutine runs alone (not in parallel), so the process's
// goroutine count is the host's to account for.
func TestStopLeavesNoGoroutine(t *testing.T) {
	for _, b := range testharness.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			store := b.NewStore(t)
			// Warm the store up: its pools start what they keep running on
			// first use.
			reg := workflow.NewRegistry()
			greet := register(reg)
			_, err := store.InstanceGet(t.Context(), db.InstanceRef{WorkflowName: "greet", ID: "none"})
			require.True(t, errors.Is(err, db.ErrNotFound), "%v", err)
			before := runtime.NumGoroutine()

			h, err := duraflow.New(store, &duraflow.Config{
				Registry: reg, Logger: quietLogger,
				Hooks: &hook.Config{OnWorkflowEnqueued: func(context.Context, hook.Enqueued) error { return nil }},
				Flows: &flow.Config{},
			})
			require.NoError(t, err)
			require.NoError(t, h.Start(t.Context()))
			inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "g"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status)
			if l := h.Listening(); l != nil {
				<-l
			}
			require.Greater(t, runtime.NumGoroutine(), before, "the host runs in the background")

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, h.Stop(ctx))
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines after Stop, %d before New:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
