package runner_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// sagaLog records what a saga's steps and compensations did, in order.
type sagaLog struct {
	mu   sync.Mutex
	done []string
	runs map[string]int
}

func newSagaLog() *sagaLog { return &sagaLog{runs: map[string]int{}} }

func (l *sagaLog) add(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = append(l.done, what)
	l.runs[what]++
}

func (l *sagaLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.done...)
}

func (l *sagaLog) count(what string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs[what]
}

// sagaOpts configure fiveSteps.
type sagaOpts struct {
	// failAt is the step (1-5) that fails for good; 0 for none.
	failAt int
	// compHook, when set, runs inside the compensation of step n before its
	// side effect; an error it returns fails that attempt.
	compHook func(ctx context.Context, n int) error
	// compOpts configure every compensation step.
	compOpts []workflow.StepOption
	// beforeStep, when set, runs inside step n before its side effect.
	beforeStep func(ctx context.Context, n int) error
}

// fiveSteps registers "saga": five steps, each with a compensation; step
// o.failAt fails without retries. Steps record "step n", compensations
// "undo n" (after compHook).
func fiveSteps(t testing.TB, reg *workflow.Registry, log *sagaLog, o sagaOpts) {
	t.Helper()
	_, err := workflow.Register(reg, "saga", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
		for n := 1; n <= 5; n++ {
			_, err := workflow.DoWithCompensation(step, fmt.Sprintf("step %d", n),
				func(ctx context.Context) (int, error) {
					if o.beforeStep != nil {
						if err := o.beforeStep(ctx, n); err != nil {
							return 0, err
						}
					}
					if n == o.failAt {
						return 0, workflow.NonRetryable(errors.New("out of stock"))
					}
					log.add(fmt.Sprintf("step %d", n))
					return n * 10, nil
				},
				func(ctx context.Context, got int) error {
					if got != n*10 {
						return workflow.NonRetryable(fmt.Errorf("compensation of step %d got result %d", n, got))
					}
					if o.compHook != nil {
						if err := o.compHook(ctx, n); err != nil {
							return err
						}
					}
					log.add(fmt.Sprintf("undo %d", n))
					return nil
				},
				append([]workflow.StepOption{workflow.WithNoRetries()}, o.compOpts...)...,
			)
			if err != nil {
				return "", err
			}
		}
		return "done", nil
	})
	require.NoError(t, err)
}

func compensationSteps(t *testing.T, h *testharness.Harness, wf, id string) []string {
	t.Helper()
	hist := h.History(wf, id)
	var keys []string
	for _, st := range hist.Steps {
		if strings.HasPrefix(st.Name, workflow.CompensationStepPrefix) {
			keys = append(keys, st.Name)
		}
	}
	return keys
}

func TestSagaFailureCompensatesInReverseOrder(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		fiveSteps(t, h.Registry, log, sagaOpts{failAt: 4})
		_, err := h.Client.Create(h.Context(), "saga", dftype.CreateRequest{ID: "s1"})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus("saga", "s1", dftype.StatusErrored)
		require.Equal(t, "NonRetryableError", info.Error.Name, "the original error is kept")
		require.Contains(t, info.Error.Message, "out of stock")
		require.Equal(t, []string{"step 1", "step 2", "step 3", "undo 3", "undo 2", "undo 1"}, log.list())
		require.ElementsMatch(t, []string{"compensate:step 1", "compensate:step 2", "compensate:step 3"}, compensationSteps(t, h, "saga", "s1"))
	})
}

