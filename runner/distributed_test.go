package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/dispatcher"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestDistributedSafety runs four runners against one database: every
// instance completes once and no step callback runs twice.
func TestDistributedSafety(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		const instances, steps, runners = 500, 5, 4
		store := b.NewStore(t)

		var calls sync.Map // "<instance>/<step>" -> *atomic.Int32
		count := func(key string) {
			v, _ := calls.LoadOrStore(key, new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
		}

		local := dispatcher.NewLocal()
		var regs []*workflow.Registry
		for range runners {
			reg := workflow.NewRegistry()
			workflow.MustRegister(reg, "five", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
				sum := 0
				for i := range steps {
					v, err := workflow.Do(step, fmt.Sprintf("step-%d", i), func(ctx context.Context) (int, error) {
						count(fmt.Sprintf("%s/%d", ev.InstanceID, i))
						return i, nil
					})
					if err != nil {
						return 0, err
					}
					sum += v
				}
				return sum, nil
			})
			regs = append(regs, reg)
			r, err := runner.New(&runner.Config{
				Store: store, Registry: reg, Logger: quietLogger, ID: fmt.Sprintf("runner-%d", len(regs)),
				MaxConcurrency: 8, PollInterval: 100 * time.Millisecond, WakeFunc: local.Wake,
			})
			require.NoError(t, err)
			local.Add(r)
			require.NoError(t, r.Start(context.Background()))
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				require.NoError(t, r.Stop(ctx))
			})
		}
		c, err := client.New(&client.Config{Store: store, Registry: regs[0], WakeFunc: local.Wake})
		require.NoError(t, err)

		ctx := context.Background()
		for b := 0; b < instances/100; b++ {
			reqs := make([]dftype.CreateRequest, 100)
			for i := range reqs {
				reqs[i] = dftype.CreateRequest{ID: fmt.Sprintf("i-%03d", b*100+i)}
			}
			created, err := c.CreateBatch(ctx, "five", reqs)
			require.NoError(t, err)
			require.Len(t, created, 100)
		}

		require.Eventually(t, func() bool {
			res, err := c.List(ctx, client.ListParams{WorkflowName: "five", Statuses: []dftype.InstanceStatus{dftype.StatusComplete}, PageSize: 1000})
			return err == nil && len(res.Instances) == instances
		}, 5*time.Minute, 20*time.Millisecond, "every instance completes")

		for i := range instances {
			id := fmt.Sprintf("i-%03d", i)
			info, err := c.Get(ctx, "five", id)
			require.NoError(t, err)
			require.Equal(t, dftype.StatusComplete, info.Status)
			require.JSONEq(t, "10", string(info.Output))
			for s := range steps {
				v, ok := calls.Load(fmt.Sprintf("%s/%d", id, s))
				require.True(t, ok, "step %d of %s never ran", s, id)
				require.EqualValues(t, 1, v.(*atomic.Int32).Load(), "step %d of %s ran more than once", s, id)
			}
			hist, err := c.History(ctx, "five", id, client.HistoryParams{})
			require.NoError(t, err)
			require.Len(t, hist.Steps, steps)
		}
	})
}

// faultyStore lets a test cut a runner off from the database.
type faultyStore struct {
	db.Store
	heartbeatsFail atomic.Bool
	dead           atomic.Bool
	checkpointErr  chan error
}

var errNetwork = errors.New("network unreachable")

func (f *faultyStore) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	if f.heartbeatsFail.Load() || f.dead.Load() {
		return errNetwork
	}
	return f.Store.TaskHeartbeat(ctx, p)
}

func (f *faultyStore) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	if f.dead.Load() {
		return errNetwork
	}
	return f.Store.TaskRelease(ctx, p)
}

func (f *faultyStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if f.dead.Load() {
		return nil, errNetwork
	}
	res, err := f.Store.Checkpoint(ctx, p)
	if f.checkpointErr != nil {
		f.checkpointErr <- err
	}
	return res, err
}

func (f *faultyStore) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	if f.dead.Load() {
		return nil, errNetwork
	}
	res, err := f.Store.(db.BatchCheckpointer).CheckpointBatch(ctx, ps)
	if f.checkpointErr != nil {
		for i := range ps {
			if err != nil {
				f.checkpointErr <- err
			} else {
				f.checkpointErr <- res[i].Err
			}
		}
	}
	return res, err
}

