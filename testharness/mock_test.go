package testharness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type order struct {
	Total  int    `json:"total"`
	Charge string `json:"charge"`
	Mailed bool   `json:"mailed"`
}

// checkout charges a card and mails a receipt; the test mocks its steps.
func registerCheckout(t *testing.T, h *testharness.Harness, realCalls *int) *workflow.Binding[int, order] {
	t.Helper()
	var mu sync.Mutex
	return workflow.MustRegister(h.Registry, "checkout", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (order, error) {
		charge, err := workflow.Do(step, "charge", func(ctx context.Context) (string, error) {
			mu.Lock()
			*realCalls++
			mu.Unlock()
			return "real-charge", nil
		}, workflow.WithRetries(workflow.RetryPolicy{Limit: 3, Delay: time.Minute, Backoff: workflow.BackoffConstant}))
		if err != nil {
			return order{}, err
		}
		if err := step.Sleep("settle", time.Hour); err != nil {
			return order{}, err
		}
		mailed, err := workflow.Do(step, "mail receipt", func(ctx context.Context) (bool, error) {
			mu.Lock()
			*realCalls++
			mu.Unlock()
			return true, nil
		})
		if err != nil {
			return order{}, err
		}
		return order{Total: ev.Payload, Charge: charge, Mailed: mailed}, nil
	})
}

func TestMockStepReturnsValue(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var real int
		checkout := registerCheckout(t, h, &real)
		charge := h.OnStep("charge").Return("ch_mock").Once()
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1", Params: 42})
		require.NoError(t, err)
		h.RunUntilIdle()

		var out order
		h.RequireOutput("checkout", "o-1", &out)
		require.Equal(t, order{Total: 42, Charge: "ch_mock", Mailed: true}, out)
		require.Equal(t, 1, charge.Calls(), "replays after the sleep do not call the mock again")
		require.Equal(t, 1, real, "the unmocked step ran its own function, once")
		require.Empty(t, h.MockProblems())

		// The mocked result is recorded as the real one would be.
		hist := h.History("checkout", "o-1")
		var recorded json.RawMessage
		for _, s := range hist.Steps {
			if s.Name == "charge" {
				recorded = s.Result
			}
		}
		require.JSONEq(t, `"ch_mock"`, string(recorded))
	})
}

func TestMockStepReturnsErrorThenValue(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithJitter(0.5))
		var real int
		checkout := registerCheckout(t, h, &real)
		failing := h.OnStep("charge").ReturnError(errors.New("card declined")).Times(2)
		ok := h.OnStep("charge").Return("ch_2")
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1", Params: 7})
		require.NoError(t, err)
		start := h.Now()
		h.RunUntilIdle()

		var out order
		h.RequireOutput("checkout", "o-1", &out)
		require.Equal(t, "ch_2", out.Charge)
		require.Equal(t, 2, failing.Calls())
		require.Equal(t, 1, ok.Calls())
		// Two retries a minute apart, then the hour's sleep: the retries
		// were real, on the fake clock.
		require.Equal(t, start.Add(2*time.Minute+time.Hour), h.Now())
	})
}

func TestMockStepErrorExhaustsRetries(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithJitter(0.5))
		var real int
		checkout := registerCheckout(t, h, &real)
		m := h.OnStep("charge").ReturnError(errors.New("card declined"))
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus("checkout", "o-1", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, "card declined")
		require.Equal(t, 4, m.Calls(), "the first attempt and the policy's 3 retries")
		require.Zero(t, real)
	})
}

func TestMockStepRunSeesAttempt(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b), testharness.WithJitter(0.5))
		var real int
		checkout := registerCheckout(t, h, &real)
		var seen []workflow.StepInfo
		h.OnStep("charge").Run(func(ctx context.Context) (any, error) {
			info, ok := workflow.StepInfoFromContext(ctx)
			require.True(t, ok)
			seen = append(seen, info)
			if workflow.Attempt(ctx) < 3 {
				return nil, fmt.Errorf("gateway timeout on attempt %d", workflow.Attempt(ctx))
			}
			return "ch_3", nil
		})
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
		require.NoError(t, err)
		h.RunUntilIdle()

		var out order
		h.RequireOutput("checkout", "o-1", &out)
		require.Equal(t, "ch_3", out.Charge)
		require.Len(t, seen, 3)
		for i, info := range seen {
			require.Equal(t, i+1, info.Attempt)
			require.Equal(t, "checkout", info.WorkflowName)
			require.Equal(t, "o-1", info.InstanceID)
			require.Equal(t, "charge", info.Step)
		}
	})
}

func TestMockStepValueThatDoesNotEncode(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var real int
		checkout := registerCheckout(t, h, &real)
		m := h.OnStep("charge").Return(make(chan int))
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus("checkout", "o-1", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, `result of step "charge"`)
		require.Equal(t, 1, m.Calls(), "a result that cannot be encoded is not retried, as for a real step")
	})
}

