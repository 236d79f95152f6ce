package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// flakyStore is a store whose checkpoints and heartbeats fail with a
// transient error (a lost connection) a given number of times before they
// reach the real store, and which can rewrite a step's result on its way to
// the database.
type flakyStore struct {
	db.Store
	// failures is how many more checkpoint and heartbeat calls fail.
	failures atomic.Int32
	// failed counts the calls that failed.
	failed atomic.Int32
	// rewrite, when set, replaces the result of every step write of that
	// key with poison before the store sees it.
	rewrite string
	poison  json.RawMessage
	// hold, when set, holds the first CheckpointBatch (after closing held)
	// until it is closed, so that the next checkpoints queue.
	hold, held chan struct{}
	batches    atomic.Int32
	// batchedRewrite and aloneRewrite are set when a batch of several
	// checkpoints, and a batch of one, held a write of the rewrite key.
	batchedRewrite, aloneRewrite atomic.Bool
}

var errConnReset = errors.New("read tcp 127.0.0.1:5432: connection reset by peer")

func (s *flakyStore) fail() error {
	if s.failures.Add(-1) >= 0 {
		s.failed.Add(1)
		return errConnReset
	}
	return nil
}

func (s *flakyStore) poisoned(p *db.CheckpointParams) *db.CheckpointParams {
	if s.rewrite == "" {
		return p
	}
	q := *p
	q.Steps = append([]db.StepWrite(nil), p.Steps...)
	for i := range q.Steps {
		if q.Steps[i].Key == s.rewrite && q.Steps[i].Status == db.StepStatusComplete {
			q.Steps[i].Result = s.poison
		}
	}
	return &q
}

func (s *flakyStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.Store.Checkpoint(ctx, s.poisoned(p))
}

func (s *flakyStore) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	if s.batches.Add(1) == 1 && s.hold != nil {
		close(s.held)
		<-s.hold
	}
	for _, p := range ps {
		if s.poisoned(p) != p && slices.ContainsFunc(p.Steps, func(w db.StepWrite) bool {
			return w.Key == s.rewrite && w.Status == db.StepStatusComplete
		}) {
			if len(ps) > 1 {
				s.batchedRewrite.Store(true)
			} else {
				s.aloneRewrite.Store(true)
			}
		}
	}
	if err := s.fail(); err != nil {
		return nil, err
	}
	out := make([]*db.CheckpointParams, len(ps))
	for i, p := range ps {
		out[i] = s.poisoned(p)
	}
	return s.Store.(db.BatchCheckpointer).CheckpointBatch(ctx, out)
}

func (s *flakyStore) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.TaskHeartbeat(ctx, p)
}

// poisonFor is a step result the backend's database refuses although it is
// valid JSON, so that it passes every check above the store: SQLite's
// json_valid refuses nesting deeper than 1000, Postgres refuses text that is
// not UTF-8.
func poisonFor(b testharness.Backend) json.RawMessage {
	if b.Name == testharness.Postgres.Name {
		return json.RawMessage("\"\xff\"")
	}
	return json.RawMessage(strings.Repeat("[", 1001) + strings.Repeat("]", 1001))
}

// TestRefusedStepResultFailsTheStep: a step result the database refuses
// fails that step for good, with an error naming the step and the cause,
// instead of being retried forever; the other instances of the same group
// commit are not affected (the batch is committed again one checkpoint at
// a time).
func TestRefusedStepResultFailsTheStep(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &flakyStore{
			Store: b.NewStore(t), rewrite: "fetch", poison: poisonFor(b),
			hold: make(chan struct{}), held: make(chan struct{}),
		}
		h := testharness.New(t, testharness.WithStore(store), testharness.WithRunnerConfig(func(c *runner.Config) {
			c.GroupCommitWorkers = 1
		}))
		var calls sync.Map
		count := func(key string) int32 {
			v, _ := calls.LoadOrStore(key, new(atomic.Int32))
			return v.(*atomic.Int32).Add(1)
		}
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if ev.InstanceID != "good-1" {
				// good-1's checkpoint is the first group commit, held
				// while the two others queue behind it.
				select {
				case <-store.held:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			if ev.InstanceID == "bad" {
				_, err := workflow.Do(step, "fetch", func(ctx context.Context) (string, error) {
					count(ev.InstanceID + "/fetch")
					return "refused by the store", nil
				})
				if err != nil {
					return "", err
				}
			}
			return workflow.Do(step, "other", func(ctx context.Context) (string, error) {
				count(ev.InstanceID + "/other")
				return "ok", nil
			})
		})
		for _, id := range []string{"good-1", "bad", "good-2"} {
			_, err := h.Client.Create(h.Context(), "w", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		done := make(chan int, 1)
		go func() { n, _ := h.Runner.RunDue(h.Context(), 10); done <- n }()
		select {
		case <-store.held:
		case <-time.After(10 * time.Second):
			t.Fatal("no group commit")
		}
		require.Eventually(t, func() bool { return runner.QueuedCheckpoints(h.Runner) == 2 }, 10*time.Second, time.Millisecond,
			"the checkpoints of bad and good-2 queue behind good-1's")
		close(store.hold)
		select {
		case n := <-done:
			require.Equal(t, 3, n)
		case <-time.After(20 * time.Second):
			t.Fatal("the runs did not end")
		}
		require.True(t, store.batchedRewrite.Load(), "the refused result was in a batch of several checkpoints")
		require.True(t, store.aloneRewrite.Load(), "which was committed again one checkpoint at a time")

		info := h.RequireStatus("w", "bad", dftype.StatusErrored)
		require.Contains(t, info.Error.Message, `step "fetch"`)
		require.Contains(t, info.Error.Message, "storing its result")
		require.Contains(t, info.Error.Message, runner.ErrorNameStoreRefused)
		hist := h.History("w", "bad")
		require.Len(t, hist.Steps, 1)
		require.Equal(t, "errored", hist.Steps[0].Status)
		require.Equal(t, 1, hist.Steps[0].Attempts)
		v, _ := calls.Load("bad/fetch")
		require.Equal(t, int32(1), v.(*atomic.Int32).Load(), "the step ran once")

		for _, id := range []string{"good-1", "good-2"} {
			var out string
			h.RequireOutput("w", id, &out)
			require.Equal(t, "ok", out)
		}
		_, err := h.Store.TaskGet(h.Context(), db.InstanceRef{WorkflowName: "w", ID: "bad"})
		require.ErrorIs(t, err, db.ErrNotFound, "nothing is left to retry")
	})
}

