package duraflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// lifecycleTypes lists the types of the instance's logged events.
func lifecycleTypes(t *testing.T, store db.Store, id string) []db.LifecycleEventType {
	t.Helper()
	events, err := store.(db.LifecycleStore).LifecycleList(t.Context(), &db.LifecycleListParams{WorkflowName: "greet", InstanceID: id})
	require.NoError(t, err)
	types := []db.LifecycleEventType{}
	for _, e := range events {
		types = append(types, e.Type)
	}
	return types
}

func TestLifecycleLogRecordsARun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		startHost(t, store, &duraflow.Config{Registry: reg})
		inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "ada", Params: greetParams{Name: "Ada"}})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status)
		require.Equal(t, []db.LifecycleEventType{
			db.LifecycleCreated, db.LifecycleStarted, db.LifecycleStepStarted, db.LifecycleStepCompleted, db.LifecycleCompleted,
		}, lifecycleTypes(t, store, "ada"), "an eager start, one step, the end")
	})
}

func TestLifecycleLogOff(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		startHost(t, store, &duraflow.Config{Registry: reg, DisableLifecycleLog: true})
		inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "off", Params: greetParams{Name: "Off"}})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status)
		require.Empty(t, lifecycleTypes(t, store, "off"))
	})
}

func TestSubscribeLifecycle(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		h := startHost(t, store, &duraflow.Config{Registry: reg})

		// Events before the cursor are not delivered.
		old, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "before", Params: greetParams{Name: "B"}})
		require.NoError(t, err)
		waitDone(t, old)

		after, err := store.(db.LifecycleStore).LifecycleLastID(t.Context())
		require.NoError(t, err)
		require.Positive(t, after)

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		got := make(chan db.LifecycleEvent, 100)
		done := errors.New("done")
		subscribed := make(chan error, 1)
		go func() {
			subscribed <- h.SubscribeLifecycle(ctx, duraflow.LifecycleFilter{AfterID: after, InstanceID: "sub"}, func(e db.LifecycleEvent) error {
				got <- e
				if e.Type == db.LifecycleCompleted {
					return done
				}
				return nil
			})
		}()
		_, err = greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "sub", Params: greetParams{Name: "S"}})
		require.NoError(t, err)
		require.ErrorIs(t, <-subscribed, done, "fn's error ends the subscription")
		close(got)
		var types []db.LifecycleEventType
		var last int64
		for e := range got {
			require.Equal(t, "sub", e.InstanceID, "the filter holds")
			require.Greater(t, e.ID, last, "in id order")
			last = e.ID
			types = append(types, e.Type)
		}
		require.Equal(t, []db.LifecycleEventType{
			db.LifecycleCreated, db.LifecycleStarted, db.LifecycleStepStarted, db.LifecycleStepCompleted, db.LifecycleCompleted,
		}, types)
	})
}

func TestSubscribeLifecycleResumesFromACursor(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		h := startHost(t, store, &duraflow.Config{Registry: reg})
		for i := range 3 {
			inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: fmt.Sprint("c", i), Params: greetParams{Name: "C"}})
			require.NoError(t, err)
			waitDone(t, inst)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		var ids []string
		stop := errors.New("stop")
		err := h.SubscribeLifecycle(ctx, duraflow.LifecycleFilter{Types: []db.LifecycleEventType{db.LifecycleCompleted}},
			func(e db.LifecycleEvent) error {
				ids = append(ids, e.InstanceID)
				if len(ids) == 3 {
					return stop
				}
				return nil
			})
		require.NoError(t, err, "without AfterID it starts after the newest event: nothing comes before the deadline, which ends it with nil")
		require.Empty(t, ids)

		err = h.SubscribeLifecycle(t.Context(), duraflow.LifecycleFilter{AfterID: 1, Types: []db.LifecycleEventType{db.LifecycleCompleted}},
			func(e db.LifecycleEvent) error {
				ids = append(ids, e.InstanceID)
				if len(ids) == 3 {
					return stop
				}
				return nil
			})
		require.ErrorIs(t, err, stop)
		require.Equal(t, []string{"c0", "c1", "c2"}, ids, "from a cursor, the committed events after it, in order")
	})
}