func TestMockStepInWorkflow(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	var real int
	checkout := registerCheckout(t, h, &real)
	other := workflow.MustRegister(h.Registry, "other", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (string, error) {
		return workflow.Do(step, "charge", func(ctx context.Context) (string, error) { return "other-real", nil })
	})
	general := h.OnStep(" charge ").Return("general")
	specific := h.OnStep("charge").InWorkflow("checkout").Return("specific")
	_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
	require.NoError(t, err)
	_, err = other.Create(h.Context(), workflow.CreateOptions[int]{ID: "x-1"})
	require.NoError(t, err)
	h.RunUntilIdle()

	var out order
	h.RequireOutput("checkout", "o-1", &out)
	require.Equal(t, "specific", out.Charge, "a mock of the workflow comes before a general one")
	var got string
	h.RequireOutput("other", "x-1", &got)
	require.Equal(t, "general", got)
	require.Equal(t, 1, general.Calls())
	require.Equal(t, 1, specific.Calls())
}

func TestMockStepCalledTooOften(t *testing.T) {
	t.Parallel()
	tb := newFakeTB(t)
	h := testharness.New(tb)
	var real int
	checkout := registerCheckout(t, h, &real)
	h.OnStep("charge").Return("ch").Once()
	for i := range 2 {
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: fmt.Sprintf("o-%d", i)})
		require.NoError(t, err)
	}
	h.RunUntilIdle()
	// One instance got the mocked value, the other failed for good.
	var statuses []dftype.InstanceStatus
	for i := range 2 {
		statuses = append(statuses, h.Status("checkout", fmt.Sprintf("o-%d", i)).Status)
	}
	require.ElementsMatch(t, []dftype.InstanceStatus{dftype.StatusComplete, dftype.StatusErrored}, statuses)
	tb.end()
	require.Equal(t, []string{
		`testharness: mock of step "charge" was called 2 times, more than the 1 declared (Times)`,
	}, tb.errors)
}

func TestMockUnusedIsReported(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		tb := newFakeTB(t)
		h := testharness.New(tb, testharness.WithBackend(b))
		var real int
		checkout := registerCheckout(t, h, &real)
		h.OnStep("charge").Return("ch")
		h.OnStep("refund").Return("never")                           // no step has this name
		h.OnStep("mail receipt").InWorkflow("billing").Return(false) // wrong workflow
		h.OnStep("audit").Maybe()                                    // fine unused
		h.OnStep("mail receipt").Return(true).Times(3)               // called once of 3
		h.OnWorkflow("ledger").Return(nil)                           // never started
		h.OnWorkflow("notify").Return(nil).Maybe()                   // fine unused
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("checkout", "o-1", dftype.StatusComplete)
		require.Empty(t, tb.errors, "nothing is reported before the test ends")

		tb.end()
		require.Equal(t, []string{
			`testharness: mock of step "refund" was never called (declare it with Maybe if that is fine)`,
			`testharness: mock of step "mail receipt" in workflow "billing" was never called (declare it with Maybe if that is fine)`,
			`testharness: mock of step "mail receipt" was called 1 times, fewer than the 3 declared (Times)`,
			`testharness: mock of workflow "ledger" was never called (declare it with Maybe if that is fine)`,
		}, tb.errors)
	})
}

func TestMockAllUsedReportsNothing(t *testing.T) {
	t.Parallel()
	tb := newFakeTB(t)
	h := testharness.New(tb)
	var real int
	checkout := registerCheckout(t, h, &real)
	h.OnStep("charge").Return("ch")
	_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
	require.NoError(t, err)
	h.RunUntilIdle()
	tb.end()
	require.Empty(t, tb.errors)
}

func TestMockBadInput(t *testing.T) {
	t.Parallel()
	tb := newFakeTB(t)
	h := testharness.New(tb)
	for _, tc := range []struct {
		name string
		fn   func()
		want string
	}{
		{"empty step", func() { h.OnStep("  ") }, "testharness: OnStep: invalid step name: empty"},
		{"control character", func() { h.OnStep("a\x01b") }, "contains control characters"},
		{"bad workflow filter", func() { h.OnStep("charge").InWorkflow("no spaces allowed") }, "testharness: InWorkflow:"},
		{"bad workflow", func() { h.OnWorkflow("") }, "testharness: OnWorkflow:"},
		{"negative times", func() { h.OnStep("charge").Times(-1) }, "testharness: Times(-1): the number of calls cannot be negative"},
		{"negative workflow times", func() { h.OnWorkflow("ship").Times(-2) }, "testharness: Times(-2)"},
	} {
		msg := fatalOf(tc.fn)
		require.Contains(t, msg, tc.want, tc.name)
	}
}

