package runner_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type addParams struct {
	A, B int
}

// registerAdder registers "adder" (returns A+B, or errors when A < 0) and
// "waiter" (waits for an event "go", then returns A).
func registerChildren(h *testharness.Harness) {
	workflow.MustRegister(h.Registry, "adder", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
		return workflow.Do(step, "add", func(ctx context.Context) (int, error) {
			if ev.Payload.A < 0 {
				return 0, workflow.NonRetryable(errors.New("negative input"))
			}
			return ev.Payload.A + ev.Payload.B, nil
		})
	})
	workflow.MustRegister(h.Registry, "waiter", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
		if _, err := step.WaitForEvent("go", workflow.WaitOptions{Type: "go"}); err != nil {
			return 0, err
		}
		return ev.Payload.A, nil
	})
}

func TestInvokeReturnsChildOutput(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			sum, err := workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "waiter", Params: ev.Payload})
			if err != nil {
				return 0, err
			}
			return workflow.Do(step, "double", func(ctx context.Context) (int, error) { return 2 * sum, nil })
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p", Params: mustJSON(t, addParams{A: 20})})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("parent", "p", dftype.StatusWaiting)

		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 1)
		child := children[0]
		require.Equal(t, "waiter", child.WorkflowName)
		require.NotNil(t, child.Parent)
		require.Equal(t, dftype.ParentRef{WorkflowName: "parent", InstanceID: "p", RunNumber: 1, StepKey: "sum", Policy: dftype.ParentTerminate, Depth: 1}, *child.Parent)

		hist := h.History("parent", "p")
		require.Len(t, hist.Steps, 1)
		require.Equal(t, "invoke", hist.Steps[0].Type)
		require.Equal(t, child.ID, hist.Steps[0].Child.ID, "the parent's history names its child")
		require.Len(t, hist.Instance.Children, 1)
		require.Equal(t, "p", h.History("waiter", child.ID).Instance.Parent.InstanceID, "the child's names its parent")

		// The child's end makes the parent due at once: no timer, no poll.
		h.SendEvent("waiter", child.ID, "go", nil)
		require.Equal(t, 1, h.RunDue(), "the child runs")
		require.Equal(t, 1, h.RunDue(), "its end woke the parent in its own transaction")
		var out int
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, 40, out)
	})
}

func TestInvokeChildErrorIsTyped(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		var got *workflow.ChildError
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (string, error) {
			_, err := workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "adder", Params: addParams{A: -1}})
			if err == nil {
				return "", errors.New("want an error")
			}
			if errors.Is(err, workflow.ErrSuspended) {
				return "", err
			}
			if !errors.As(err, &got) {
				return "", fmt.Errorf("not a ChildError: %w", err)
			}
			return got.ChildErrorMessage, nil
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("parent", "p", &out)
		require.Contains(t, out, "negative input")
		require.Equal(t, dftype.StatusErrored, got.Status)
		require.Equal(t, "adder", got.WorkflowName)
	})
}

// lossyStore loses the lease of the first suspend checkpoint of a parent:
// its runner dies after it started the child and before it recorded the
// invoke step.
type lossyStore struct {
	db.Store
	lost atomic.Bool
}

func (s *lossyStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if p.WorkflowName == "parent" && p.Outcome == db.OutcomeSuspend && s.lost.CompareAndSwap(false, true) {
		return nil, db.ErrLeaseLost
	}
	return s.Store.Checkpoint(ctx, p)
}

func TestInvokeCrashAfterStartStartsOneChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		base := testharness.New(t, testharness.WithBackend(b))
		store := &lossyStore{Store: base.Store}
		h := testharness.New(t, testharness.WithStore(store))
		registerChildren(h)
		var starts atomic.Int32
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			starts.Add(1)
			return workflow.Invoke[int](step, "sum", workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: 7}})
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunDue()
		require.True(t, store.lost.Load(), "the parent's runner lost its lease before recording the step")
		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 1, "the child was started")

		// The lease expires; another claim replays the parent, which finds
		// its child instead of starting a second one.
		h.Advance(runner.DefaultLeaseDuration + time.Second)
		h.RunDue()
		children, err = h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, children, 1, "one child, not two")
		require.Equal(t, int32(2), starts.Load())

		h.SendEvent("waiter", children[0].ID, "go", nil)
		h.RunUntilIdle()
		var out int
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, 7, out)
	})
}

