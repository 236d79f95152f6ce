package runner_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestPause(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {

		t.Run("QueuedPausesAtOnceAndResumes", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var calls atomic.Int32
			wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "s", func(ctx context.Context) (int, error) { return int(calls.Add(1)), nil })
			})
			inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "q"})
			require.NoError(t, err)
			require.NoError(t, inst.Pause(h.Context()))
			h.RequireStatus("w", "q", dftype.StatusPaused)
			require.NoError(t, inst.Pause(h.Context()), "pausing a paused instance is a no-op")
			h.RunUntilIdle()
			require.Zero(t, calls.Load(), "a paused instance is never run")
			require.NoError(t, inst.Resume(h.Context()))
			h.RequireStatus("w", "q", dftype.StatusQueued)
			h.RunUntilIdle()
			var out int
			h.RequireOutput("w", "q", &out)
			require.Equal(t, 1, out)
		})

		t.Run("WaitingPausesAtOnceTimersKeepCounting", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
				if err := step.Sleep("nap", time.Hour); err != nil {
					return "", err
				}
				return "awake", nil
			})
			inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "w1"})
			require.NoError(t, err)
			h.RunDue()
			h.RequireStatus("w", "w1", dftype.StatusWaiting)
			require.NoError(t, inst.Pause(h.Context()))
			h.RequireStatus("w", "w1", dftype.StatusPaused)
			h.Advance(2 * time.Hour)
			require.Zero(t, h.RunDue(), "paused instances are not claimed even when their timer passed")
			require.NoError(t, inst.Resume(h.Context()))
			require.Equal(t, 1, h.RunDue(), "the sleep elapsed while paused, so resume completes it at once")
			var out string
			h.RequireOutput("w", "w1", &out)
			require.Equal(t, "awake", out)
		})

		t.Run("RunningParksAtNextStepBoundary", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			inStep := make(chan struct{})
			proceed := make(chan struct{})
			var second atomic.Int32
			wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
				if _, err := workflow.Do(step, "first", func(ctx context.Context) (int, error) {
					close(inStep)
					<-proceed
					return 1, nil
				}); err != nil {
					return "", err
				}
				if _, err := workflow.Do(step, "second", func(ctx context.Context) (int, error) {
					return int(second.Add(1)), nil
				}); err != nil {
					return "", err
				}
				return "done", nil
			})
			inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "r"})
			require.NoError(t, err)
			ran := make(chan int)
			go func() { ran <- h.RunDue() }()
			<-inStep
			h.RequireStatus("w", "r", dftype.StatusRunning)
			require.NoError(t, inst.Pause(h.Context()))
			h.RequireStatus("w", "r", dftype.StatusWaitingForPause)
			close(proceed)
			require.Equal(t, 1, <-ran)

			h.RequireStatus("w", "r", dftype.StatusPaused)
			require.Zero(t, second.Load(), "no step starts after the pause boundary")
			hist := h.History("w", "r")
			require.Len(t, hist.Steps, 1, "the step that was running when pause was requested completed")
			require.Equal(t, "complete", hist.Steps[0].Status)

			require.NoError(t, inst.Resume(h.Context()))
			h.RunUntilIdle()
			var out string
			h.RequireOutput("w", "r", &out)
			require.Equal(t, "done", out)
			require.EqualValues(t, 1, second.Load())
		})
	})
}

func TestTerminateAndTerminalErrors(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if err := step.Sleep("nap", time.Hour); err != nil {
				return "", err
			}
			return "awake", nil
		})
		inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "t"})
		require.NoError(t, err)
		h.RunDue()
		require.NoError(t, inst.Terminate(h.Context()))
		h.RequireStatus("w", "t", dftype.StatusTerminated)
		h.Advance(2 * time.Hour)
		require.Zero(t, h.RunDue(), "a terminated instance never runs")
		_, err = h.Store.TaskGet(h.Context(), db.InstanceRef{WorkflowName: "w", ID: "t"})
		require.ErrorIs(t, err, db.ErrNotFound, "its task was deleted")

		require.ErrorIs(t, inst.Terminate(h.Context()), workflow.ErrInstanceTerminal)
		require.ErrorIs(t, inst.Pause(h.Context()), workflow.ErrInstanceTerminal)
		require.NoError(t, inst.Resume(h.Context()), "resume is a no-op on anything but a paused instance")
		h.RequireStatus("w", "t", dftype.StatusTerminated)
		require.ErrorIs(t, inst.SendEvent(h.Context(), "any", nil), workflow.ErrInstanceTerminal)
		hist := h.History("w", "t")
		require.Empty(t, hist.Events, "an event for a terminal instance is not stored")

		// A complete instance is terminal too.
		done := workflow.MustRegister(h.Registry, "quick", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) { return 7, nil })
		q, err := done.Create(h.Context(), workflow.CreateOptions[any]{ID: "q"})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("quick", "q", dftype.StatusComplete)
		require.ErrorIs(t, q.Pause(h.Context()), workflow.ErrInstanceTerminal)
		require.ErrorIs(t, q.Terminate(h.Context()), workflow.ErrInstanceTerminal)
	})
}

func TestRestart(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var calls atomic.Int32
		wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "count", func(ctx context.Context) (int32, error) { return calls.Add(1), nil }); err != nil {
				return "", err
			}
			return workflow.WaitForEvent[string](step, "wait", workflow.WaitOptions{Type: "go"})
		})
		inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "r"})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.SendEvent("w", "r", "go", "first run")
		h.RunUntilIdle()
		var out string
		h.RequireOutput("w", "r", &out)
		require.Equal(t, "first run", out)

		// An event sent now belongs to run 1 and must not reach run 2.
		require.ErrorIs(t, inst.SendEvent(h.Context(), "go", "late"), workflow.ErrInstanceTerminal)
		require.NoError(t, inst.Restart(h.Context()))
		info := h.RequireStatus("w", "r", dftype.StatusQueued)
		require.Equal(t, 2, info.RunNumber)
		require.Nil(t, info.Output)
		h.RunUntilIdle()
		h.RequireStatus("w", "r", dftype.StatusWaiting)
		require.EqualValues(t, 2, calls.Load(), "the new run runs its steps again")
		h.SendEvent("w", "r", "go", "second run")
		h.RunUntilIdle()
		h.RequireOutput("w", "r", &out)
		require.Equal(t, "second run", out)

		old, err := h.Client.History(h.Context(), "w", "r", client.HistoryParams{Run: 1})
		require.NoError(t, err)
		require.Len(t, old.Steps, 2, "the first run's history is kept")
		require.Len(t, old.Events, 1)
		require.Equal(t, "wait", old.Events[0].ConsumedBy)
	})
}

func TestRestartDropsEventsOfEarlierRun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if err := step.Sleep("nap", time.Minute); err != nil {
				return "", err
			}
			return workflow.WaitForEvent[string](step, "wait", workflow.WaitOptions{Type: "go"})
		})
		inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "r"})
		require.NoError(t, err)
		h.RunDue()
		// Buffered for run 1, which is restarted before it consumes it.
		h.SendEvent("w", "r", "go", "for run 1")
		require.NoError(t, inst.Restart(h.Context()))
		h.RunUntilIdle()
		h.RequireStatus("w", "r", dftype.StatusWaiting)
		h.SendEvent("w", "r", "go", "for run 2")
		h.RunUntilIdle()
		var out string
		h.RequireOutput("w", "r", &out)
		require.Equal(t, "for run 2", out)
	})
}