func TestMockTimesZero(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		tb := newFakeTB(t)
		h := testharness.New(tb, testharness.WithBackend(b))
		var real int
		checkout := registerCheckout(t, h, &real)
		h.OnStep("charge").Return("ch")
		h.OnStep("mail receipt").Times(0) // must not run: the test fails when it does
		h.OnStep("refund").Times(0)       // never runs: nothing to report
		h.OnWorkflow("receipt").Times(0)  // never started: nothing to report
		_, err := checkout.Create(h.Context(), workflow.CreateOptions[int]{ID: "o-1"})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus("checkout", "o-1", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, `testharness: mock of step "mail receipt" called 1 times, more than the 0 declared`)
		require.Zero(t, real, "the real step did not run either")
		tb.end()
		require.Equal(t, []string{
			`testharness: mock of step "mail receipt" was called 1 times, more than the 0 declared (Times)`,
		}, tb.errors)
	})
}

type shipment struct {
	Order    string `json:"order"`
	Tracking string `json:"tracking"`
}

// registerFulfil registers a parent that starts a "ship" child by name from
// a step and waits for the child's event.
func registerFulfil(t *testing.T, h *testharness.Harness) *workflow.Binding[string, string] {
	t.Helper()
	return workflow.MustRegister(h.Registry, "fulfil", func(ctx context.Context, ev workflow.Event[string], step workflow.Step) (string, error) {
		_, err := workflow.Do(step, "start shipment", func(ctx context.Context) (string, error) {
			params, _ := json.Marshal(ev.Payload)
			info, err := h.Client.Create(ctx, "ship", dftype.CreateRequest{ID: "ship-" + ev.InstanceID, Params: params})
			if errors.Is(err, workflow.ErrInstanceAlreadyExists) {
				return "ship-" + ev.InstanceID, nil
			}
			if err != nil {
				return "", err
			}
			return info.ID, nil
		})
		if err != nil {
			return "", err
		}
		done, err := workflow.WaitForEvent[shipment](step, "shipped", workflow.WaitOptions{Type: "shipped"})
		if err != nil {
			return "", err
		}
		return done.Tracking, nil
	})
}

func TestMockChildWorkflow(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for _, registered := range []bool{true, false} {
			t.Run(fmt.Sprintf("registered=%v", registered), func(t *testing.T) {
				h := testharness.New(t, testharness.WithBackend(b))
				realRan := false
				if registered {
					workflow.MustRegister(h.Registry, "ship", func(context.Context, workflow.Event[string], workflow.Step) (shipment, error) {
						realRan = true
						return shipment{}, errors.New("the real carrier must not be called")
					})
				}
				fulfil := registerFulfil(t, h)
				instances := map[string]bool{}
				child := h.OnWorkflow("ship").Run(func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (any, error) {
					var order string
					if err := json.Unmarshal(ev.Payload, &order); err != nil {
						return nil, err
					}
					instances[ev.InstanceID] = true
					// A mocked child takes real steps: this sleep suspends it
					// and the harness jumps the fake clock.
					if err := step.Sleep("carrier pickup", 2*time.Hour); err != nil {
						return nil, err
					}
					out := shipment{Order: order, Tracking: "TRK-" + order}
					if _, err := workflow.Do(step, "notify parent", func(ctx context.Context) (bool, error) {
						payload, _ := json.Marshal(out)
						return true, h.Client.SendEvent(ctx, "fulfil", order, "shipped", payload)
					}); err != nil {
						return nil, err
					}
					return out, nil
				}).Once()
				_, err := fulfil.Create(h.Context(), workflow.CreateOptions[string]{ID: "ord-1", Params: "ord-1"})
				require.NoError(t, err)
				start := h.Now()
				h.RunUntilIdle()

				var tracking string
				h.RequireOutput("fulfil", "ord-1", &tracking)
				require.Equal(t, "TRK-ord-1", tracking)
				var out shipment
				h.RequireOutput("ship", "ship-ord-1", &out)
				require.Equal(t, shipment{Order: "ord-1", Tracking: "TRK-ord-1"}, out)
				require.Equal(t, 1, child.Calls(), "one instance, however many times it replayed")
				require.Equal(t, map[string]bool{"ship-ord-1": true}, instances)
				require.False(t, realRan)
				require.Equal(t, start.Add(2*time.Hour), h.Now())
				require.Empty(t, h.MockProblems())
			})
		}
	})
}

func TestMockChildWorkflowError(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		fulfil := registerFulfil(t, h)
		h.OnWorkflow("ship").ReturnError(workflow.NonRetryable(errors.New("address unknown")))
		_, err := fulfil.Create(h.Context(), workflow.CreateOptions[string]{ID: "ord-1", Params: "ord-1"})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus("ship", "ship-ord-1", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, "address unknown")
		h.RequireStatus("fulfil", "ord-1", dftype.StatusWaiting)
	})
}