func TestSagaCompensationsRunOnceAcrossARunnerRestart(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		log := newSagaLog()
		inUndo2 := make(chan struct{})
		var killed atomic.Bool
		opts := sagaOpts{failAt: 4, compHook: func(ctx context.Context, n int) error {
			if n == 2 && killed.CompareAndSwap(false, true) {
				// The first runner dies inside this compensation, before
				// its side effect.
				close(inUndo2)
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}}
		var c *client.Client
		mk := func(id string) *runner.Runner {
			reg := workflow.NewRegistry()
			fiveSteps(t, reg, log, opts)
			r, err := runner.New(&runner.Config{Store: store, Registry: reg, Clock: clk, Logger: quietLogger, ID: id, LeaseDuration: time.Minute})
			require.NoError(t, err)
			if c == nil {
				c, err = client.New(&client.Config{Store: store, Registry: reg, Clock: clk})
				require.NoError(t, err)
			}
			return r
		}
		ra, rb := mk("a"), mk("b")
		ctx := context.Background()
		_, err := c.Create(ctx, "saga", dftype.CreateRequest{ID: "k"})
		require.NoError(t, err)
		aDone := runDueAsync(ctx, ra, 1)
		awaitSignal(t, inUndo2, "the compensation of step 2 on runner a")

		stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, ra.Stop(stopCtx), context.DeadlineExceeded)
		<-aDone
		inst, err := store.InstanceGet(ctx, db.InstanceRef{WorkflowName: "saga", ID: "k"})
		require.NoError(t, err)
		require.False(t, inst.Status.Terminal(), "runner a stopped mid-compensation")

		n, err := rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		info, err := c.Get(ctx, "saga", "k")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusErrored, info.Status)
		require.Equal(t, "NonRetryableError", info.Error.Name)
		require.Equal(t, []string{"step 1", "step 2", "step 3", "undo 3", "undo 2", "undo 1"}, log.list())
		for _, what := range []string{"step 1", "step 2", "step 3", "undo 3", "undo 2", "undo 1"} {
			require.Equal(t, 1, log.count(what), what)
		}
	})
}

func TestSagaCompensationFailureKeepsBothErrors(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		fiveSteps(t, h.Registry, log, sagaOpts{failAt: 4, compHook: func(_ context.Context, n int) error {
			if n == 2 {
				return workflow.NonRetryable(errors.New("refund refused"))
			}
			return nil
		}})
		_, err := h.Client.Create(h.Context(), "saga", dftype.CreateRequest{ID: "f"})
		require.NoError(t, err)
		h.RunUntilIdle()

		info := h.RequireStatus("saga", "f", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationFailed, info.Error.Name)
		require.Contains(t, info.Error.Message, `"compensate:step 2"`)
		require.Contains(t, info.Error.Message, "refund refused")
		require.Contains(t, info.Error.Message, `original error: NonRetryableError: step "step 4" failed after 1 attempt(s): NonRetryableError: out of stock`)
		require.Equal(t, []string{"step 1", "step 2", "step 3", "undo 3", "undo 1"}, log.list(), "the other compensations still run")
	})
}

func TestSagaCompensationRetriesDurably(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		var attempts atomic.Int32
		fiveSteps(t, h.Registry, log, sagaOpts{
			failAt: 4,
			compHook: func(_ context.Context, n int) error {
				if n == 3 && attempts.Add(1) < 3 {
					return errors.New("warehouse busy")
				}
				return nil
			},
			compOpts: []workflow.StepOption{workflow.CompensationOptions(workflow.WithRetries(workflow.RetryPolicy{Limit: 5, Delay: time.Minute, NoJitter: true}))},
		})
		_, err := h.Client.Create(h.Context(), "saga", dftype.CreateRequest{ID: "r"})
		require.NoError(t, err)
		require.Equal(t, 1, h.RunDue())
		inst := h.RequireStatus("saga", "r", dftype.StatusWaiting)
		require.Empty(t, inst.Error, "a compensation waiting for its retry suspends the run")
		h.RunUntilIdle()

		info := h.RequireStatus("saga", "r", dftype.StatusErrored)
		require.Equal(t, "NonRetryableError", info.Error.Name)
		require.EqualValues(t, 3, attempts.Load())
		require.Equal(t, []string{"step 1", "step 2", "step 3", "undo 3", "undo 2", "undo 1"}, log.list())
		require.Equal(t, testharness.DefaultStart.Add(3*time.Minute), h.Now(), "retried after 1 then 2 minutes")
	})
}

