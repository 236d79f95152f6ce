package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestStepsRunConcurrently(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "fan", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) ([]int, error) {
			// Each step waits until all three are running at once: this only
			// finishes if the runner really runs them concurrently.
			var barrier sync.WaitGroup
			barrier.Add(3)
			out := make([]int, 3)
			g, _ := errgroup.WithContext(ctx)
			for i := range 3 {
				g.Go(func() error {
					v, err := workflow.Do(step, fmt.Sprintf("part-%d", i), func(ctx context.Context) (int, error) {
						barrier.Done()
						done := make(chan struct{})
						go func() { barrier.Wait(); close(done) }()
						select {
						case <-done:
						case <-time.After(10 * time.Second):
							return 0, workflow.NonRetryable(errors.New("steps did not run concurrently"))
						}
						return i * 10, nil
					})
					out[i] = v
					return err
				})
			}
			if err := g.Wait(); err != nil {
				return nil, err
			}
			return out, nil
		})
		_, err := h.Client.Create(h.Context(), "fan", dftype.CreateRequest{ID: "f"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out []int
		h.RequireOutput("fan", "f", &out)
		require.Equal(t, []int{0, 10, 20}, out)
		require.Len(t, h.History("fan", "f").Steps, 3)
	})
}

func TestSameStepNameConcurrentlyIsAnError(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "dup", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			firstRunning := make(chan struct{})
			secondDone := make(chan error, 1)
			go func() {
				<-firstRunning
				_, err := workflow.Do(step, "same", func(ctx context.Context) (int, error) { return 2, nil })
				secondDone <- err
			}()
			_, err := workflow.Do(step, "same", func(ctx context.Context) (int, error) {
				close(firstRunning)
				return 1, workflow.NonRetryable(<-secondDone) // finish only after the second call returned
			})
			var se *workflow.StepError
			if !errors.As(err, &se) {
				return "", fmt.Errorf("expected the first call to fail with the second's error, got %v", err)
			}
			return se.Message, nil
		})
		_, err := h.Client.Create(h.Context(), "dup", dftype.CreateRequest{ID: "d"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("dup", "d", &out)
		require.Contains(t, out, workflow.ErrDuplicateStep.Error())
	})
}

func TestStepLimitsAndNames(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "many", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) ([]string, error) {
			var errs []string
			for _, name := range []string{"", "   ", "bad\x00name", string(make([]byte, 300))} {
				_, err := step.Do(name, func(ctx context.Context) (any, error) { return nil, nil })
				if !errors.Is(err, workflow.ErrInvalidStepName) {
					return nil, fmt.Errorf("name %q accepted", name)
				}
			}
			for i := 0; ; i++ {
				// The same name trimmed is the same step: reaching it
				// again in this run is refused.
				if i == 0 {
					a, err := workflow.Do(step, " s-0 ", func(ctx context.Context) (int, error) { return 1, nil })
					if err != nil || a != 1 {
						return nil, fmt.Errorf("first: %v", err)
					}
					_, err = workflow.Do(step, "s-0", func(ctx context.Context) (int, error) { return 2, nil })
					if !errors.Is(err, workflow.ErrStepNameReused) {
						return nil, fmt.Errorf("the trimmed name is the same step, reached twice: got %v", err)
					}
					continue
				}
				// Sleeps don't count against the limit.
				if i == 10 {
					if err := step.Sleep("short", 0); err != nil {
						return nil, err
					}
				}
				_, err := workflow.Do(step, fmt.Sprintf("s-%d", i), func(ctx context.Context) (int, error) { return i, nil })
				if errors.Is(err, workflow.ErrTooManySteps) {
					errs = append(errs, fmt.Sprintf("limit at %d", i))
					return errs, nil
				}
				if err != nil {
					return nil, err
				}
			}
		})
		_, err := h.Client.Create(h.Context(), "many", dftype.CreateRequest{ID: "m"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out []string
		h.RequireOutput("many", "m", &out)
		require.Equal(t, []string{fmt.Sprintf("limit at %d", workflow.MaxStepsPerRun)}, out)
	})
}

func TestChildWorkflowRunsIndependently(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		child := workflow.MustRegister(h.Registry, "child", func(ctx context.Context, ev workflow.Event[string], step workflow.Step) (string, error) {
			v, err := workflow.WaitForEvent[string](step, "wait", workflow.WaitOptions{Type: "go"})
			return ev.Payload + ":" + v, err
		})
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "start child", func(ctx context.Context) (string, error) {
				id := ev.InstanceID + "-child"
				_, err := child.Create(ctx, workflow.CreateOptions[string]{ID: id, Params: "from " + ev.InstanceID})
				if errors.Is(err, workflow.ErrInstanceAlreadyExists) {
					err = nil
				}
				return id, err
			})
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, "p-child", out)
		h.RequireStatus("child", "p-child", dftype.StatusWaiting)
		h.SendEvent("child", "p-child", "go", "ok")
		h.RunUntilIdle()
		h.RequireOutput("child", "p-child", &out)
		require.Equal(t, "from p:ok", out)
	})
}