func TestTerminateParentTerminatesChildren(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		// middle invokes a waiter (terminate policy) and another (abandon).
		workflow.MustRegister(h.Registry, "middle", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			calls := []workflow.InvokeCall{
				{Name: "kept", Options: workflow.InvokeOptions{Workflow: "waiter", Policy: dftype.ParentTerminate}},
				{Name: "left", Options: workflow.InvokeOptions{Workflow: "waiter", Policy: dftype.ParentAbandon}},
			}
			_, errs, err := workflow.InvokeAll[int](step, calls, 0)
			if err != nil {
				return 0, err
			}
			return 0, errors.Join(errs...)
		})
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "mid", workflow.InvokeOptions{Workflow: "middle"})
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunUntilIdle()
		mids, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Len(t, mids, 1)
		leaves, err := h.Client.Children(h.Context(), "middle", mids[0].ID)
		require.NoError(t, err)
		require.Len(t, leaves, 2)
		for _, l := range leaves {
			require.Equal(t, dftype.StatusWaiting, l.Status)
		}

		_, err = h.Client.Terminate(h.Context(), "parent", "p")
		require.NoError(t, err)
		h.RequireStatus("middle", mids[0].ID, dftype.StatusTerminated)
		for _, l := range leaves {
			want := dftype.StatusTerminated
			if l.Parent.StepKey == "left" {
				want = dftype.StatusWaiting
			}
			h.RequireStatus("waiter", l.ID, want)
		}
		// Nothing is left to run but the abandoned child, which still waits.
		h.RunUntilIdle()
	})
}

func TestInvokeFanOutHundredChildren(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		var maxSeen atomic.Int32
		workflow.MustRegister(h.Registry, "fan", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			calls := make([]workflow.InvokeCall, 100)
			for i := range calls {
				calls[i] = workflow.InvokeCall{Name: fmt.Sprintf("child-%d", i), Options: workflow.InvokeOptions{Workflow: "adder", Params: addParams{A: i, B: 1}}}
			}
			outs, errs, err := workflow.InvokeAll[int](step, calls, 10)
			if err != nil {
				return 0, err
			}
			total := 0
			for i := range outs {
				if errs[i] != nil {
					return 0, errs[i]
				}
				total += outs[i]
			}
			return total, nil
		})
		_, err := h.Client.Create(h.Context(), "fan", dftype.CreateRequest{ID: "f"})
		require.NoError(t, err)
		for range 400 {
			// At most 10 children exist that have not ended.
			children, err := h.Client.Children(h.Context(), "fan", "f")
			require.NoError(t, err)
			running := 0
			for _, c := range children {
				if !c.Status.Terminal() {
					running++
				}
			}
			require.LessOrEqual(t, running, 10)
			maxSeen.Store(max(maxSeen.Load(), int32(running)))
			if h.RunDue() == 0 {
				break
			}
		}
		var out int
		h.RequireOutput("fan", "f", &out)
		require.Equal(t, 100*99/2+100, out)
		children, err := h.Client.Children(h.Context(), "fan", "f")
		require.NoError(t, err)
		require.Len(t, children, 100)
		require.Positive(t, maxSeen.Load())
	})
}