func TestSagaNotRunWhenTheWorkflowSucceeds(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		fiveSteps(t, h.Registry, log, sagaOpts{})
		_, err := h.Client.Create(h.Context(), "saga", dftype.CreateRequest{ID: "ok"})
		require.NoError(t, err)
		h.RunUntilIdle()
		var out string
		h.RequireOutput("saga", "ok", &out)
		require.Equal(t, "done", out)
		require.Equal(t, []string{"step 1", "step 2", "step 3", "step 4", "step 5"}, log.list())
		require.Empty(t, compensationSteps(t, h, "saga", "ok"))
	})
}

func TestSagaReservedStepNames(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	var errs []error
	_, err := workflow.Register(h.Registry, "bad", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
		_, err := step.Do("compensate:x", func(context.Context) (any, error) { return 1, nil })
		errs = append(errs, err)
		err = step.Sleep("compensate:y", time.Second)
		errs = append(errs, err)
		_, err = step.Do("nil undo", func(context.Context) (any, error) { return 1, nil }, workflow.Compensate(nil))
		errs = append(errs, err)
		_, err = step.Do(strings.Repeat("n", workflow.MaxStepNameLength), func(context.Context) (any, error) { return 1, nil },
			workflow.Compensate(func(context.Context) error { return nil }))
		errs = append(errs, err)
		return "ok", nil
	})
	require.NoError(t, err)
	_, err = h.Client.Create(h.Context(), "bad", dftype.CreateRequest{ID: "b"})
	require.NoError(t, err)
	h.RunUntilIdle()
	var out string
	h.RequireOutput("bad", "b", &out)
	require.Len(t, errs, 4)
	require.ErrorIs(t, errs[0], workflow.ErrInvalidStepName)
	require.ErrorIs(t, errs[1], workflow.ErrInvalidStepName)
	require.ErrorIs(t, errs[2], workflow.ErrInvalidRequest)
	require.ErrorIs(t, errs[3], workflow.ErrInvalidStepName)
}

// orderSaga registers "order": steps "reserve", "charge" and "ship" with
// compensations, then a sleep of a day and a step "close". gate, when set,
// holds "ship" until it is closed (started is closed when ship starts).
func orderSaga(t testing.TB, reg *workflow.Registry, log *sagaLog, started chan struct{}, gate <-chan struct{}) {
	t.Helper()
	_, err := workflow.Register(reg, "order", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
		for _, name := range []string{"reserve", "charge", "ship"} {
			_, err := step.Do(name, func(ctx context.Context) (any, error) {
				if name == "ship" && gate != nil {
					close(started)
					<-gate
				}
				log.add(name)
				return name, nil
			}, workflow.Compensate(func(ctx context.Context) error {
				log.add("undo " + name)
				return nil
			}))
			if err != nil {
				return "", err
			}
		}
		if err := step.Sleep("cool off", 24*time.Hour); err != nil {
			return "", err
		}
		_, err := step.Do("close", func(ctx context.Context) (any, error) {
			log.add("close")
			return nil, nil
		})
		return "closed", err
	})
	require.NoError(t, err)
}

func TestSagaRequestedOnARunningInstanceStopsAtTheNextBoundary(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		started, gate := make(chan struct{}), make(chan struct{})
		orderSaga(t, h.Registry, log, started, gate)
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "order", dftype.CreateRequest{ID: "o"})
		require.NoError(t, err)
		ran := runDueAsync(ctx, h.Runner, 10)
		awaitSignal(t, started, "step ship")

		info, err := h.Client.Compensate(ctx, "order", "o")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, info.Status)
		close(gate)
		require.Equal(t, 1, <-ran)

		info = h.RequireStatus("order", "o", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, info.Error.Name)
		require.Equal(t, []string{"reserve", "charge", "ship", "undo ship", "undo charge", "undo reserve"}, log.list(),
			"the step in flight completes and is undone; the run starts no other")
		require.Contains(t, compensationSteps(t, h, "order", "o"), db.CompensationMarkerKey, "history shows the request")

		_, err = h.Client.Compensate(ctx, "order", "o")
		require.ErrorIs(t, err, workflow.ErrInstanceTerminal)
	})
}

