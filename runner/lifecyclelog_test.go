package runner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// requireStartedOnce checks that each run of each instance of wf has
// logged exactly one instance.started, before its other events of that
// run but after its creation or restart (and a wait for a limit), and
// returns the instances' events.
func requireStartedOnce(t *testing.T, store db.Store, wf string, ids ...string) map[string][]*db.LifecycleEvent {
	t.Helper()
	out := map[string][]*db.LifecycleEvent{}
	for _, id := range ids {
		events, err := store.(db.LifecycleStore).LifecycleList(t.Context(), &db.LifecycleListParams{WorkflowName: wf, InstanceID: id, Limit: 1000})
		require.NoError(t, err)
		out[id] = events
		var all []string
		for _, e := range events {
			all = append(all, fmt.Sprintf("%d:%s", e.RunNumber, e.Type))
		}
		runs := 0
		started := map[int]int{}
		for _, e := range events {
			runs = max(runs, e.RunNumber)
			if e.Type == db.LifecycleStarted {
				started[e.RunNumber]++
			}
		}
		require.Positive(t, runs, "%s logged nothing", id)
		for run := 1; run <= runs; run++ {
			require.Equal(t, 1, started[run], "%s run %d logs one instance.started: %v", id, run, all)
		}
		// Within a run, only its creation, restart, a wait for a limit and
		// a pause or resume while queued come before its start.
		seen := map[int]bool{}
		for _, e := range events {
			switch e.Type {
			case db.LifecycleStarted:
				seen[e.RunNumber] = true
			case db.LifecycleCreated, db.LifecycleRestarted, db.LifecycleWaiting, db.LifecyclePaused, db.LifecycleResumed,
				db.LifecycleTerminated, db.LifecycleEventReceived:
			default:
				require.True(t, seen[e.RunNumber], "%s run %d: %s before instance.started: %v", id, e.RunNumber, e.Type, all)
			}
		}
	}
	return out
}

// TestLifecycleLogStartsEveryRunOnce: a run a runner claims logs
// instance.started with its first checkpoint, at the time the claim
// started it, so every run logs exactly one: claimed ones, a restart's new
// run, one paused before it started, and one a release admitted.
func TestLifecycleLogStartsEveryRunOnce(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		ctx := h.Context()
		w := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "one", func(ctx context.Context) (int, error) { return 1, nil }); err != nil {
				return "", err
			}
			if err := step.Sleep("nap", time.Minute); err != nil {
				return "", err
			}
			return workflow.Do(step, "two", func(ctx context.Context) (string, error) { return "done", nil })
		}, workflow.WithMaxRunning(1))
		var p *workflow.Instance[string]
		for _, id := range []string{"a", "b", "p"} {
			inst, err := w.Create(ctx, workflow.CreateOptions[any]{ID: id})
			require.NoError(t, err)
			p = inst
		}
		// b and p wait for a's slot; p is paused and resumed meanwhile.
		require.NoError(t, p.Pause(ctx))
		require.NoError(t, p.Resume(ctx))
		for range 3 {
			h.RunUntilIdle()
			h.Advance(time.Minute)
		}
		for _, id := range []string{"a", "b", "p"} {
			h.RequireStatus("w", id, dftype.StatusComplete)
		}
		_, err := h.Client.Restart(ctx, "w", "a")
		require.NoError(t, err)
		for range 2 {
			h.RunUntilIdle()
			h.Advance(time.Minute)
		}
		h.RequireStatus("w", "a", dftype.StatusComplete)

		events := requireStartedOnce(t, h.Store, "w", "a", "b", "p")
		require.Equal(t, 2, events["a"][len(events["a"])-1].RunNumber, "a ran twice")
		for _, id := range []string{"b", "p"} {
			var waits []string
			for _, e := range events[id] {
				if e.Type == db.LifecycleWaiting && e.RunNumber == 1 && e.Detail != "sleep" {
					waits = append(waits, e.Detail)
				}
			}
			require.Equal(t, []string{"limit:" + db.WorkflowScope("w")}, waits, "%s waited for the slot once", id)
		}
		info := h.Status("w", "b")
		for _, e := range events["b"] {
			if e.Type == db.LifecycleStarted {
				require.True(t, e.At.Equal(*info.StartedAt), "instance.started is at the run's start: %s, %s", e.At, info.StartedAt)
			}
		}
	})
}

// TestLifecycleLogStartsEagerRunsOnce: a run an eager create started logs
// instance.started in the create's transaction and not again at its first
// checkpoint; a run a release started eagerly in a free slot of the
// releasing runner (or, when the loop's claim held the slots then, a claim)
// logs it with its first checkpoint.
func TestLifecycleLogStartsEagerRunsOnce(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		ctx := context.Background()
		reg := workflow.NewRegistry()
		gated := func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			_, err := step.WaitForEvent("gate", workflow.WaitOptions{Type: "go"})
			return "done", err
		}
		workflow.MustRegister(reg, "u", gated)
		workflow.MustRegister(reg, "w", gated, workflow.WithMaxRunning(1))
		r, err := runner.New(&runner.Config{
			Store: store, Registry: reg, Logger: quietLogger, ID: "runner-1", MaxConcurrency: 4,
			PollInterval: time.Hour, // woken by the client: no claim in flight holds the slots at a create
		})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
		require.Eventually(t, func() bool { return r.Polls() >= 1 }, 30*time.Second, time.Millisecond)
		c, err := client.New(&client.Config{Store: store, Registry: reg, WakeFunc: func(string) { r.Notify() }, EagerStarter: r})
		require.NoError(t, err)
		waitStatus := func(wf, id string, want dftype.InstanceStatus) {
			t.Helper()
			require.Eventually(t, func() bool {
				info, err := c.Get(ctx, wf, id)
				return err == nil && info.Status == want
			}, 20*time.Second, 5*time.Millisecond, "%s %s", id, want)
		}
		_, err = c.Create(ctx, "u", dftype.CreateRequest{ID: "eager"})
		require.NoError(t, err)
		waitStatus("u", "eager", dftype.StatusWaiting)
		require.Equal(t, int64(1), r.EagerStarts(), "the create started it")

		for _, id := range []string{"first", "second"} {
			_, err = c.Create(ctx, "w", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		waitStatus("w", "first", dftype.StatusWaiting)
		require.Equal(t, int64(1), r.Claimed(), "a limited create is claimed")
		require.NoError(t, c.SendEvent(ctx, "w", "first", "go", nil))
		waitStatus("w", "second", dftype.StatusWaiting)
		for _, ref := range [][2]string{{"w", "second"}, {"u", "eager"}} {
			require.NoError(t, c.SendEvent(ctx, ref[0], ref[1], "go", nil))
			waitStatus(ref[0], ref[1], dftype.StatusComplete)
		}
		requireStartedOnce(t, store, "w", "first", "second")
		requireStartedOnce(t, store, "u", "eager")
	})
}
