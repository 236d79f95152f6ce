package runner_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type withHidden struct {
	Shown  string         `json:"shown"`
	Hidden string         `json:"-"`
	Map    map[string]any `json:"map"`
}

// TestResultsAreJSONRoundTrippedOnFirstRun checks that the first run sees a
// step result exactly as replay will: after a trip through JSON.
func TestResultsAreJSONRoundTrippedOnFirstRun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		type seen struct {
			First  withHidden `json:"first"`
			Replay withHidden `json:"replay"`
		}
		var firstRun withHidden
		workflow.MustRegister(h.Registry, "rt", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (withHidden, error) {
			v, err := workflow.Do(step, "make", func(ctx context.Context) (withHidden, error) {
				return withHidden{Shown: "a", Hidden: "lost in JSON", Map: map[string]any{"n": 1}}, nil
			})
			if err != nil {
				return v, err
			}
			if firstRun.Shown == "" {
				firstRun = v
			}
			if err := step.Sleep("force a replay", time.Second); err != nil {
				return v, err
			}
			return v, nil
		})
		_, err := h.Client.Create(h.Context(), "rt", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var replayed withHidden
		h.RequireOutput("rt", "x", &replayed)
		want := withHidden{Shown: "a", Map: map[string]any{"n": float64(1)}}
		require.Equal(t, want, firstRun, "the first run saw the decoded JSON, not the Go value")
		require.Equal(t, want, replayed)
	})
}

// TestPollingFindsWorkWithoutWakeups checks that a runner nobody wakes still
// picks up due work within one poll interval.
func TestPollingFindsWorkWithoutWakeups(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		reg := workflow.NewRegistry()
		ran := make(chan string, 1)
		workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			ran <- ev.InstanceID
			return "ok", nil
		})
		r, err := runner.New(&runner.Config{Store: store, Registry: reg, Clock: clk, Logger: quietLogger, PollInterval: 5 * time.Second})
		require.NoError(t, err)
		require.NoError(t, r.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })

		// The first poll happens at start and finds nothing; then a create whose
		// wake-up is lost (no WakeFunc).
		c, err := client.New(&client.Config{Store: store, Registry: reg, Clock: clk})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return r.Polls() >= 1 }, 10*time.Second, time.Millisecond)
		_, err = c.Create(context.Background(), "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		select {
		case <-ran:
			t.Fatal("ran before any poll or wake-up")
		case <-time.After(50 * time.Millisecond):
		}
		clk.Add(5 * time.Second)
		select {
		case id := <-ran:
			require.Equal(t, "x", id)
		case <-time.After(10 * time.Second):
			t.Fatal("the poll did not find the work")
		}
	})
}

func TestInstanceWait(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "waited", nil
		})
		inst, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "x"})
		require.NoError(t, err)

		short, cancel := context.WithTimeout(h.Context(), 20*time.Millisecond)
		defer cancel()
		_, err = inst.Wait(short, time.Millisecond)
		require.ErrorIs(t, err, context.DeadlineExceeded, "Wait gives up with the context")

		done := make(chan *workflow.Status[string])
		go func() {
			st, err := inst.Wait(h.Context(), time.Millisecond)
			require.NoError(t, err)
			done <- st
		}()
		h.RunUntilIdle()
		st := <-done
		require.Equal(t, dftype.StatusComplete, st.Status)
		require.Equal(t, "waited", st.Output)
	})
}

func TestRunDueLimitedStepBudget(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var ran atomic.Int32
		wf := workflow.MustRegister(h.Registry, "five", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			for i := range 5 {
				if _, err := workflow.Do(step, fmt.Sprintf("s%d", i), func(ctx context.Context) (int32, error) { return ran.Add(1), nil }); err != nil {
					return 0, err
				}
			}
			return int(ran.Load()), nil
		})
		_, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "x"})
		require.NoError(t, err)

		n, err := h.Runner.RunDueLimited(h.Context(), 10, 3)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.EqualValues(t, 3, ran.Load(), "the budget of three step attempts was spent")
		h.RequireStatus("five", "x", dftype.StatusWaiting)

		n, err = h.Runner.RunDueLimited(h.Context(), 10, 3)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the yielded run is due at once")
		var out int
		h.RequireOutput("five", "x", &out)
		require.Equal(t, 5, out)
	})
}

func TestRunSeesInstanceMetadata(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "meta", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return string(ev.Metadata), nil
		})
		_, err := h.Client.Create(h.Context(), "meta", dftype.CreateRequest{ID: "x", Metadata: []byte(`{"trigger":{"type":"api"}}`)})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("meta", "x", &out)
		require.JSONEq(t, `{"trigger":{"type":"api"}}`, out)
	})
}
