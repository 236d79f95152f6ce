package runner_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// failing returns a step function that fails its first n attempts.
func failing(n int, calls *atomic.Int32) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		calls.Add(1)
		if a := workflow.Attempt(ctx); a <= n {
			return 0, errors.New("boom")
		}
		return workflow.Attempt(ctx), nil
	}
}

func TestRetryJitter(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		// With the draw fixed at its ends, the recorded retry time is the
		// ends of the documented spread, ±JitterFraction of the wait.
		for _, tc := range []struct {
			name string
			draw float64
			want time.Duration
		}{
			{"low", 0, 8 * time.Second},
			{"high", 1, 12 * time.Second},
			{"middle", 0.5, 10 * time.Second},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := testharness.New(t, testharness.WithBackend(b), testharness.WithRunnerConfig(func(c *runner.Config) {
					c.JitterFunc = func() float64 { return tc.draw }
				}))
				var calls atomic.Int32
				workflow.MustRegister(h.Registry, "j", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
					return workflow.Do(step, "call", failing(1, &calls),
						workflow.WithRetries(workflow.RetryPolicy{Limit: 3, Delay: 10 * time.Second, Backoff: workflow.BackoffConstant}))
				})
				_, err := h.Client.Create(h.Context(), "j", dftype.CreateRequest{ID: "x"})
				require.NoError(t, err)
				start := h.Now()
				h.RunDue()
				st := h.History("j", "x").Steps[0]
				require.Equal(t, "retrying", st.Status)
				require.Equal(t, start.Add(tc.want), *st.NextRetryAt)
				h.RunUntilIdle()
				h.RequireStatus("j", "x", dftype.StatusComplete)
				require.Equal(t, start.Add(tc.want), h.Now(), "the retry ran at the recorded time")
			})
		}

		t.Run("RandomStaysInBounds", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var calls atomic.Int32
			workflow.MustRegister(h.Registry, "j", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "call", failing(1, &calls),
					workflow.WithRetries(workflow.RetryPolicy{Limit: 3, Delay: 10 * time.Second, Backoff: workflow.BackoffConstant}))
			})
			for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				_, err := h.Client.Create(h.Context(), "j", dftype.CreateRequest{ID: id})
				require.NoError(t, err)
			}
			start := h.Now()
			h.RunDue()
			for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
				next := *h.History("j", id).Steps[0].NextRetryAt
				require.GreaterOrEqual(t, next.Sub(start), 8*time.Second, id)
				require.LessOrEqual(t, next.Sub(start), 12*time.Second, id)
			}
		})
	})
}

func TestRetryMaxDelay(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithRunnerConfig(func(c *runner.Config) {
			c.JitterFunc = func() float64 { return 1 } // the highest jitter: MaxDelay still caps it
		}))
		start := h.Now()
		log := &attemptLog{}
		workflow.MustRegister(h.Registry, "m", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
				log.add(h.Clock.Now().Sub(start), workflow.Attempt(ctx))
				if workflow.Attempt(ctx) < 5 {
					return 0, errors.New("boom")
				}
				return 1, nil
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: 10, Delay: 10 * time.Second, MaxDelay: 15 * time.Second}))
		})
		_, err := h.Client.Create(h.Context(), "m", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("m", "x", dftype.StatusComplete)
		times, _ := log.get()
		// 12 s (10 s +20%), then 15 s each: 24 s, 48 s and 96 s are capped.
		require.Equal(t, []time.Duration{0, 12 * time.Second, 27 * time.Second, 42 * time.Second, 57 * time.Second}, times)
	})
}

func TestRetryUnlimited(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for _, limit := range []int{math.MaxInt, 1<<32 + 5, workflow.UnlimitedRetries} {
			h := testharness.New(t, testharness.WithBackend(b))
			var calls atomic.Int32
			workflow.MustRegister(h.Registry, "u", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "call", failing(3, &calls),
					workflow.WithRetries(workflow.RetryPolicy{Limit: limit, Delay: time.Second}))
			})
			_, err := h.Client.Create(h.Context(), "u", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunDue()
			st := h.History("u", "x").Steps[0]
			require.Equal(t, workflow.UnlimitedAttempts, st.MaxAttempts, "limit %d while retrying", limit)
			h.RunUntilIdle()
			h.RequireStatus("u", "x", dftype.StatusComplete)
			st = h.History("u", "x").Steps[0]
			require.Equal(t, workflow.UnlimitedAttempts, st.MaxAttempts, "limit %d", limit)
			require.Equal(t, 4, st.Attempts)
		}
	})
}

