package runner_test

import (
	"context"
	"errors"
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

// stepFailStore is a store whose checkpoints fail with an error that is
// neither transient nor db.ErrInvalidData (an SQL error after a bad
// migration, a statement timeout on a large row) whenever they complete the
// step named key, while everything else, heartbeats included, succeeds.
type stepFailStore struct {
	db.Store
	key        string
	failed     atomic.Int32
	heartbeats atomic.Int32
}

var errColumnMissing = errors.New(`ERROR: column "result_v2" does not exist (SQLSTATE 42703)`)

func (s *stepFailStore) fails(ps ...*db.CheckpointParams) bool {
	for _, p := range ps {
		for _, w := range p.Steps {
			if w.Key == s.key && w.Status == db.StepStatusComplete {
				s.failed.Add(1)
				return true
			}
		}
	}
	return false
}

func (s *stepFailStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if s.fails(p) {
		return nil, errColumnMissing
	}
	return s.Store.Checkpoint(ctx, p)
}

func (s *stepFailStore) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	if s.fails(ps...) {
		return nil, errColumnMissing
	}
	return s.Store.(db.BatchCheckpointer).CheckpointBatch(ctx, ps)
}

func (s *stepFailStore) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	err := s.Store.TaskHeartbeat(ctx, p)
	if err == nil {
		s.heartbeats.Add(1)
	}
	return err
}

// TestCheckpointOnlyFailureIsBoundedByOneLease: a checkpoint that keeps
// failing while the heartbeats succeed (and so keep moving the lease) is
// retried for the lease it had when it began failing, not for as long as
// the heartbeats go on; each giving-up hands the run back counting a lease
// loss, so after MaxLeaseLosses rounds the instance errors.
func TestCheckpointOnlyFailureIsBoundedByOneLease(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &stepFailStore{Store: b.NewStore(t), key: "big"}
		h := testharness.New(t, testharness.WithStore(store), testharness.WithRunnerConfig(func(c *runner.Config) {
			c.MaxLeaseLosses = 2
		}))
		var calls atomic.Int32
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			return workflow.Do(step, "big", func(ctx context.Context) (int, error) {
				calls.Add(1)
				return 1, nil
			})
		})
		_, err := h.Client.Create(h.Context(), "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		// round runs the task once: its checkpoint fails until the runner
		// gives up. The clock moves a heartbeat interval at a time, once a
		// heartbeat renewed the lease and the checkpoint was tried again,
		// for at most four leases.
		round := func(losses int) {
			t.Helper()
			failed := store.failed.Load()
			done := make(chan int, 1)
			go func() { n, _ := h.Runner.RunDue(h.Context(), 1); done <- n }()
			require.Eventually(t, func() bool { return store.failed.Load() >= failed+2 }, 10*time.Second, 5*time.Millisecond,
				"the checkpoint is retried")
			start := h.Now()
			for range 12 {
				beats, tries := store.heartbeats.Load(), store.failed.Load()
				h.Advance(10 * time.Second) // the heartbeat interval of a 30 s lease
				deadline := time.After(10 * time.Second)
			wait:
				for {
					select {
					case n := <-done:
						require.Equal(t, 1, n)
						// The lease, and the step the test may take before
						// the retry reads the clock.
						require.LessOrEqual(t, h.Now().Sub(start), 40*time.Second, "gave up after about one lease")
						task, err := h.Store.TaskGet(h.Context(), db.InstanceRef{WorkflowName: "w", ID: "x"})
						require.NoError(t, err)
						require.Equal(t, db.TaskStatusPending, task.Status, "given back")
						require.Equal(t, losses, task.LeaseLosses)
						require.Contains(t, task.LastError, "SQLSTATE 42703")
						return
					case <-deadline:
						t.Fatal("neither a heartbeat nor the end of the run")
					case <-time.After(5 * time.Millisecond):
						if store.heartbeats.Load() > beats && store.failed.Load() > tries {
							break wait
						}
					}
				}
			}
			t.Fatal("the checkpoint was retried for four leases while the heartbeats renewed the lease")
		}
		round(1)
		h.Advance(time.Second) // the hand-back's delay (PollInterval)
		round(2)
		h.Advance(time.Second)

		n, err := h.Runner.RunDue(h.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		info := h.RequireStatus("w", "x", dftype.StatusErrored)
		require.Equal(t, runner.ErrorNameRunnerLost, info.Error.Name)
		require.Equal(t, `step "big" lost its runner 2 times`, info.Error.Message)
		require.Equal(t, int32(2), calls.Load())
	})
}

// TestStopMidCheckpointCountsNoLeaseLoss: a runner stopped while it retries
// a run's last checkpoint gives the task back without counting a lease
// loss: a shutdown is not a crash, and must not bring a run closer to
// MaxLeaseLosses.
func TestStopMidCheckpointCountsNoLeaseLoss(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &flakyStore{Store: b.NewStore(t)}
		h := testharness.New(t, testharness.WithStore(store))
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			store.failures.Store(1 << 30) // the store fails from here on
			return 1, nil
		})
		_, err := h.Client.Create(h.Context(), "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		done := make(chan int, 1)
		go func() { n, _ := h.Runner.RunDue(h.Context(), 1); done <- n }()
		require.Eventually(t, func() bool { return store.failed.Load() >= 2 }, 10*time.Second, 5*time.Millisecond,
			"the last checkpoint is retried")

		stopCtx, cancel := context.WithCancel(context.Background())
		cancel() // stop at once: cancel what runs
		require.ErrorIs(t, h.Runner.Stop(stopCtx), context.Canceled)
		select {
		case n := <-done:
			require.Equal(t, 1, n)
		case <-time.After(10 * time.Second):
			t.Fatal("the run did not end when the runner stopped")
		}
		store.failures.Store(0)
		task, err := h.Store.TaskGet(h.Context(), db.InstanceRef{WorkflowName: "w", ID: "x"})
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusPending, task.Status, "given back")
		require.Zero(t, task.LeaseLosses, "a shutdown is not a lost lease")
	})
}
