package runner_test

import (
	"context"
	"encoding/json"
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

// registerReservations registers "reserver" (records "reserve n" and
// returns "res-n"; a negative n fails for good) and "releaser" (waits for
// the event "confirm" when its params start with "wait", fails for good on
// "bad", and records "release <params>").
func registerReservations(h *testharness.Harness, log *sagaLog) {
	workflow.MustRegister(h.Registry, "reserver", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (string, error) {
		return workflow.Do(step, "hold", func(context.Context) (string, error) {
			if ev.Payload < 0 {
				return "", workflow.NonRetryable(errors.New("nothing to reserve"))
			}
			log.add(fmt.Sprintf("reserve %d", ev.Payload))
			return fmt.Sprintf("res-%d", ev.Payload), nil
		})
	})
	workflow.MustRegister(h.Registry, "releaser", func(ctx context.Context, ev workflow.Event[string], step workflow.Step) (string, error) {
		if ev.Payload == "bad" {
			return "", workflow.NonRetryable(errors.New("release refused"))
		}
		if _, err := step.WaitForEvent("confirm", workflow.WaitOptions{Type: "confirm"}); err != nil {
			return "", err
		}
		_, err := workflow.Do(step, "free", func(context.Context) (string, error) {
			log.add("release " + ev.Payload)
			return "", nil
		})
		return "released", err
	})
}

// releaseWith is a compensation that invokes "releaser" with the result of
// the step it undoes.
func releaseWith() workflow.StepOption {
	return workflow.CompensateWithInvoke(func(result json.RawMessage) (workflow.InvokeOptions, error) {
		return workflow.InvokeOptions{Workflow: "releaser", Params: result}, nil
	})
}

// childrenOf returns the children of an instance that run workflow wf.
func childrenOf(t *testing.T, h *testharness.Harness, parent, id, wf string) []*dftype.InstanceInfo {
	t.Helper()
	all, err := h.Client.Children(h.Context(), parent, id)
	require.NoError(t, err)
	var out []*dftype.InstanceInfo
	for _, c := range all {
		if c.WorkflowName == wf {
			out = append(out, c)
		}
	}
	return out
}

// An Invoke step registers a compensation with InvokeOptions.Compensation
// when its child completes; a compensation may itself invoke a child
// (CompensateWithInvoke), durably: the run suspends until that child ends.
func TestInvokeCompensationUndoesTheChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		registerReservations(h, log)
		workflow.MustRegister(h.Registry, "trip", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
			if _, err := workflow.Invoke[string](step, "reserve", workflow.InvokeOptions{
				Workflow: "reserver", Params: 7, Compensation: []workflow.StepOption{releaseWith()},
			}); err != nil {
				return "", err
			}
			// A child that fails registers nothing: there is nothing to undo.
			_, err := workflow.Invoke[string](step, "nothing", workflow.InvokeOptions{
				Workflow: "reserver", Params: -1, Compensation: []workflow.StepOption{
					workflow.Compensate(func(context.Context) error { log.add("undo nothing"); return nil }),
				},
			})
			var ce *workflow.ChildError
			if !errors.As(err, &ce) {
				return "", fmt.Errorf("want a child error, got %v", err)
			}
			if _, err := workflow.Invoke[string](step, "charge", workflow.InvokeOptions{
				Workflow: "reserver", Params: 8, Compensation: []workflow.StepOption{
					workflow.Compensate(func(context.Context) error { log.add("refund"); return nil }),
				},
			}); err != nil {
				return "", err
			}
			return workflow.Do(step, "ship", func(context.Context) (string, error) {
				return "", workflow.NonRetryable(errors.New("no truck"))
			})
		})
		_, err := h.Client.Create(h.Context(), "trip", dftype.CreateRequest{ID: "t"})
		require.NoError(t, err)
		h.RunUntilIdle()

		// The compensation of "charge" ran; that of "reserve" started its
		// child, which waits, and the parent waits for it.
		h.RequireStatus("trip", "t", dftype.StatusWaiting)
		require.Equal(t, []string{"reserve 7", "reserve 8", "refund"}, log.list())
		releasers := childrenOf(t, h, "trip", "t", "releaser")
		require.Len(t, releasers, 1)
		rel := releasers[0]
		require.Equal(t, "compensate:reserve", rel.Parent.StepKey, "the compensation step started it")
		var params string
		require.NoError(t, json.Unmarshal(rel.Params, &params))
		require.Equal(t, "res-7", params, "called with the child's output")

		h.SendEvent("releaser", rel.ID, "confirm", nil)
		h.RunUntilIdle()
		info := h.RequireStatus("trip", "t", dftype.StatusErrored)
		require.Equal(t, "NonRetryableError", info.Error.Name, "the original error is kept")
		require.Contains(t, info.Error.Message, "no truck")
		require.Equal(t, []string{"reserve 7", "reserve 8", "refund", "release res-7"}, log.list())
		for _, what := range log.list() {
			require.Equal(t, 1, log.count(what), what)
		}
		require.ElementsMatch(t, []string{"compensate:charge", "compensate:reserve"}, compensationSteps(t, h, "trip", "t"))
		for _, st := range h.History("trip", "t").Steps {
			if st.Name == "compensate:reserve" {
				require.Equal(t, "invoke", string(st.Type))
				require.Equal(t, "complete", string(st.Status))
				require.Equal(t, rel.ID, st.Child.ID)
			}
		}
		h.RequireStatus("releaser", rel.ID, dftype.StatusComplete)
	})
}

