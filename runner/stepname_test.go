package runner_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestStepNameReachedTwiceInSequenceFailsTheRun: a loop that gives every
// iteration the same step name fails the run with StepNameReusedError
// naming the step, for each kind of step that is memoized by name, instead
// of handing the first iteration's result back; the error is not retried.
func TestStepNameReachedTwiceInSequenceFailsTheRun(t *testing.T) {
	t.Parallel()
	kinds := map[string]func(step workflow.Step, i int) error{
		"Do": func(step workflow.Step, i int) error {
			_, err := workflow.Do(step, "charge", func(ctx context.Context) (int, error) { return i, nil })
			return err
		},
		"Sleep": func(step workflow.Step, _ int) error { return step.Sleep("pause", 0) },
		"WaitForEvent": func(step workflow.Step, _ int) error {
			_, err := step.WaitForEvent("approval", workflow.WaitOptions{Type: "approval", Timeout: time.Hour})
			return err
		},
		"Invoke": func(step workflow.Step, _ int) error {
			_, err := step.Invoke("child", workflow.InvokeOptions{Workflow: "child"})
			return err
		},
	}
	names := map[string]string{"Do": "charge", "Sleep": "pause", "WaitForEvent": "approval", "Invoke": "child"}
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for kind, call := range kinds {
			t.Run(kind, func(t *testing.T) {
				h := testharness.New(t, testharness.WithBackend(b))
				calls := 0
				workflow.MustRegister(h.Registry, "child", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) { return 7, nil })
				workflow.MustRegister(h.Registry, "loop", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
					for i := range 3 {
						calls++
						if err := call(step, i); err != nil {
							return i, err
						}
					}
					return 3, nil
				})
				_, err := h.Client.Create(h.Context(), "loop", dftype.CreateRequest{ID: "l"})
				require.NoError(t, err)
				if kind == "WaitForEvent" {
					h.RunUntilIdle()
					h.SendEvent("loop", "l", "approval", map[string]string{"by": "ada"})
				}
				h.RunUntilIdle()
				info := h.RequireStatus("loop", "l", dftype.StatusErrored)
				require.NotNil(t, info.Error)
				require.Equal(t, workflow.ErrorNameStepNameReused, info.Error.Name)
				require.Contains(t, info.Error.Message, fmt.Sprintf("step %q was reached a second time in this run", names[kind]))
				require.Contains(t, info.Error.Message, fmt.Sprintf(`fmt.Sprintf("%s-%%d", i)`, names[kind]))
				require.Equal(t, 1, info.RunAttempt, "the error is not retried")
			})
		}
	})
}

// TestUniqueStepNamesInALoopReplay: the idiom, a name per iteration, runs
// across many passes (each iteration sleeps, so each pass replays the
// earlier ones from the top) without a false alarm, and a Do that retries
// reaches its name once per pass.
func TestUniqueStepNamesInALoopReplay(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		attempts := 0
		workflow.MustRegister(h.Registry, "loop", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			sum := 0
			for i := range 4 {
				n, err := workflow.Do(step, fmt.Sprintf("item-%d", i), func(ctx context.Context) (int, error) {
					if i == 2 {
						if attempts++; attempts < 3 {
							return 0, errors.New("flaky")
						}
					}
					return i, nil
				}, workflow.WithRetries(workflow.RetryPolicy{Limit: 5, Delay: time.Second}))
				if err != nil {
					return 0, err
				}
				sum += n
				if err := step.Sleep(fmt.Sprintf("rest-%d", i), time.Minute); err != nil {
					return 0, err
				}
			}
			return sum, nil
		})
		_, err := h.Client.Create(h.Context(), "loop", dftype.CreateRequest{ID: "l"})
		require.NoError(t, err)
		for range 10 {
			h.RunUntilIdle()
			h.Advance(time.Minute)
		}
		h.RunUntilIdle()
		h.RequireStatus("loop", "l", dftype.StatusComplete)
		var out int
		h.RequireOutput("loop", "l", &out)
		require.Equal(t, 0+1+2+3, out)
		require.Equal(t, 3, attempts)
	})
}