func TestInvokeBadInput(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithRunnerConfig(func(c *runner.Config) { c.MaxInvokeDepth = 3 }))
		registerChildren(h)
		errs := map[string]string{}
		record := func(name string, err error) {
			if err != nil && !errors.Is(err, workflow.ErrSuspended) {
				errs[name] = err.Error()
			}
		}
		workflow.MustRegister(h.Registry, "bad", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			_, err := workflow.Invoke[int](step, "unknown", workflow.InvokeOptions{Workflow: "nope"})
			record("unknown", err)
			_, err = workflow.Invoke[int](step, "params", workflow.InvokeOptions{Workflow: "adder", Params: func() {}})
			record("params", err)
			_, err = workflow.Invoke[int](step, "taken", workflow.InvokeOptions{Workflow: "adder", ID: "other"})
			record("taken", err)
			return 0, nil
		})
		// "loop" invokes itself: the depth limit stops it with a clear error.
		workflow.MustRegister(h.Registry, "loop", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (int, error) {
			return workflow.Invoke[int](step, "again", workflow.InvokeOptions{Workflow: "loop"})
		})
		_, err := h.Client.Create(h.Context(), "adder", dftype.CreateRequest{ID: "other", Params: mustJSON(t, addParams{A: 1})})
		require.NoError(t, err)
		_, err = h.Client.Create(h.Context(), "bad", dftype.CreateRequest{ID: "b"})
		require.NoError(t, err)
		_, err = h.Client.Create(h.Context(), "loop", dftype.CreateRequest{ID: "l"})
		require.NoError(t, err)
		h.RunUntilIdle()
		require.Contains(t, errs["unknown"], "nope")
		require.Contains(t, errs["params"], "params of invoke step")
		require.Contains(t, errs["taken"], "is not the child of step")
		for _, st := range h.History("bad", "b").Steps {
			require.Equal(t, "invoke", string(st.Type), st.Name)
			require.Equal(t, "errored", string(st.Status), st.Name)
			require.Equal(t, workflow.ErrorNameInvokeRefused, st.Error.Name, "a refused start is recorded, so replays agree")
		}

		// l (depth 0) -> depth 1 -> 2 -> 3; the depth-3 child's invoke fails,
		// and each parent then fails with its child.
		info := h.RequireStatus("loop", "l", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameChildFailed, info.Error.Name)
		var deepest *dftype.InstanceInfo
		id, wf := "l", "loop"
		for {
			children, err := h.Client.Children(h.Context(), wf, id)
			require.NoError(t, err)
			if len(children) == 0 {
				break
			}
			require.Len(t, children, 1)
			deepest = children[0]
			id = deepest.ID
		}
		got, err := h.Client.Get(h.Context(), "loop", deepest.ID)
		require.NoError(t, err)
		require.Equal(t, 3, got.Parent.Depth, "counted along the parent links")
		require.Contains(t, h.Status("loop", deepest.ID).Error.Message, "invoke nesting too deep")
	})
}

func TestInvokeTimeout(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (bool, error) {
			_, err := workflow.Invoke[int](step, "slow", workflow.InvokeOptions{Workflow: "waiter", Timeout: time.Hour})
			if errors.Is(err, workflow.ErrSuspended) {
				return false, err
			}
			return errors.Is(err, workflow.ErrInvokeTimeout), nil
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunDue()
		h.RunDue()
		h.Advance(time.Hour)
		h.RunDue()
		var out bool
		h.RequireOutput("parent", "p", &out)
		require.True(t, out)
		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusWaiting, children[0].Status, "the child keeps running")
	})
}

func TestInvokeTimeoutTerminatesChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (bool, error) {
			_, err := workflow.Invoke[int](step, "slow", workflow.InvokeOptions{Workflow: "waiter", Timeout: time.Hour, TerminateOnTimeout: true})
			if errors.Is(err, workflow.ErrSuspended) {
				return false, err
			}
			return errors.Is(err, workflow.ErrInvokeTimeout), nil
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunDue()
		h.RunDue()
		h.Advance(time.Hour)
		h.RunUntilIdle()
		var out bool
		h.RequireOutput("parent", "p", &out)
		require.True(t, out)
		children, err := h.Client.Children(h.Context(), "parent", "p")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusTerminated, children[0].Status, "the timeout terminated the child")
	})
}

// TestInvokeAllBoundsChildrenInFlight fans out to children that wait for
// an event, at most two at a time, and ends them one by one: each end
// resumes the parent, which starts the next child, and the parent's
// replays of the children still running neither start them again nor
// lose their waits.
func TestInvokeAllBoundsChildrenInFlight(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "fan", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) ([]int, error) {
			calls := make([]workflow.InvokeCall, 5)
			for i := range calls {
				calls[i] = workflow.InvokeCall{Name: fmt.Sprintf("c%d", i), Options: workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: i}}}
			}
			outs, errs, err := workflow.InvokeAll[int](step, calls, 2)
			if err != nil {
				return nil, err
			}
			return outs, errors.Join(errs...)
		})
		_, err := h.Client.Create(h.Context(), "fan", dftype.CreateRequest{ID: "f"})
		require.NoError(t, err)
		h.RunUntilIdle()
		ended := map[string]bool{}
		for round := range 5 {
			children, err := h.Client.Children(h.Context(), "fan", "f")
			require.NoError(t, err)
			running := []*dftype.InstanceInfo{}
			for _, c := range children {
				if !c.Status.Terminal() {
					running = append(running, c)
				}
			}
			require.Len(t, running, min(2, 5-round), "round %d: the bound holds and the window is full", round)
			require.Len(t, children, min(round+2, 5))
			// End the newest running child: the other keeps its wait.
			last := running[len(running)-1]
			require.False(t, ended[last.ID])
			ended[last.ID] = true
			h.SendEvent("waiter", last.ID, "go", nil)
			h.RunUntilIdle()
		}
		var out []int
		h.RequireOutput("fan", "f", &out)
		require.Equal(t, []int{0, 1, 2, 3, 4}, out)
	})
}