func TestEveryAttemptInHistory(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "a", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
				if n := workflow.Attempt(ctx); n <= 2 {
					return 0, errors.New("attempt failed")
				}
				return 7, nil
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: 5, Delay: time.Second, NoJitter: true}))
		})
		start := h.Now()
		_, err := h.Client.Create(h.Context(), "a", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("a", "x", dftype.StatusComplete)
		st := h.History("a", "x").Steps[0]
		require.Len(t, st.AttemptLog, 3)
		for i, a := range st.AttemptLog {
			require.Equal(t, i+1, a.Attempt)
			require.Equal(t, 1, a.RunAttempt)
			require.NotNil(t, a.StartedAt)
			require.NotNil(t, a.EndedAt)
		}
		require.Equal(t, "failed", st.AttemptLog[0].Status)
		require.Equal(t, "attempt failed", st.AttemptLog[0].Error.Message)
		require.Equal(t, start, *st.AttemptLog[0].StartedAt)
		require.Equal(t, start.Add(time.Second), *st.AttemptLog[1].StartedAt)
		require.Equal(t, "failed", st.AttemptLog[1].Status)
		require.Equal(t, "complete", st.AttemptLog[2].Status)
		require.Nil(t, st.AttemptLog[2].Error)
		require.Equal(t, start.Add(3*time.Second), *st.AttemptLog[2].StartedAt)
		require.Equal(t, start.Add(3*time.Second), *st.StartedAt)
	})
}

func TestRunningStepVisible(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		started, release := make(chan struct{}), make(chan struct{})
		workflow.MustRegister(h.Registry, "r", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "slow", func(ctx context.Context) (int, error) {
				close(started)
				<-release
				return 1, nil
			})
		})
		_, err := h.Client.Create(h.Context(), "r", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		start := h.Now()
		done := make(chan struct{})
		go func() { defer close(done); h.RunDue() }()
		<-started
		require.Empty(t, h.History("r", "x").Running, "not before the first heartbeat")
		// The lease heartbeat reports it: visible within one interval. (The
		// heartbeat's ticker may start after this goroutine moves the
		// clock, so each poll moves it one interval again.)
		require.Eventually(t, func() bool {
			h.Advance(runner.DefaultLeaseDuration / 3)
			return len(h.History("r", "x").Running) == 1
		}, 5*time.Second, 20*time.Millisecond)
		running := h.History("r", "x").Running[0]
		require.Equal(t, client.RunningStepInfo{Name: "slow", Attempt: 1, StartedAt: start}, *running)
		close(release)
		<-done
		h.RequireStatus("r", "x", dftype.StatusComplete)
		require.Empty(t, h.History("r", "x").Running)
	})
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("EndsASleepingInstance", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var after atomic.Bool
			workflow.MustRegister(h.Registry, "s", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				if err := step.Sleep("nap", 2*time.Hour); err != nil {
					return 0, err
				}
				after.Store(true)
				return 1, nil
			}, workflow.WithDeadline(time.Hour))
			start := h.Now()
			info, err := h.Client.Create(h.Context(), "s", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			require.Equal(t, start.Add(time.Hour), *info.DeadlineAt)
			h.RunDue()
			h.RequireStatus("s", "x", dftype.StatusWaiting)
			h.RunUntilIdle()
			got := h.RequireStatus("s", "x", dftype.StatusErrored)
			require.Equal(t, workflow.ErrorNameDeadlineExceeded, got.Error.Name)
			require.Equal(t, start.Add(time.Hour), h.Now(), "it ended at its deadline, not at the sleep's end")
			require.False(t, after.Load())
		})

		t.Run("EndsAnInstanceWaitingForAnEvent", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				_, err := step.WaitForEvent("approve", workflow.WaitOptions{Type: "approve", Timeout: 24 * time.Hour})
				return 1, err
			})
			start := h.Now()
			// A per-create deadline, for a workflow with none.
			_, err := h.Client.Create(h.Context(), "w", dftype.CreateRequest{ID: "x", Deadline: start.Add(30 * time.Minute)})
			require.NoError(t, err)
			h.RunDue()
			h.RequireStatus("w", "x", dftype.StatusWaiting)
			h.Advance(29 * time.Minute)
			require.Zero(t, h.RunDue(), "nothing due before the deadline")
			h.Advance(time.Minute)
			h.RunDue()
			got := h.RequireStatus("w", "x", dftype.StatusErrored)
			require.Equal(t, workflow.ErrorNameDeadlineExceeded, got.Error.Name)
		})

		t.Run("CancelsARunningStep", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			cause := make(chan error, 1)
			started := make(chan workflow.StepInfo, 1)
			workflow.MustRegister(h.Registry, "c", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "long", func(ctx context.Context) (int, error) {
					info, _ := workflow.StepInfoFromContext(ctx)
					started <- info
					<-ctx.Done()
					cause <- context.Cause(ctx)
					return 0, ctx.Err()
				})
			}, workflow.WithDeadline(time.Minute))
			start := h.Now()
			_, err := h.Client.Create(h.Context(), "c", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			done := make(chan struct{})
			go func() { defer close(done); h.RunDue() }()
			info := <-started
			require.Equal(t, start.Add(time.Minute), info.Deadline)
			h.Advance(time.Minute)
			require.ErrorIs(t, <-cause, workflow.ErrDeadlineExceeded)
			<-done
			got := h.RequireStatus("c", "x", dftype.StatusErrored)
			require.Equal(t, workflow.ErrorNameDeadlineExceeded, got.Error.Name)
		})

		t.Run("BadInput", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			noop := func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) { return 1, nil }
			_, err := workflow.Register(h.Registry, "neg", noop, workflow.WithDeadline(-time.Second))
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			_, err = workflow.Register(h.Registry, "neg2", noop, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 1, Delay: -time.Second}))
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			_, err = workflow.Register(h.Registry, "neg3", noop, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 1, MaxDelay: -time.Second}))
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)

			workflow.MustRegister(h.Registry, "ok", noop)
			_, err = h.Client.Create(h.Context(), "ok", dftype.CreateRequest{ID: "past", Deadline: h.Now().Add(-time.Second)})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			_, err = h.Client.Create(h.Context(), "ok", dftype.CreateRequest{ID: "now", Deadline: h.Now()})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			_, err = h.Client.CreateBatch(h.Context(), "ok", []dftype.CreateRequest{{ID: "b1"}, {ID: "b2", Deadline: h.Now().Add(-time.Hour)}})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			for _, id := range []string{"past", "now", "b1", "b2"} {
				_, err := h.Client.Get(h.Context(), "ok", id)
				require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "nothing written for %s", id)
			}
		})
	})
}