func TestSagaRequestedOnAWaitingInstance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		orderSaga(t, h.Registry, log, nil, nil)
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "order", dftype.CreateRequest{ID: "w"})
		require.NoError(t, err)
		h.RunDue()
		h.RequireStatus("order", "w", dftype.StatusWaiting)

		info, err := h.Client.Compensate(ctx, "order", "w")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, info.Status)
		again, err := h.Client.Compensate(ctx, "order", "w")
		require.NoError(t, err, "asking twice changes nothing")
		require.Equal(t, dftype.StatusQueued, again.Status)
		start := h.Now()
		h.RunUntilIdle()

		info = h.RequireStatus("order", "w", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, info.Error.Name)
		require.Equal(t, start, h.Now(), "the compensation does not wait for the sleep")
		require.Equal(t, []string{"reserve", "charge", "ship", "undo ship", "undo charge", "undo reserve"}, log.list())
	})
}

func TestSagaRequestedBeforeTheRunStarts(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		orderSaga(t, h.Registry, log, nil, nil)
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "order", dftype.CreateRequest{ID: "q"})
		require.NoError(t, err)
		_, err = h.Client.Compensate(ctx, "order", "q")
		require.NoError(t, err)
		h.RunUntilIdle()
		info := h.RequireStatus("order", "q", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, info.Error.Name)
		require.Empty(t, log.list(), "nothing ran, nothing to undo")
	})
}

func TestSagaRequestedOnAPausedInstance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		log := newSagaLog()
		orderSaga(t, h.Registry, log, nil, nil)
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "order", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		h.RunDue()
		_, err = h.Client.Pause(ctx, "order", "p")
		require.NoError(t, err)
		h.RequireStatus("order", "p", dftype.StatusPaused)
		_, err = h.Client.Compensate(ctx, "order", "p")
		require.NoError(t, err)
		h.RunUntilIdle()
		info := h.RequireStatus("order", "p", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, info.Error.Name)
		require.Equal(t, []string{"reserve", "charge", "ship", "undo ship", "undo charge", "undo reserve"}, log.list())
	})
}

func TestSagaRequestedThroughTheTypedBinding(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	log := newSagaLog()
	b, err := workflow.Register(h.Registry, "typed", func(ctx context.Context, ev workflow.Event[struct{}], step workflow.Step) (string, error) {
		if _, err := workflow.DoWithCompensation(step, "hold",
			func(ctx context.Context) (string, error) { log.add("hold"); return "h-1", nil },
			func(ctx context.Context, id string) error { log.add("release " + id); return nil }); err != nil {
			return "", err
		}
		_, err := workflow.WaitForEvent[string](step, "confirm", workflow.WaitOptions{Type: "confirm"})
		return "confirmed", err
	})
	require.NoError(t, err)
	inst, err := b.Create(h.Context(), workflow.CreateOptions[struct{}]{ID: "x"})
	require.NoError(t, err)
	h.RunUntilIdle()
	require.NoError(t, inst.Compensate(h.Context()))
	h.RunUntilIdle()
	h.RequireStatus("typed", "x", dftype.StatusErrored)
	require.Equal(t, []string{"hold", "release h-1"}, log.list())
}

// frozenHeartbeat is a store whose lease heartbeats write nothing: the
// runner over it keeps running while its lease expires, as a process that
// froze or lost its network would.
type frozenHeartbeat struct{ db.Store }

func (frozenHeartbeat) TaskHeartbeat(context.Context, *db.TaskHeartbeatParams) error { return nil }

