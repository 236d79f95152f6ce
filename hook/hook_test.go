package hook_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type recorder struct {
	mu    sync.Mutex
	calls []hook.Enqueued
	fail  int // fail this many calls first
}

func (r *recorder) hook(ctx context.Context, e hook.Enqueued) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, e)
	if len(r.calls) <= r.fail {
		return errors.New("receiver down")
	}
	return nil
}

func (r *recorder) get() []hook.Enqueued {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook.Enqueued(nil), r.calls...)
}

func setup(t *testing.T, b testharness.Backend, rec *recorder) (*testharness.Harness, *hook.Deliverer) {
	t.Helper()
	h := testharness.New(t, testharness.WithBackend(b), testharness.WithHooks(&hook.Config{
		OnWorkflowEnqueued: rec.hook, RetryDelay: 10 * time.Second,
	}))
	return h, h.Hooks
}

func TestHookFailingTwiceIsDeliveredOnTheThirdTry(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		rec := &recorder{fail: 2}
		h, d := setup(t, b, rec)
		wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "ok", nil
		})
		created := h.Now()
		_, err := wf.Create(h.Context(), workflow.CreateOptions[any]{ID: "x"})
		require.NoError(t, err)
		ctx := h.Context()

		n, err := d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Len(t, rec.get(), 1)

		h.Advance(9 * time.Second)
		n, err = d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "not before the 10 s backoff")
		h.Advance(time.Second)
		n, err = d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "second try after 10 s")

		h.Advance(19 * time.Second)
		n, err = d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "the backoff doubles")
		h.Advance(time.Second)
		n, err = d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n, "third try after 20 more seconds")

		h.Advance(time.Hour)
		n, err = d.DeliverDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "delivered entries are not delivered again")

		calls := rec.get()
		require.Len(t, calls, 3)
		for i, c := range calls {
			require.Equal(t, i+1, c.Attempt)
			require.Equal(t, calls[0].ID, c.ID, "the same recorded entry on every attempt")
			require.Equal(t, "w", c.WorkflowName)
			require.Equal(t, "x", c.InstanceID)
			require.Equal(t, "create", c.Reason)
			require.True(t, c.RunAt.Equal(created), "runAt %s, want %s", c.RunAt, created)
		}
	})
}

func TestHookReasons(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		rec := &recorder{}
		h, d := setup(t, b, rec)
		ctx := h.Context()
		var attempts int
		wf := workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "flaky", func(ctx context.Context) (int, error) {
				attempts++
				if attempts == 1 {
					return 0, errors.New("once")
				}
				return attempts, nil
			}, workflow.WithRetries(workflow.RetryPolicy{Limit: 1, Delay: time.Minute, Backoff: workflow.BackoffConstant})); err != nil {
				return "", err
			}
			if err := step.Sleep("nap", time.Hour); err != nil {
				return "", err
			}
			return workflow.WaitForEvent[string](step, "wait", workflow.WaitOptions{Type: "go"})
		})
		inst, err := wf.Create(ctx, workflow.CreateOptions[any]{ID: "x"})
		require.NoError(t, err)
		h.RunUntilIdle() // create, retry, wake (sleep), wake (event wait)
		require.NoError(t, inst.Pause(ctx))
		require.NoError(t, inst.Resume(ctx)) // resume
		h.RunUntilIdle()
		h.SendEvent("w", "x", "go", "now") // event
		h.RunUntilIdle()
		h.RequireStatus("w", "x", dftype.StatusComplete)
		require.NoError(t, inst.Restart(ctx)) // create again: a new run

		for {
			n, err := d.DeliverDue(ctx)
			require.NoError(t, err)
			if n == 0 {
				break
			}
		}
		calls := rec.get()
		// Entries are delivered concurrently; their ids give the order they
		// were recorded in.
		sort.Slice(calls, func(i, j int) bool { return calls[i].ID < calls[j].ID })
		var reasons []string
		for _, c := range calls {
			require.Equal(t, 1, c.Attempt)
			reasons = append(reasons, c.Reason)
		}
		require.Equal(t, []string{"create", "retry", "wake", "wake", "resume", "wake", "event", "create"}, reasons)
	})
}