// blockingWorkflow registers "w": step "slow" blocks on the first call until
// release is closed; later calls return at once.
func blockingWorkflow(reg *workflow.Registry, started chan<- string, release <-chan struct{}, calls *atomic.Int32) {
	workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		return workflow.Do(step, "slow", func(ctx context.Context) (string, error) {
			n := calls.Add(1)
			who := fmt.Sprintf("call %d", n)
			if n == 1 {
				started <- who
				<-release
			}
			return who, nil
		})
	})
}

func TestStaleRunnerCannotCommit(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		lease := 30 * time.Second

		var calls atomic.Int32
		started := make(chan string, 1)
		release := make(chan struct{})

		// Runner A: its heartbeats never reach the database (a network partition).
		faulty := &faultyStore{Store: store, checkpointErr: make(chan error, 10)}
		faulty.heartbeatsFail.Store(true)
		regA := workflow.NewRegistry()
		blockingWorkflow(regA, started, release, &calls)
		ra, err := runner.New(&runner.Config{Store: faulty, Registry: regA, Clock: clk, Logger: quietLogger, ID: "a", LeaseDuration: lease})
		require.NoError(t, err)
		c, err := client.New(&client.Config{Store: store, Registry: regA, Clock: clk})
		require.NoError(t, err)

		// Runner B: healthy, same database.
		regB := workflow.NewRegistry()
		blockingWorkflow(regB, started, release, &calls)
		rb, err := runner.New(&runner.Config{Store: store, Registry: regB, Clock: clk, Logger: quietLogger, ID: "b", LeaseDuration: lease})
		require.NoError(t, err)

		ctx := context.Background()
		_, err = c.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		aDone := make(chan int)
		go func() { n, _ := ra.RunDue(ctx, 1); aDone <- n }()
		require.Equal(t, "call 1", <-started)

		n, err := rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Zero(t, n, "B cannot claim while A's lease is valid")
		clk.Add(lease + time.Second)
		n, err = rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n, "B reclaims the task after A's lease expired")

		info, err := c.Get(ctx, "w", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status)
		require.JSONEq(t, `"call 2"`, string(info.Output))

		close(release) // A's step finally returns; its checkpoint must change nothing
		require.Equal(t, 1, <-aDone)
		require.ErrorIs(t, <-faulty.checkpointErr, db.ErrLeaseLost)

		info, err = c.Get(ctx, "w", "x")
		require.NoError(t, err)
		require.JSONEq(t, `"call 2"`, string(info.Output), "the stale runner's result was not committed")
		hist, err := c.History(ctx, "w", "x", client.HistoryParams{})
		require.NoError(t, err)
		require.Len(t, hist.Steps, 1)
		require.JSONEq(t, `"call 2"`, string(hist.Steps[0].Result))
		require.Equal(t, 1, hist.Steps[0].Attempts)
	})
}

func TestKilledRunnerIsRecoveredAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		lease := 30 * time.Second

		var calls atomic.Int32
		started := make(chan string, 1)
		release := make(chan struct{})

		faulty := &faultyStore{Store: store}
		regA := workflow.NewRegistry()
		blockingWorkflow(regA, started, release, &calls)
		ra, err := runner.New(&runner.Config{Store: faulty, Registry: regA, Clock: clk, Logger: quietLogger, ID: "a", LeaseDuration: lease, ShutdownGrace: 100 * time.Millisecond})
		require.NoError(t, err)
		c, err := client.New(&client.Config{Store: store, Registry: regA, Clock: clk})
		require.NoError(t, err)

		ctx := context.Background()
		_, err = c.Create(ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		aDone := make(chan struct{})
		go func() { _, _ = ra.RunDue(ctx, 1); close(aDone) }()
		<-started

		// Kill A mid-step: it loses the database and is cancelled without cleanup.
		faulty.dead.Store(true)
		stopCtx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, ra.Stop(stopCtx), context.Canceled)
		<-aDone
		task, err := store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "x"})
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusProcessing, task.Status, "the dead runner could not give its task back")

		regB := workflow.NewRegistry()
		blockingWorkflow(regB, started, release, &calls)
		rb, err := runner.New(&runner.Config{Store: store, Registry: regB, Clock: clk, Logger: quietLogger, ID: "b", LeaseDuration: lease})
		require.NoError(t, err)
		n, err := rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Zero(t, n, "not before the lease expires")
		clk.Add(lease)
		n, err = rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		close(release)

		info, err := c.Get(ctx, "w", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status)
		require.JSONEq(t, `"call 2"`, string(info.Output))
	})
}