// TestSubscribeLifecycleWorker: a subscriber filtered by worker receives
// that worker's events only.
func TestSubscribeLifecycleWorker(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		h := startHost(t, store, &duraflow.Config{Registry: reg, RunMode: duraflow.RunOnDemand})
		_, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "first", Params: greetParams{Name: "F"}})
		require.NoError(t, err)
		after, err := store.(db.LifecycleStore).LifecycleLastID(t.Context())
		require.NoError(t, err)
		require.Positive(t, after)
		now := time.Now()
		for _, id := range []string{"w-1", "w-2"} {
			_, err := store.WorkerRegister(t.Context(), &db.WorkerRegisterParams{ID: id, Hostname: "h", PID: 1, MaxConcurrency: 1, Now: now})
			require.NoError(t, err)
			_, err = store.WorkerDeregister(t.Context(), &db.WorkerDeregisterParams{ID: id, Now: now})
			require.NoError(t, err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		done := errors.New("done")
		var types []db.LifecycleEventType
		err = h.SubscribeLifecycle(ctx, duraflow.LifecycleFilter{AfterID: after, WorkerID: "w-2"}, func(e db.LifecycleEvent) error {
			require.Equal(t, "w-2", e.WorkerID)
			types = append(types, e.Type)
			if e.Type == db.LifecycleWorkerOffline {
				return done
			}
			return nil
		})
		require.ErrorIs(t, err, done)
		require.Equal(t, []db.LifecycleEventType{db.LifecycleWorkerOnline, db.LifecycleWorkerOffline}, types)
	})
}

func TestLifecyclePruneByRetention(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC))
		h := startHost(t, store, &duraflow.Config{
			Registry: reg, Clock: clk, RunMode: duraflow.RunOnDemand, LifecycleRetention: 24 * time.Hour,
		})
		_, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "old", Params: greetParams{Name: "Old"}})
		require.NoError(t, err)
		clk.Add(23 * time.Hour)
		_, err = greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "new", Params: greetParams{Name: "New"}})
		require.NoError(t, err)

		n, err := h.PruneLifecycle(t.Context())
		require.NoError(t, err)
		require.Zero(t, n, "nothing is older than the retention yet")
		clk.Add(2 * time.Hour)
		n, err = h.PruneLifecycle(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, lifecycleTypes(t, store, "old"))
		require.Equal(t, []db.LifecycleEventType{db.LifecycleCreated}, lifecycleTypes(t, store, "new"))
	})
}

func TestLifecyclePruneRunsInTheBackground(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		greet := register(reg)
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC))
		startHost(t, store, &duraflow.Config{
			Registry: reg, Clock: clk, Runner: &runner.Config{PollInterval: time.Hour, DisableEagerStart: true},
			LifecycleRetention: time.Minute, LifecyclePruneInterval: 2 * time.Minute,
		})
		inst, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "old", Params: greetParams{Name: "Old"}})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, waitDone(t, inst).Status, "run before the clock moves: every event is at its start")
		require.NotEmpty(t, lifecycleTypes(t, store, "old"))
		// A newer instance, inside the retention when the prune runs (and
		// holding the newest event, which a prune always keeps).
		clk.Add(90 * time.Second)
		newer, err := greet.Create(t.Context(), workflow.CreateOptions[greetParams]{ID: "new", Params: greetParams{Name: "New"}})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, waitDone(t, newer).Status)
		kept := lifecycleTypes(t, store, "new")
		require.NotEmpty(t, kept)
		// The first tick, two minutes on, finds the first instance's events
		// older than the retention, and not the second's.
		clk.Add(30 * time.Second)
		require.Eventually(t, func() bool {
			return len(lifecycleTypes(t, store, "old")) == 0
		}, 10*time.Second, 10*time.Millisecond)
		require.Equal(t, kept, lifecycleTypes(t, store, "new"))
	})
}

func TestConfigRejectsNegativeLifecycleDurations(t *testing.T) {
	t.Parallel()
	_, err := duraflow.New(testharness.SQLiteMemory.NewStore(t), &duraflow.Config{
		Registry: workflow.NewRegistry(), LifecycleRetention: -time.Hour, LifecyclePruneInterval: -time.Second,
	})
	require.ErrorContains(t, err, "Config.LifecycleRetention -1h0m0s is negative")
	require.ErrorContains(t, err, "Config.LifecyclePruneInterval -1s is negative")
}