func TestSagaCompensationsRunOnceWhenARunnerLosesItsLease(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		log := newSagaLog()
		inUndo2 := make(chan struct{})
		var frozen atomic.Bool
		opts := sagaOpts{failAt: 4, compHook: func(ctx context.Context, n int) error {
			if n == 2 && frozen.CompareAndSwap(false, true) {
				// Runner a freezes inside this compensation, before its
				// side effect, and never comes back to it.
				close(inUndo2)
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}}
		var c *client.Client
		mk := func(id string, s db.Store) *runner.Runner {
			reg := workflow.NewRegistry()
			fiveSteps(t, reg, log, opts)
			r, err := runner.New(&runner.Config{Store: s, Registry: reg, Clock: clk, Logger: quietLogger, ID: id, LeaseDuration: time.Minute})
			require.NoError(t, err)
			if c == nil {
				c, err = client.New(&client.Config{Store: store, Registry: reg, Clock: clk})
				require.NoError(t, err)
			}
			return r
		}
		ra, rb := mk("a", frozenHeartbeat{store}), mk("b", store)
		ctx := context.Background()
		_, err := c.Create(ctx, "saga", dftype.CreateRequest{ID: "l"})
		require.NoError(t, err)
		aDone := runDueAsync(ctx, ra, 1)
		awaitSignal(t, inUndo2, "the compensation of step 2 on runner a")

		clk.Add(time.Minute + time.Second) // a's lease expires
		n, err := rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n, "runner b takes the expired lease over")
		info, err := c.Get(ctx, "saga", "l")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusErrored, info.Status)
		require.Equal(t, "NonRetryableError", info.Error.Name)

		// Runner a is stopped; whatever it still held is fenced out.
		stopCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		_ = ra.Stop(stopCtx)
		<-aDone
		require.Equal(t, []string{"step 1", "step 2", "step 3", "undo 3", "undo 2", "undo 1"}, log.list())
		for _, what := range []string{"step 1", "step 2", "step 3", "undo 3", "undo 2", "undo 1"} {
			require.Equal(t, 1, log.count(what), what)
		}
		got, err := c.Get(ctx, "saga", "l")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusErrored, got.Status, "the stale runner changed nothing")
	})
}

// requestAsItSuspends asks for the compensation of "order" in the
// underlying store just before the run's suspend commits, so that the
// suspend finds the request the run never saw. Any other InstanceCompensate
// call fails: the runner must not need one after the suspend (a runner that
// dies right after it committed would never make it).
type requestAsItSuspends struct {
	db.Store
	asked atomic.Bool
}

func (s *requestAsItSuspends) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if p.WorkflowName == "order" && p.Outcome == db.OutcomeSuspend && s.asked.CompareAndSwap(false, true) {
		now := p.Now
		if _, err := s.Store.InstanceCompensate(ctx, &db.InstanceCompensateParams{
			InstanceChangeParams: db.InstanceChangeParams{WorkflowName: p.WorkflowName, ID: p.InstanceID, Now: &now},
		}); err != nil {
			return nil, err
		}
	}
	return s.Store.Checkpoint(ctx, p)
}

func (s *requestAsItSuspends) InstanceCompensate(context.Context, *db.InstanceCompensateParams) (*db.Instance, error) {
	return nil, errors.New("the runner died after the suspend")
}

func TestSagaRequestedAsTheRunSuspendsIsNotParked(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		base := testharness.New(t, testharness.WithBackend(b))
		store := &requestAsItSuspends{Store: base.Store}
		h := testharness.New(t, testharness.WithStore(store))
		log := newSagaLog()
		orderSaga(t, h.Registry, log, nil, nil)
		_, err := h.Client.Create(h.Context(), "order", dftype.CreateRequest{ID: "s"})
		require.NoError(t, err)
		start := h.Now()
		h.RunUntilIdle()

		require.True(t, store.asked.Load(), "the request came as the run suspended")
		info := h.RequireStatus("order", "s", dftype.StatusErrored)
		require.Equal(t, workflow.ErrorNameCompensationRequested, info.Error.Name)
		require.Equal(t, start, h.Now(), "the compensation does not wait for the sleep")
		require.Equal(t, []string{"reserve", "charge", "ship", "undo ship", "undo charge", "undo reserve"}, log.list())
	})
}
