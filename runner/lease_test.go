package runner_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// twoRunners builds two runners over one store with a shared fake clock, both
// executing blockingWorkflow.
func twoRunners(t *testing.T, backend testharness.Backend, lease time.Duration) (a, b *runner.Runner, c *client.Client, clk *clock.Mock, store db.Store, started chan string, release chan struct{}) {
	t.Helper()
	store = backend.NewStore(t)
	clk = clock.NewMock()
	clk.Set(testharness.DefaultStart)
	var calls atomic.Int32
	started = make(chan string, 2)
	release = make(chan struct{})
	mk := func(id string) *runner.Runner {
		reg := workflow.NewRegistry()
		blockingWorkflow(reg, started, release, &calls)
		r, err := runner.New(&runner.Config{Store: store, Registry: reg, Clock: clk, Logger: quietLogger, ID: id, LeaseDuration: lease})
		require.NoError(t, err)
		if c == nil {
			c, err = client.New(&client.Config{Store: store, Registry: reg, Clock: clk})
			require.NoError(t, err)
		}
		return r
	}
	a, b = mk("a"), mk("b")
	return
}

func TestLongStepRenewsItsLease(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		lease := 30 * time.Second
		ra, rb, c, clk, store, started, release := twoRunners(t, b, lease)
		ctx := context.Background()
		_, err := c.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		aDone := make(chan int)
		go func() { n, _ := ra.RunDue(ctx, 1); aDone <- n }()
		<-started

		ref := db.InstanceRef{WorkflowName: "w", ID: "x"}
		for range 9 { // 90 seconds: three leases' worth
			clk.Add(10 * time.Second)
			require.Eventually(t, func() bool {
				task, err := store.TaskGet(ctx, ref)
				return err == nil && task.LockedUntil != nil && task.LockedUntil.After(clk.Now().Add(lease/2))
			}, 10*time.Second, 5*time.Millisecond, "the heartbeat renews the lease")
			n, err := rb.RunDue(ctx, 1)
			require.NoError(t, err)
			require.Zero(t, n, "another runner cannot take a task whose holder heartbeats")
		}
		close(release)
		require.Equal(t, 1, <-aDone)
		info, err := c.Get(ctx, "w", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status)
		require.JSONEq(t, `"call 1"`, string(info.Output))
	})
}

func TestStopReleasesTasksForOtherRunners(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ra, rb, c, _, store, started, release := twoRunners(t, b, time.Minute)
		ctx := context.Background()
		_, err := c.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		aDone := make(chan struct{})
		go func() { _, _ = ra.RunDue(ctx, 1); close(aDone) }()
		<-started

		// A graceful stop whose deadline passes while a step still runs: the
		// runner cancels it and gives the task back instead of holding the lease.
		stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, ra.Stop(stopCtx), context.DeadlineExceeded)
		<-aDone
		task, err := store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "x"})
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusPending, task.Status)

		n, err := rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n, "another runner takes it at once, without waiting for the lease")
		close(release)
		info, err := c.Get(ctx, "w", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status)
	})
}

func TestStopWaitsForRunningWork(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ra, _, c, _, _, started, release := twoRunners(t, b, time.Minute)
		ctx := context.Background()
		_, err := c.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		require.NoError(t, ra.Start(ctx))
		ra.Notify()
		<-started
		stopped := make(chan error)
		go func() { stopped <- ra.Stop(ctx) }()
		select {
		case <-stopped:
			t.Fatal("Stop returned while a step was still running")
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		require.NoError(t, <-stopped)
		info, err := c.Get(ctx, "w", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status, "the step in flight finished and was committed")
	})
}

func TestPayloadLimitsInsideRuns(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		big := strings.Repeat("x", workflow.MaxPayloadBytes)
		workflow.MustRegister(h.Registry, "bigstep", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			_, err := workflow.Do(step, "huge", func(ctx context.Context) (string, error) { return big, nil })
			if !errors.Is(err, workflow.ErrPayloadTooLarge) && !strings.Contains(err.Error(), "payload too large") {
				return "", errors.New("an oversized result was accepted")
			}
			return err.Error(), nil
		})
		workflow.MustRegister(h.Registry, "bigout", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) { return big, nil })
		_, err := h.Client.Create(h.Context(), "bigstep", dftype.CreateRequest{ID: "s"})
		require.NoError(t, err)
		_, err = h.Client.Create(h.Context(), "bigout", dftype.CreateRequest{ID: "o"})
		require.NoError(t, err)
		h.RunUntilIdle()

		var msg string
		h.RequireOutput("bigstep", "s", &msg)
		require.Contains(t, msg, "limit is 1048576")
		hist := h.History("bigstep", "s")
		require.Equal(t, 1, hist.Steps[0].Attempts, "an oversized result is not retried")

		info := h.RequireStatus("bigout", "o", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, "workflow output")
	})
}

// heartbeatlessStore fails every heartbeat, as a database the runner cannot
// reach would, while its other calls go through: no heartbeat renews a
// lease.
type heartbeatlessStore struct {
	db.Store
}

func (s *heartbeatlessStore) TaskHeartbeat(context.Context, *db.TaskHeartbeatParams) error {
	return errors.New("heartbeat refused by the test")
}

// TestNoStepStartsPastTheLease: a runner whose lease ran out while a step
// ran (its heartbeats failed, or the process was stopped) records the step
// that finished, but starts no other: another runner may hold the instance
// by then. The next claim runs the rest, once.
func TestNoStepStartsPastTheLease(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		base := testharness.New(t, testharness.WithBackend(b))
		store := &heartbeatlessStore{Store: base.Store}
		h := testharness.New(t, testharness.WithStore(store))
		var aRuns, bRuns atomic.Int32
		workflow.MustRegister(h.Registry, "late", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			a, err := workflow.Do(step, "a", func(context.Context) (int, error) {
				aRuns.Add(1)
				// The step outlives the lease, and no heartbeat renews it.
				h.Advance(runner.DefaultLeaseDuration + time.Second)
				return 1, nil
			})
			if err != nil {
				return 0, err
			}
			return workflow.Do(step, "b", func(context.Context) (int, error) {
				bRuns.Add(1)
				return a + 1, nil
			})
		})
		_, err := h.Client.Create(h.Context(), "late", dftype.CreateRequest{ID: "l"})
		require.NoError(t, err)
		h.RunDue()
		require.Equal(t, int32(1), aRuns.Load())
		require.Zero(t, bRuns.Load(), "step b started after the lease had run out")
		st, ok := stepByKey(t, h, "late", "l")["a"]
		require.True(t, ok, "step a, which finished, is recorded")
		require.Equal(t, db.StepStatusComplete, st.Status)

		h.RunUntilIdle()
		var out int
		h.RequireOutput("late", "l", &out)
		require.Equal(t, 2, out)
		require.Equal(t, int32(1), aRuns.Load(), "step a ran once")
		require.Equal(t, int32(1), bRuns.Load(), "step b ran once")
	})
}

// stepByKey returns the steps of the instance's current run by name.
func stepByKey(t *testing.T, h *testharness.Harness, wf, id string) map[string]*db.Step {
	t.Helper()
	ref := db.InstanceRef{WorkflowName: wf, ID: id}
	inst, err := h.Store.InstanceGet(h.Context(), ref)
	require.NoError(t, err)
	steps, err := h.Store.StepList(h.Context(), &db.StepListParams{WorkflowName: wf, InstanceID: id, RunNumber: inst.RunNumber})
	require.NoError(t, err)
	out := map[string]*db.Step{}
	for _, s := range steps {
		out[s.Key] = s
	}
	return out
}