// A compensation whose child fails, whose options cannot be made, or whose
// child cannot start fails for good; the others still run and the instance
// keeps the original error in CompensationFailedError.
func TestInvokeCompensationFailures(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		registerReservations(h, log)
		step := func(step workflow.Step, name string, undo workflow.InvokeCompensationFunc) error {
			_, err := workflow.Do(step, name, func(context.Context) (string, error) { return name, nil },
				workflow.CompensateWithInvoke(undo))
			return err
		}
		workflow.MustRegister(h.Registry, "saga", func(ctx context.Context, ev workflow.Event[struct{}], s workflow.Step) (string, error) {
			for _, err := range []error{
				step(s, "a", func(json.RawMessage) (workflow.InvokeOptions, error) {
					return workflow.InvokeOptions{Workflow: "releaser", Params: "bad"}, nil
				}),
				step(s, "b", func(json.RawMessage) (workflow.InvokeOptions, error) {
					return workflow.InvokeOptions{}, errors.New("no release for b")
				}),
				step(s, "c", func(json.RawMessage) (workflow.InvokeOptions, error) {
					return workflow.InvokeOptions{Workflow: "nope"}, nil
				}),
				step(s, "d", func(json.RawMessage) (workflow.InvokeOptions, error) {
					return workflow.InvokeOptions{Workflow: "releaser", Params: "wait d", Timeout: time.Hour}, nil
				}),
			} {
				if err != nil {
					return "", err
				}
			}
			return "", workflow.NonRetryable(errors.New("give up"))
		})
		_, err := h.Client.Create(h.Context(), "saga", dftype.CreateRequest{ID: "f"})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("saga", "f", dftype.StatusWaiting)
		h.Advance(time.Hour)
		h.RunUntilIdle()

		info := h.RequireStatus("saga", "f", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationFailed, info.Error.Name)
		msg := info.Error.Message
		require.Contains(t, msg, `step "compensate:a" failed: ChildFailedError:`)
		require.Contains(t, msg, "release refused")
		require.Contains(t, msg, `step "compensate:b" failed: InvokeRefusedError:`)
		require.Contains(t, msg, "no release for b")
		require.Contains(t, msg, `step "compensate:c" failed: InvokeRefusedError:`)
		require.Contains(t, msg, `"nope"`)
		require.Contains(t, msg, `step "compensate:d" failed: InvokeTimeoutError:`)
		require.Contains(t, msg, "original error: NonRetryableError: give up")
		require.Empty(t, log.list())
	})
}

