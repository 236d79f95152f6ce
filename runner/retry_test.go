package runner_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// attemptLog records when each attempt of a step ran, by the fake clock.
type attemptLog struct {
	mu    sync.Mutex
	times []time.Duration
	nums  []int
}

func (l *attemptLog) add(d time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.times = append(l.times, d)
	l.nums = append(l.nums, n)
}

func (l *attemptLog) get() ([]time.Duration, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.times...), append([]int(nil), l.nums...)
}

func TestRetryPolicyTiming(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		s := 10 * time.Second
		cases := []struct {
			backoff workflow.Backoff
			want    []time.Duration // offsets of attempts 1..4 from the first
		}{
			{workflow.BackoffConstant, []time.Duration{0, s, 2 * s, 3 * s}},
			{workflow.BackoffLinear, []time.Duration{0, s, 3 * s, 6 * s}},
			{workflow.BackoffExponential, []time.Duration{0, s, 3 * s, 7 * s}},
		}
		for _, tc := range cases {
			t.Run(string(tc.backoff), func(t *testing.T) {
				t.Parallel()
				h := testharness.New(t, testharness.WithBackend(b))
				start := h.Now()
				log := &attemptLog{}
				wf := workflow.MustRegister(h.Registry, "flaky", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
					return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
						n := workflow.Attempt(ctx)
						log.add(h.Clock.Now().Sub(start), n)
						if n < 4 {
							return 0, errors.New("boom")
						}
						return n, nil
					}, workflow.WithRetries(workflow.RetryPolicy{Limit: 5, Delay: s, Backoff: tc.backoff, NoJitter: true}))
				})
				_, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "f"})
				require.NoError(t, err)
				h.RunUntilIdle()
				var out int
				h.RequireOutput("flaky", "f", &out)
				require.Equal(t, 4, out)
				times, nums := log.get()
				require.Equal(t, tc.want, times)
				require.Equal(t, []int{1, 2, 3, 4}, nums)

				hist := h.History("flaky", "f")
				require.Len(t, hist.Steps, 1)
				require.Equal(t, "complete", hist.Steps[0].Status)
				require.Equal(t, 4, hist.Steps[0].Attempts)
			})
		}
	})
}

func TestRetryDefaultsAndLimits(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {

		t.Run("NonRetryableStopsAtOnce", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var calls atomic.Int32
			workflow.MustRegister(h.Registry, "nr", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
					calls.Add(1)
					return 0, workflow.NewNonRetryableError("CardDeclined", "card declined")
				})
			})
			_, err := h.Client.Create(h.Context(), "nr", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			start := h.Now()
			h.RunUntilIdle()
			info := h.RequireStatus("nr", "x", dftype.StatusErrored)
			require.EqualValues(t, 1, calls.Load())
			require.Equal(t, start, h.Now(), "no retry delay was waited")
			require.Equal(t, "CardDeclined", info.Error.Name)
			require.Contains(t, info.Error.Message, "card declined")
		})

		t.Run("ExhaustedDefaultPolicyErrorsInstance", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			start := h.Now()
			log := &attemptLog{}
			workflow.MustRegister(h.Registry, "ex", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
					log.add(h.Clock.Now().Sub(start), workflow.Attempt(ctx))
					return 0, errors.New("always")
				})
			})
			_, err := h.Client.Create(h.Context(), "ex", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunUntilIdle()
			info := h.RequireStatus("ex", "x", dftype.StatusErrored)
			times, nums := log.get()
			// Default: 5 retries after the first attempt, 10 s exponential,
			// each wait jittered by ±20% (workflow.JitterFraction).
			s := 10 * time.Second
			require.Len(t, times, 6)
			for i, want := range []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s} {
				gap := times[i+1] - times[i]
				require.GreaterOrEqual(t, gap, want*8/10, "wait before retry %d", i+1)
				require.LessOrEqual(t, gap, want*12/10, "wait before retry %d", i+1)
			}
			require.Equal(t, []int{1, 2, 3, 4, 5, 6}, nums)
			require.Equal(t, "Error", info.Error.Name)
			require.Contains(t, info.Error.Message, "always")
		})

		t.Run("HandledFailureContinues", func(t *testing.T) {
			t.Parallel()
			h := testharness.New(t, testharness.WithBackend(b))
			var fallback atomic.Int32
			workflow.MustRegister(h.Registry, "handled", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
				_, err := workflow.Do(step, "primary", func(ctx context.Context) (string, error) {
					return "", errors.New("primary down")
				}, workflow.WithRetries(workflow.RetryPolicy{Limit: 1, Delay: time.Second, Backoff: workflow.BackoffConstant}))
				var se *workflow.StepError
				if !errors.As(err, &se) {
					return "", err
				}
				return workflow.Do(step, "fallback", func(ctx context.Context) (string, error) {
					fallback.Add(1)
					return "used fallback after " + se.Message, nil
				})
			})
			_, err := h.Client.Create(h.Context(), "handled", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			h.RunUntilIdle()
			var out string
			h.RequireOutput("handled", "x", &out)
			require.Equal(t, "used fallback after primary down", out)
			require.EqualValues(t, 1, fallback.Load())
			hist := h.History("handled", "x")
			require.Equal(t, "errored", hist.Steps[0].Status)
			require.Equal(t, 2, hist.Steps[0].Attempts)
		})
	})
}

func TestAttemptTimeoutDiscardsLateResult(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		started := make(chan struct{})
		release := make(chan struct{})
		var calls atomic.Int32
		workflow.MustRegister(h.Registry, "slow", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "call", func(ctx context.Context) (string, error) {
				if calls.Add(1) == 1 {
					close(started)
					<-release // outlives its timeout, then returns a result nobody may see
					return "late", nil
				}
				return "on time", nil
			}, workflow.WithTimeout(time.Minute),
				workflow.WithRetries(workflow.RetryPolicy{Limit: 2, Delay: 5 * time.Second, Backoff: workflow.BackoffConstant}))
		})
		_, err := h.Client.Create(h.Context(), "slow", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		ran := make(chan int)
		go func() { ran <- h.RunDue() }()
		<-started
		h.Advance(time.Minute) // the attempt times out
		require.Equal(t, 1, <-ran)
		close(release) // the late result arrives after the runner moved on

		hist := h.History("slow", "x")
		require.Len(t, hist.Steps, 1)
		require.Equal(t, "retrying", hist.Steps[0].Status)
		require.Equal(t, workflow.ErrorNameStepTimeout, hist.Steps[0].Error.Name)

		h.RunUntilIdle()
		var out string
		h.RequireOutput("slow", "x", &out)
		require.Equal(t, "on time", out)
		require.EqualValues(t, 2, calls.Load())
	})
}