func TestWorkflowRetry(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("ReplaysCompletedStepsAndRerunsTheFailedOne", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var first, second atomic.Int32
			workflow.MustRegister(h.Registry, "wr", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				a, err := workflow.Do(step, "first", func(ctx context.Context) (int, error) {
					first.Add(1)
					return 40, nil
				})
				if err != nil {
					return 0, err
				}
				c, err := workflow.Do(step, "second", func(ctx context.Context) (int, error) {
					if second.Add(1) == 1 {
						return 0, errors.New("downstream down")
					}
					return 2, nil
				}, workflow.WithNoRetries())
				if err != nil {
					return 0, err
				}
				return a + c, nil
			}, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 2, Delay: time.Minute, NoJitter: true}))
			start := h.Now()
			_, err := h.Client.Create(h.Context(), "wr", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunDue()
			waiting := h.RequireStatus("wr", "x", dftype.StatusWaiting)
			require.Equal(t, 2, waiting.RunAttempt, "the next run attempt is recorded")
			require.Contains(t, waiting.Error.Message, "downstream down")
			h.RunUntilIdle()
			var out int
			h.RequireOutput("wr", "x", &out)
			require.Equal(t, 42, out)
			require.Equal(t, start.Add(time.Minute), h.Now(), "the retry waited its backoff")
			require.EqualValues(t, 1, first.Load(), "the completed step was replayed, not called again")
			require.EqualValues(t, 2, second.Load(), "the failed step ran again")
			hist := h.History("wr", "x")
			require.Equal(t, 2, hist.Instance.RunAttempt)
			require.Nil(t, hist.Instance.Error, "a run that completed has no error")
			sec := hist.Steps[1]
			require.Equal(t, "second", sec.Name)
			require.Len(t, sec.AttemptLog, 2)
			require.Equal(t, []int{1, 2}, []int{sec.AttemptLog[0].RunAttempt, sec.AttemptLog[1].RunAttempt})
			require.Equal(t, "failed", sec.AttemptLog[0].Status)
			require.Equal(t, "complete", sec.AttemptLog[1].Status)
		})

		t.Run("BoundedAttempts", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var runs atomic.Int32
			workflow.MustRegister(h.Registry, "wr", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "s", func(ctx context.Context) (int, error) {
					runs.Add(1)
					return 0, errors.New("always")
				}, workflow.WithNoRetries())
			}, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 2, Delay: time.Minute, NoJitter: true}))
			_, err := h.Client.Create(h.Context(), "wr", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunUntilIdle()
			got := h.RequireStatus("wr", "x", dftype.StatusErrored)
			require.EqualValues(t, 3, runs.Load(), "the first run and 2 retries")
			require.Equal(t, 3, got.RunAttempt)
			require.Len(t, h.History("wr", "x").Steps[0].AttemptLog, 3)
		})

		t.Run("NonRetryableAndTerminatedAreFinal", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var runs atomic.Int32
			workflow.MustRegister(h.Registry, "nr", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				runs.Add(1)
				return 0, workflow.NewNonRetryableError("Fatal", "no")
			}, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 5, Delay: time.Minute}))
			_, err := h.Client.Create(h.Context(), "nr", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunUntilIdle()
			h.RequireStatus("nr", "x", dftype.StatusErrored)
			require.EqualValues(t, 1, runs.Load())

			workflow.MustRegister(h.Registry, "t", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				_, err := workflow.Do(step, "s", func(ctx context.Context) (int, error) { return 0, errors.New("x") }, workflow.WithNoRetries())
				return 0, err
			}, workflow.WithWorkflowRetry(workflow.RetryPolicy{Limit: 5, Delay: time.Minute}))
			_, err = h.Client.Create(h.Context(), "t", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunDue()
			h.RequireStatus("t", "x", dftype.StatusWaiting)
			_, err = h.Client.Terminate(h.Context(), "t", "x")
			require.NoError(t, err)
			h.RunUntilIdle()
			h.RequireStatus("t", "x", dftype.StatusTerminated)
		})
	})
}