// Options that do not apply to an Invoke, or to a compensation that
// invokes a child, are refused at the step.
func TestInvokeCompensationOptionsAreChecked(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	log := newSagaLog()
	registerReservations(h, log)
	var errs []error
	workflow.MustRegister(h.Registry, "bad", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
		_, err := step.Invoke("retried", workflow.InvokeOptions{Workflow: "reserver", Compensation: []workflow.StepOption{
			workflow.Compensate(func(context.Context) error { return nil }), workflow.WithRetries(workflow.RetryPolicy{Limit: 3}),
		}})
		errs = append(errs, err)
		_, err = step.Invoke("options only", workflow.InvokeOptions{Workflow: "reserver", Compensation: []workflow.StepOption{
			workflow.CompensationOptions(),
		}})
		errs = append(errs, err)
		_, err = step.Invoke("no compensation", workflow.InvokeOptions{Workflow: "reserver", Compensation: []workflow.StepOption{
			workflow.WithConfig(workflow.StepConfig{}),
		}})
		errs = append(errs, err)
		_, err = step.Do("invoked undo with retries", func(context.Context) (any, error) { return 1, nil },
			releaseWith(), workflow.CompensationOptions(workflow.WithTimeout(time.Second)))
		errs = append(errs, err)
		return "ok", nil
	})
	_, err := h.Client.Create(h.Context(), "bad", dftype.CreateRequest{ID: "b"})
	require.NoError(t, err)
	h.RunUntilIdle()
	var out string
	h.RequireOutput("bad", "b", &out)
	require.Len(t, errs, 4)
	for i, err := range errs {
		require.ErrorIs(t, err, workflow.ErrInvalidRequest, i)
	}
	// Each is refused for its own reason.
	require.ErrorContains(t, errs[0], `invoke step "retried": InvokeOptions.Compensation takes only`)
	require.ErrorContains(t, errs[1], `step "options only" has a nil compensation`)
	require.ErrorContains(t, errs[2], `invoke step "no compensation": InvokeOptions.Compensation registers no compensation`)
	require.ErrorContains(t, errs[3], "invokes a child workflow, which is not retried")
	require.Contains(t, errs[0].Error(), "InvokeOptions.Compensation takes only")
	require.Contains(t, errs[1].Error(), "nil compensation")
	require.Contains(t, errs[3].Error(), "invokes a child workflow")
	require.Empty(t, childrenOf(t, h, "bad", "b", "reserver"), "no child starts")
}

// losesSuspendOf loses the lease of the first suspend checkpoint of the
// workflow wf: its runner dies after the step before it started a child
// and before the wait was recorded.
type losesSuspendOf struct {
	db.Store
	wf   string
	lost atomic.Bool
}

func (s *losesSuspendOf) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if p.WorkflowName == s.wf && p.Outcome == db.OutcomeSuspend && s.lost.CompareAndSwap(false, true) {
		return nil, db.ErrLeaseLost
	}
	return s.Store.Checkpoint(ctx, p)
}

// A runner that dies after a compensation started its child, before it
// recorded the wait: the replay of the compensations finds that child
// instead of starting a second one.
func TestInvokeCompensationCrashAfterStartStartsOneChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		base := testharness.New(t, testharness.WithBackend(b))
		store := &losesSuspendOf{Store: base.Store, wf: "saga"}
		h := testharness.New(t, testharness.WithStore(store))
		log := newSagaLog()
		registerReservations(h, log)
		workflow.MustRegister(h.Registry, "saga", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "hold", func(context.Context) (string, error) { return "wait hold", nil },
				releaseWith()); err != nil {
				return "", err
			}
			return "", workflow.NonRetryable(errors.New("give up"))
		})
		_, err := h.Client.Create(h.Context(), "saga", dftype.CreateRequest{ID: "s"})
		require.NoError(t, err)
		h.RunDue()
		require.True(t, store.lost.Load(), "the runner lost its lease before recording the compensation's wait")
		require.Len(t, childrenOf(t, h, "saga", "s", "releaser"), 1, "the compensation's child was started")

		h.Advance(runner.DefaultLeaseDuration + time.Second)
		h.RunDue()
		h.RequireStatus("saga", "s", dftype.StatusWaiting)
		releasers := childrenOf(t, h, "saga", "s", "releaser")
		require.Len(t, releasers, 1, "one child, not two")

		h.SendEvent("releaser", releasers[0].ID, "confirm", nil)
		h.RunUntilIdle()
		info := h.RequireStatus("saga", "s", dftype.StatusErrored)
		require.Equal(t, "NonRetryableError", info.Error.Name)
		require.Equal(t, []string{"release wait hold"}, log.list())
	})
}