func TestMockChildWorkflowOutputThatDoesNotEncode(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	h.OnWorkflow("ship").Return(func() {})
	_, err := h.Client.Create(h.Context(), "ship", dftype.CreateRequest{ID: "s-1"})
	require.NoError(t, err, "a mocked workflow need not be registered to be started")
	h.RunUntilIdle()
	info := h.RequireStatus("ship", "s-1", dftype.StatusErrored)
	require.Contains(t, info.Error.Message, "workflow output")
}

func TestMockChildWorkflowTimes(t *testing.T) {
	t.Parallel()
	tb := newFakeTB(t)
	h := testharness.New(tb)
	first := h.OnWorkflow("ship").Return("first").Once()
	rest := h.OnWorkflow("ship").Return("rest")
	for i := range 3 {
		_, err := h.Client.Create(h.Context(), "ship", dftype.CreateRequest{ID: fmt.Sprintf("s-%d", i)})
		require.NoError(t, err)
		h.RunUntilIdle()
	}
	var out string
	h.RequireOutput("ship", "s-0", &out)
	require.Equal(t, "first", out)
	h.RequireOutput("ship", "s-2", &out)
	require.Equal(t, "rest", out)
	require.Equal(t, 1, first.Calls())
	require.Equal(t, 2, rest.Calls())
	tb.end()
	require.Empty(t, tb.errors)
}

// fakeTB records what the harness reports and runs its cleanups when the
// test says so, so a test can check the end-of-test report.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func newFakeTB(t *testing.T) *fakeTB {
	f := &fakeTB{TB: t}
	t.Cleanup(f.end) // what a failed test left behind
	return f
}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// fatal is the panic of fakeTB.Fatalf, which fatalOf recovers.
type fatal struct{ msg string }

func (f *fakeTB) Fatalf(format string, args ...any) {
	panic(fatal{msg: fmt.Sprintf(format, args...)})
}

// fatalOf returns the message fn failed the test with through Fatalf, or
// "" when it did not.
func fatalOf(fn func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatal)
			if !ok {
				panic(p)
			}
			msg = f.msg
		}
	}()
	fn()
	return ""
}

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// end runs the cleanups, last first, as the end of a test does.
func (f *fakeTB) end() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// TestMockChildWorkflowThroughInvoke: a child a parent invokes and waits
// for runs its mock, registered or not, and the mock's output (or error)
// is what the parent's Invoke returns.
func TestMockChildWorkflowThroughInvoke(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for _, registered := range []bool{true, false} {
			t.Run(fmt.Sprintf("registered=%v", registered), func(t *testing.T) {
				h := testharness.New(t, testharness.WithBackend(b))
				if registered {
					workflow.MustRegister(h.Registry, "ship", func(context.Context, workflow.Event[string], workflow.Step) (shipment, error) {
						return shipment{}, errors.New("the real carrier must not be called")
					})
				}
				workflow.MustRegister(h.Registry, "order", func(_ context.Context, ev workflow.Event[string], step workflow.Step) (string, error) {
					out, err := workflow.Invoke[shipment](step, "ship it", workflow.InvokeOptions{Workflow: "ship", Params: ev.Payload})
					if err != nil {
						var ce *workflow.ChildError
						if errors.As(err, &ce) {
							return "failed: " + ce.ChildErrorMessage, nil
						}
						return "", err
					}
					return out.Tracking, nil
				})
				child := h.OnWorkflow("ship").Run(func(_ context.Context, ev workflow.Event[json.RawMessage], _ workflow.Step) (any, error) {
					var order string
					if err := json.Unmarshal(ev.Payload, &order); err != nil {
						return nil, err
					}
					if order == "bad" {
						return nil, workflow.NonRetryable(errors.New("no carrier"))
					}
					return shipment{Order: order, Tracking: "TRK-" + order}, nil
				}).Times(2)
				_, err := h.Client.Create(h.Context(), "order", dftype.CreateRequest{ID: "o-1", Params: json.RawMessage(`"o-1"`)})
				require.NoError(t, err)
				_, err = h.Client.Create(h.Context(), "order", dftype.CreateRequest{ID: "o-2", Params: json.RawMessage(`"bad"`)})
				require.NoError(t, err)
				h.RunUntilIdle()

				var got string
				h.RequireOutput("order", "o-1", &got)
				require.Equal(t, "TRK-o-1", got)
				h.RequireOutput("order", "o-2", &got)
				require.Equal(t, "failed: no carrier", got)
				require.Equal(t, 2, child.Calls())
				require.Empty(t, h.MockProblems())
			})
		}
	})
}
