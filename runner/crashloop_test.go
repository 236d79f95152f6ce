package runner_test

import (
	"context"
	"encoding/json"
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

// crashLoop sets up an instance whose step "fetch" kills its runner on
// every attempt: a runner ran "prepare" and died in "fetch", and deaths
// more runners claimed the task after its lease expired and died too. The
// claims and the checkpoint of the dead runners are made by hand, as they
// would have made them. It returns the harness (whose runner has not run
// yet) and the calls of each step's function.
func crashLoop(t *testing.T, b testharness.Backend, deaths int, opts ...testharness.Option) (h *testharness.Harness, prepare, fetch *atomic.Int32) {
	t.Helper()
	h = testharness.New(t, append([]testharness.Option{testharness.WithBackend(b)}, opts...)...)
	prepare, fetch = new(atomic.Int32), new(atomic.Int32)
	workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		if _, err := workflow.Do(step, "prepare", func(ctx context.Context) (string, error) {
			prepare.Add(1)
			return "ready", nil
		}); err != nil {
			return "", err
		}
		return workflow.Do(step, "fetch", func(ctx context.Context) (string, error) {
			fetch.Add(1)
			return "fetched", nil
		})
	})
	ctx := h.Context()
	_, err := h.Client.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
	require.NoError(t, err)
	const lease = 30 * time.Second // the runner's default
	claim := func(owner string) *db.Task {
		now := h.Now().UTC().Truncate(time.Microsecond)
		tasks, err := h.Store.TaskClaim(ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{"w"}, Max: 1, Now: now, LockedUntil: now.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		return tasks[0].Task
	}
	first := claim("dead-0")
	_, err = h.Store.Checkpoint(ctx, &db.CheckpointParams{
		Task: db.TaskRef{ID: first.ID, Version: first.Version}, WorkflowName: "w", InstanceID: "x", RunNumber: 1,
		Now: h.Now().UTC().Truncate(time.Microsecond), Outcome: db.OutcomeContinue,
		Steps: []db.StepWrite{{Key: "prepare", Type: db.StepTypeDo, Status: db.StepStatusComplete, Attempts: 1, MaxAttempts: 1, Result: json.RawMessage(`"ready"`)}},
	})
	require.NoError(t, err)
	for i := 1; i < deaths; i++ {
		h.Advance(lease + time.Second)
		require.Equal(t, i, claim(fmt.Sprintf("dead-%d", i)).LeaseLosses)
	}
	h.Advance(lease + time.Second) // the last one's lease expires too
	return h, prepare, fetch
}

// TestCrashLoopErrorsTheInstance: once a task's lease expired without a
// checkpoint MaxLeaseLosses times, the runner that claims it next errors the
// instance, naming the step, instead of running the step again.
func TestCrashLoopErrorsTheInstance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, prepare, fetch := crashLoop(t, b, 5)
		n, err := h.Runner.RunDue(h.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		info := h.RequireStatus("w", "x", dftype.StatusErrored)
		require.Equal(t, runner.ErrorNameRunnerLost, info.Error.Name)
		require.Equal(t, `step "fetch" lost its runner 5 times`, info.Error.Message)
		require.Zero(t, prepare.Load(), "prepare was replayed")
		require.Zero(t, fetch.Load(), "fetch did not run again")
		hist := h.History("w", "x")
		require.Len(t, hist.Steps, 2)
		require.Equal(t, "fetch", hist.Steps[1].Name)
		require.Equal(t, "errored", hist.Steps[1].Status)
	})
}

// TestCrashLoopPastTheLimitEndsWithoutRunning: a run that still lost its
// runner once it had reached the limit (it died before it reached a step,
// in workflow code or replay) is errored without running its code.
func TestCrashLoopPastTheLimitEndsWithoutRunning(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, prepare, fetch := crashLoop(t, b, 6)
		n, err := h.Runner.RunDue(h.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		info := h.RequireStatus("w", "x", dftype.StatusErrored)
		require.Equal(t, runner.ErrorNameRunnerLost, info.Error.Name)
		require.Equal(t, "the run lost its runner 6 times", info.Error.Message)
		require.Zero(t, prepare.Load()+fetch.Load(), "no code ran")
	})
}

// lossWatchStore reads the task's lease losses through the store right
// after a checkpoint of step key commits.
type lossWatchStore struct {
	db.Store
	key    string
	losses atomic.Int32
	read   atomic.Bool
}

func (s *lossWatchStore) watch(ctx context.Context, p *db.CheckpointParams) {
	for _, w := range p.Steps {
		if w.Key != s.key {
			continue
		}
		task, err := s.Store.TaskGet(ctx, db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.InstanceID})
		if err == nil {
			s.losses.Store(int32(task.LeaseLosses))
			s.read.Store(true)
		}
	}
}

func (s *lossWatchStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	res, err := s.Store.Checkpoint(ctx, p)
	if err == nil {
		s.watch(ctx, p)
	}
	return res, err
}

func (s *lossWatchStore) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	res, err := s.Store.(db.BatchCheckpointer).CheckpointBatch(ctx, ps)
	if err == nil {
		for i, p := range ps {
			if res[i].Err == nil {
				s.watch(ctx, p)
			}
		}
	}
	return res, err
}

// TestCrashLoopBelowTheLimitRunsAgain: a task that lost fewer leases than
// MaxLeaseLosses runs its step again, and its checkpoint resets the count.
func TestCrashLoopBelowTheLimitRunsAgain(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &lossWatchStore{Store: b.NewStore(t), key: "fetch"}
		h, _, fetch := crashLoop(t, b, 4, testharness.WithStore(store))
		n, err := h.Runner.RunDue(h.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		var out string
		h.RequireOutput("w", "x", &out)
		require.Equal(t, "fetched", out)
		require.Equal(t, int32(1), fetch.Load())
		require.True(t, store.read.Load(), "the task was read after fetch's checkpoint")
		require.Zero(t, store.losses.Load(), "fetch's checkpoint reset the lease losses")
	})
}

// TestCrashLoopEndsWhenAnEventIsConsumed: a run claimed at the limit whose
// first step consumes a buffered event made progress: that checkpoint
// resets the task's lease losses, so the next step runs instead of erroring
// the instance with a crash loop it never had.
func TestCrashLoopEndsWhenAnEventIsConsumed(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		var fetch atomic.Int32
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := step.WaitForEvent("approval", workflow.WaitOptions{Type: "approved", Timeout: time.Hour}); err != nil {
				return "", err
			}
			return workflow.Do(step, "fetch", func(ctx context.Context) (string, error) {
				fetch.Add(1)
				return "fetched", nil
			})
		})
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		const lease = 30 * time.Second
		for i := range 5 { // runners that died before the wait
			now := h.Now().UTC().Truncate(time.Microsecond)
			tasks, err := h.Store.TaskClaim(ctx, &db.TaskClaimParams{
				Owner: fmt.Sprintf("dead-%d", i), WorkflowNames: []string{"w"}, Max: 1, Now: now, LockedUntil: now.Add(lease),
			})
			require.NoError(t, err)
			require.Len(t, tasks, 1)
			require.Equal(t, i, tasks[0].Task.LeaseLosses)
			h.Advance(lease + time.Second)
		}
		h.SendEvent("w", "x", "approved", map[string]bool{"ok": true})

		n, err := h.Runner.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		var out string
		h.RequireOutput("w", "x", &out)
		require.Equal(t, "fetched", out)
		require.Equal(t, int32(1), fetch.Load())
	})
}
