package runner_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type sleepParams struct {
	Until time.Time `json:"until"`
}

func TestSleepWakesAtTheRightTime(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		start := h.Now()
		var wokeAt []time.Time
		workflow.MustRegister(h.Registry, "sleeper", func(ctx context.Context, ev workflow.Event[sleepParams], step workflow.Step) ([]time.Time, error) {
			if err := step.Sleep("first", 90*time.Second); err != nil {
				return nil, err
			}
			t1, err := workflow.Do(step, "t1", func(ctx context.Context) (time.Time, error) { return h.Clock.Now().UTC(), nil })
			if err != nil {
				return nil, err
			}
			if err := step.SleepUntil("until", ev.Payload.Until); err != nil {
				return nil, err
			}
			t2, err := workflow.Do(step, "t2", func(ctx context.Context) (time.Time, error) { return h.Clock.Now().UTC(), nil })
			if err != nil {
				return nil, err
			}
			wokeAt = []time.Time{t1, t2}
			return wokeAt, nil
		})
		until := start.Add(3 * time.Hour)
		_, err := h.Client.Create(h.Context(), "sleeper", dftype.CreateRequest{ID: "s", Params: mustJSON(t, sleepParams{Until: until})})
		require.NoError(t, err)

		h.RunDue()
		h.RequireStatus("sleeper", "s", dftype.StatusWaiting)
		h.Advance(89 * time.Second)
		require.Zero(t, h.RunDue(), "nothing is due one second before the wake time")
		h.Advance(time.Second)
		require.Equal(t, 1, h.RunDue())

		h.RunUntilIdle()
		var out []time.Time
		h.RequireOutput("sleeper", "s", &out)
		require.Equal(t, []time.Time{start.Add(90 * time.Second), until}, out)
	})
}

func TestSleepUntilPastGoesOnAtOnce(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "past", func(ctx context.Context, ev workflow.Event[sleepParams], step workflow.Step) (string, error) {
			if err := step.SleepUntil("past", ev.Payload.Until); err != nil {
				return "", err
			}
			if err := step.Sleep("zero", 0); err != nil {
				return "", err
			}
			return "done", nil
		})
		_, err := h.Client.Create(h.Context(), "past", dftype.CreateRequest{ID: "p", Params: mustJSON(t, sleepParams{Until: h.Now().Add(-time.Hour)})})
		require.NoError(t, err)
		require.Equal(t, 1, h.RunDue(), "one pass completes the instance")
		var out string
		h.RequireOutput("past", "p", &out)
		require.Equal(t, "done", out)
		hist := h.History("past", "p")
		require.Len(t, hist.Steps, 2)
		require.Equal(t, "complete", hist.Steps[0].Status)
	})
}

func TestSleepLimits(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "long", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			err := step.Sleep("too long", workflow.MaxSleep+time.Second)
			if !errors.Is(err, workflow.ErrInvalidRequest) {
				return "", errors.New("expected the sleep to be refused")
			}
			return err.Error(), nil
		})
		_, err := h.Client.Create(h.Context(), "long", dftype.CreateRequest{ID: "l"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("long", "l", &out)
		require.Contains(t, out, "longer than")
	})
}

// eventWorkflow waits for two "pay" events and records what it got.
func eventWorkflow(ctx context.Context, ev workflow.Event[any], step workflow.Step) ([]string, error) {
	var got []string
	for _, name := range []string{"first", "second"} {
		p, err := workflow.WaitForEvent[string](step, name, workflow.WaitOptions{Type: "pay", Timeout: time.Hour})
		if errors.Is(err, workflow.ErrEventTimeout) {
			got = append(got, "timeout")
			continue
		}
		if err != nil {
			return nil, err
		}
		got = append(got, p)
	}
	return got, nil
}