// TestTransientStoreErrorsAreRetried: checkpoints and heartbeats that fail
// with a transient error are retried while the lease holds, so the run goes
// on as soon as the store answers: no step runs twice and the task is
// neither given back nor left to expire.
func TestTransientStoreErrorsAreRetried(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &flakyStore{Store: b.NewStore(t)}
		h := testharness.New(t, testharness.WithStore(store))
		var calls [3]atomic.Int32
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			sum := 0
			for i := range calls {
				v, err := workflow.Do(step, fmt.Sprintf("s%d", i), func(ctx context.Context) (int, error) {
					calls[i].Add(1)
					// Each step's checkpoint fails three times first.
					store.failures.Store(3)
					return i, nil
				})
				if err != nil {
					return 0, err
				}
				sum += v
			}
			store.failures.Store(3) // and so does the run's last one
			return sum, nil
		})
		_, err := h.Client.Create(h.Context(), "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		start := time.Now()
		n, err := h.Runner.RunDue(h.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		var out int
		h.RequireOutput("w", "x", &out)
		require.Equal(t, 3, out)
		require.Equal(t, int32(12), store.failed.Load())
		for i := range calls {
			require.Equal(t, int32(1), calls[i].Load(), "step s%d ran once", i)
		}
		require.Equal(t, int64(1), h.Runner.Claimed(), "claimed once: never given back")
		require.Less(t, time.Since(start), 10*time.Second, "backoff starts small")
	})
}

// TestStoreFailureOutlastingTheLeaseIsALeaseLoss: a checkpoint whose store
// keeps failing is retried until the lease could have expired; then the run
// is given back, and the hand-back counts as a lost lease, so that an error
// that is not transient after all meets MaxLeaseLosses instead of looping.
func TestStoreFailureOutlastingTheLeaseIsALeaseLoss(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &flakyStore{Store: b.NewStore(t)}
		h := testharness.New(t, testharness.WithStore(store))
		var calls atomic.Int32
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "s", func(ctx context.Context) (int, error) {
				calls.Add(1)
				store.failures.Store(1 << 30) // the store fails from here on
				return 1, nil
			})
		})
		_, err := h.Client.Create(h.Context(), "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		done := make(chan int, 1)
		go func() { n, _ := h.Runner.RunDue(h.Context(), 1); done <- n }()
		require.Eventually(t, func() bool { return store.failed.Load() >= 2 }, 10*time.Second, 5*time.Millisecond,
			"the checkpoint is retried")
		select {
		case <-done:
			t.Fatal("the runner gave up while its lease held")
		default:
		}

		h.Advance(31 * time.Second) // past the lease
		select {
		case n := <-done:
			require.Equal(t, 1, n)
		case <-time.After(10 * time.Second):
			t.Fatal("the runner kept retrying after its lease could have expired")
		}
		store.failures.Store(0)
		task, err := h.Store.TaskGet(h.Context(), db.InstanceRef{WorkflowName: "w", ID: "x"})
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusPending, task.Status, "given back")
		require.Equal(t, 1, task.LeaseLosses)
		require.Contains(t, task.LastError, "connection reset")
		require.Equal(t, int32(1), calls.Load())
	})
}
