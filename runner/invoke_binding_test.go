package runner_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type chargeParams struct {
	Amount int `json:"amount"`
}

type receipt struct {
	Charged int    `json:"charged"`
	By      string `json:"by"`
}

// A child invoked through its binding takes typed params and returns a
// typed output, with no type argument and no workflow name spelled out;
// a binding of a workflow registered elsewhere (Remote) invokes the same.
func TestInvokeThroughTheBinding(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		charge := workflow.MustRegister(h.Registry, "charge", func(ctx context.Context, ev workflow.Event[chargeParams], step workflow.Step) (receipt, error) {
			return receipt{Charged: ev.Payload.Amount, By: ev.WorkflowName}, nil
		})
		remote := workflow.Remote[chargeParams, receipt](h.Registry, "charge")
		workflow.MustRegister(h.Registry, "order", func(ctx context.Context, ev workflow.Event[chargeParams], step workflow.Step) ([]receipt, error) {
			first, err := charge.Invoke(step, "charge", ev.Payload)
			if err != nil {
				return nil, err
			}
			second, err := remote.Invoke(step, "charge-again", chargeParams{Amount: first.Charged * 2},
				workflow.InvokeOptions{ID: ev.InstanceID + "-second"})
			if err != nil {
				return nil, err
			}
			return []receipt{first, second}, nil
		})
		_, err := h.Client.Create(h.Context(), "order", dftype.CreateRequest{ID: "o", Params: mustJSON(t, chargeParams{Amount: 21})})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out []receipt
		h.RequireOutput("order", "o", &out)
		require.Equal(t, []receipt{{Charged: 21, By: "charge"}, {Charged: 42, By: "charge"}}, out)
		second, err := charge.Get(h.Context(), "o-second")
		require.NoError(t, err, "the options' id names the child")
		st, err := second.Status(h.Context())
		require.NoError(t, err)
		require.Equal(t, receipt{Charged: 42, By: "charge"}, st.Output)
	})
}

// The binding names the workflow and the params: options that name them
// too, or more than one options value, are refused as the step's error.
func TestInvokeThroughTheBindingRefusesConflictingOptions(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	charge := workflow.MustRegister(h.Registry, "charge", func(ctx context.Context, ev workflow.Event[chargeParams], step workflow.Step) (receipt, error) {
		return receipt{Charged: ev.Payload.Amount}, nil
	})
	errs := map[string]error{}
	workflow.MustRegister(h.Registry, "order", func(ctx context.Context, ev workflow.Event[chargeParams], step workflow.Step) (int, error) {
		_, errs["workflow"] = charge.Invoke(step, "a", ev.Payload, workflow.InvokeOptions{Workflow: "other"})
		_, errs["params"] = charge.Invoke(step, "b", ev.Payload, workflow.InvokeOptions{Params: 1})
		_, errs["two"] = charge.Invoke(step, "c", ev.Payload, workflow.InvokeOptions{}, workflow.InvokeOptions{})
		return 0, nil
	})
	_, err := h.Client.Create(h.Context(), "order", dftype.CreateRequest{ID: "o"})
	require.NoError(t, err)
	h.RunUntilIdle()
	h.RequireStatus("order", "o", dftype.StatusComplete)
	for name, err := range errs {
		require.ErrorIs(t, err, workflow.ErrInvalidRequest, name)
	}
	require.Contains(t, errs["workflow"].Error(), "must be empty")
	require.Contains(t, errs["two"].Error(), "at most one")
	children, err := h.Client.Children(h.Context(), "order", "o")
	require.NoError(t, err)
	require.Empty(t, children, "a refused call starts no child")
}

// A step with no result records null, runs once, and returns its error
// as Do does.
func TestDoVoid(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var sent, failed, runs atomic.Int32
		workflow.MustRegister(h.Registry, "notify", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
			runs.Add(1)
			if err := workflow.DoVoid(step, "send", func(ctx context.Context) error {
				sent.Add(1)
				return nil
			}); err != nil {
				return "", err
			}
			err := workflow.DoVoid(step, "fail", func(ctx context.Context) error {
				failed.Add(1)
				return workflow.NonRetryable(errors.New("mailbox full"))
			})
			if err == nil {
				return "", errors.New("a failing DoVoid step returned no error")
			}
			// A sleep suspends the run: the replay must not send again.
			if err := step.Sleep("pause", time.Minute); err != nil {
				return "", err
			}
			return "done: " + err.Error(), nil
		})
		_, err := h.Client.Create(h.Context(), "notify", dftype.CreateRequest{ID: "n"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("notify", "n", &out)
		require.Contains(t, out, "mailbox full")
		require.GreaterOrEqual(t, runs.Load(), int32(2), "the sleep suspended the run, so it was replayed")
		require.EqualValues(t, 1, sent.Load(), "a completed step is not run again on replay")
		require.EqualValues(t, 1, failed.Load())
		steps := h.History("notify", "n").Steps
		require.Equal(t, "send", steps[0].Name)
		require.JSONEq(t, "null", string(steps[0].Result))
	})
}