func TestWaitForEvent(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {

		t.Run("BufferedBeforeTheWaitOldestFirst", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			workflow.MustRegister(h.Registry, "ev", eventWorkflow)
			_, err := h.Client.Create(h.Context(), "ev", dftype.CreateRequest{ID: "e"})
			require.NoError(t, err)
			h.SendEvent("ev", "e", "other", "ignored")
			h.SendEvent("ev", "e", "pay", "one")
			h.SendEvent("ev", "e", "pay", "two")
			require.Equal(t, 1, h.RunDue(), "both waits complete in the first pass")
			var out []string
			h.RequireOutput("ev", "e", &out)
			require.Equal(t, []string{"one", "two"}, out)
			hist := h.History("ev", "e")
			require.Len(t, hist.Events, 3)
			require.Nil(t, hist.Events[0].DeliveredAt, "an event of another type is not consumed")
			require.Equal(t, "first", hist.Events[1].ConsumedBy)
			require.Equal(t, "second", hist.Events[2].ConsumedBy)
		})

		t.Run("SentWhileWaitingWakesIt", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			workflow.MustRegister(h.Registry, "ev", eventWorkflow)
			_, err := h.Client.Create(h.Context(), "ev", dftype.CreateRequest{ID: "e"})
			require.NoError(t, err)
			h.RunUntilIdle()
			h.RequireStatus("ev", "e", dftype.StatusWaiting)
			h.SendEvent("ev", "e", "other", "ignored")
			require.Zero(t, h.RunDue(), "an event of another type does not wake the instance")
			h.SendEvent("ev", "e", "pay", "one")
			require.Equal(t, 1, h.RunDue())
			h.RequireStatus("ev", "e", dftype.StatusWaiting)
			h.SendEvent("ev", "e", "pay", "two")
			h.RunUntilIdle()
			var out []string
			h.RequireOutput("ev", "e", &out)
			require.Equal(t, []string{"one", "two"}, out)
		})

		t.Run("TimeoutReturnsTimeoutError", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			workflow.MustRegister(h.Registry, "ev", eventWorkflow)
			_, err := h.Client.Create(h.Context(), "ev", dftype.CreateRequest{ID: "e"})
			require.NoError(t, err)
			h.RunUntilIdle()
			h.Advance(time.Hour - time.Second)
			require.Zero(t, h.RunDue())
			h.SendEvent("ev", "e", "pay", "one")
			h.RunUntilIdle()
			h.Advance(time.Hour)
			h.RunUntilIdle()
			var out []string
			h.RequireOutput("ev", "e", &out)
			require.Equal(t, []string{"one", "timeout"}, out)
			hist := h.History("ev", "e")
			require.Equal(t, "errored", hist.Steps[1].Status)
			require.Equal(t, workflow.ErrorNameEventTimeout, hist.Steps[1].Error.Name)
		})

		t.Run("SentWhilePausedDeliveredAfterResume", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			wf := workflow.MustRegister(h.Registry, "ev", eventWorkflow)
			inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "e"})
			require.NoError(t, err)
			h.RunUntilIdle()
			require.NoError(t, inst.Pause(h.Context()))
			h.RequireStatus("ev", "e", dftype.StatusPaused)
			h.SendEvent("ev", "e", "pay", "one")
			h.SendEvent("ev", "e", "pay", "two")
			h.RunUntilIdle()
			h.RequireStatus("ev", "e", dftype.StatusPaused)
			require.NoError(t, inst.Resume(h.Context()))
			h.RunUntilIdle()
			var out []string
			h.RequireOutput("ev", "e", &out)
			require.Equal(t, []string{"one", "two"}, out)
		})

		t.Run("InvalidOptions", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			workflow.MustRegister(h.Registry, "bad", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) ([]string, error) {
				var msgs []string
				_, err := step.WaitForEvent("a", workflow.WaitOptions{Type: "bad type!"})
				if !errors.Is(err, workflow.ErrInvalidEventType) {
					return nil, errors.New("bad type accepted")
				}
				msgs = append(msgs, err.Error())
				_, err = step.WaitForEvent("b", workflow.WaitOptions{Type: "ok", Timeout: 500 * time.Millisecond})
				if !errors.Is(err, workflow.ErrInvalidRequest) {
					return nil, errors.New("short timeout accepted")
				}
				return append(msgs, err.Error()), nil
			})
			_, err := h.Client.Create(h.Context(), "bad", dftype.CreateRequest{ID: "b"})
			require.NoError(t, err)
			h.RunUntilIdle()
			var out []string
			h.RequireOutput("bad", "b", &out)
			require.Len(t, out, 2)
		})
	})
}