// TestTerminatedChildFailsTheInvoke: a child terminated on its own ends
// its parent's Invoke with a ChildError of status terminated.
func TestTerminatedChildFailsTheInvoke(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		registerChildren(h)
		workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) (string, error) {
			_, err := workflow.Invoke[int](step, "wait", workflow.InvokeOptions{Workflow: "waiter", ID: "kid"})
			var ce *workflow.ChildError
			if errors.As(err, &ce) {
				return string(ce.Status), nil
			}
			return "", err
		})
		_, err := h.Client.Create(h.Context(), "parent", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunUntilIdle()
		_, err = h.Client.Terminate(h.Context(), "waiter", "kid")
		require.NoError(t, err)
		require.Equal(t, 1, h.RunDue(), "the terminate made the parent due")
		var out string
		h.RequireOutput("parent", "p", &out)
		require.Equal(t, "terminated", out)
	})
}

// endFirstChildStore ends the child of step c0 of "fan" just before the
// parent's first look at it (the consume checkpoint of its wait): the
// child's runner finished it between the parent's start and its wait, as
// happens with runners in parallel.
type endFirstChildStore struct {
	db.Store
	h    *testharness.Harness
	done atomic.Bool
}

func (s *endFirstChildStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if p.WorkflowName == "fan" && p.ConsumeEvent != nil && p.ConsumeEvent.StepKey == "c0" && s.done.CompareAndSwap(false, true) {
		children, err := s.h.Client.Children(ctx, "fan", "f")
		if err != nil {
			return nil, err
		}
		for _, c := range children {
			if c.Parent != nil && c.Parent.StepKey == "c0" {
				s.h.SendEvent("waiter", c.ID, "go", nil)
			}
		}
		s.h.RunDue() // the child; the parent's task is leased
	}
	return s.Store.Checkpoint(ctx, p)
}

// TestInvokeAllChildEndedBeforeTheWait: a child of InvokeAll that ends
// between its start and the parent's wait on it is taken as ended (it used
// to end the parent with "workflow run suspended", or to leave its step
// waiting for good, the suspend writing its waiting row over the recorded
// end), and the window moves on to the next call.
func TestInvokeAllChildEndedBeforeTheWait(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		base := testharness.New(t, testharness.WithBackend(b))
		store := &endFirstChildStore{Store: base.Store}
		h := testharness.New(t, testharness.WithStore(store))
		store.h = h
		registerChildren(h)
		workflow.MustRegister(h.Registry, "fan", func(ctx context.Context, ev workflow.Event[addParams], step workflow.Step) ([]int, error) {
			calls := make([]workflow.InvokeCall, 3)
			for i := range calls {
				calls[i] = workflow.InvokeCall{Name: fmt.Sprintf("c%d", i), Options: workflow.InvokeOptions{Workflow: "waiter", Params: addParams{A: i}}}
			}
			outs, errs, err := workflow.InvokeAll[int](step, calls, 2)
			if err != nil {
				return nil, err
			}
			return outs, errors.Join(errs...)
		})
		_, err := h.Client.Create(h.Context(), "fan", dftype.CreateRequest{ID: "f"})
		require.NoError(t, err)
		h.RunUntilIdle()
		require.True(t, store.done.Load(), "c0 ended before the parent's wait")
		h.RequireStatus("fan", "f", dftype.StatusWaiting)
		children, err := h.Client.Children(h.Context(), "fan", "f")
		require.NoError(t, err)
		require.Len(t, children, 3, "c0's end made room for c2")
		for _, c := range children {
			if !c.Status.Terminal() {
				h.SendEvent("waiter", c.ID, "go", nil)
			}
		}
		h.RunUntilIdle()
		var out []int
		h.RequireOutput("fan", "f", &out)
		require.Equal(t, []int{0, 1, 2}, out)
	})
}
