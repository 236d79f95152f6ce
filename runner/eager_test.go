package runner_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

var _ client.EagerResumer = (*runner.Runner)(nil)

// eagerHost is a client and a started runner in one process, wired as the
// hosts wire them, with the runner attached as the client's eager starter.
type eagerHost struct {
	store  db.Store
	reg    *workflow.Registry
	client *client.Client
	runner *runner.Runner
}

// newEagerHost builds the host on store; adjust changes the runner's config.
// The runner polls rarely, so that only wake-ups and eager starts move work,
// and is started unless the test starts it itself.
func newEagerHost(t *testing.T, store db.Store, reg *workflow.Registry, start bool, adjust func(*runner.Config)) *eagerHost {
	t.Helper()
	cfg := &runner.Config{MaxConcurrency: 4, PollInterval: time.Hour}
	if adjust != nil {
		adjust(cfg)
	}
	// The test starts the runner itself (start), so the host does not.
	host, err := duraflow.New(store, &duraflow.Config{
		Registry: reg, Logger: quietLogger, Runner: cfg, RunMode: duraflow.RunOnDemand, DisableScheduler: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = host.Stop(ctx)
	})
	h := &eagerHost{store: store, reg: reg, client: host.Client(), runner: host.Runner()}
	if start {
		h.start(t)
	}
	return h
}

// start starts the runner and waits until its loop has looked for work once
// and gone idle, so that it holds no slot for a claim in flight.
func (h *eagerHost) start(t *testing.T) {
	t.Helper()
	require.NoError(t, h.runner.Start(context.Background()))
	require.Eventually(t, func() bool { return h.runner.Polls() >= 1 }, 30*time.Second, time.Millisecond)
}

func (h *eagerHost) waitStatus(t *testing.T, name, id string, want dftype.InstanceStatus) *dftype.InstanceInfo {
	t.Helper()
	var info *dftype.InstanceInfo
	require.Eventually(t, func() bool {
		var err error
		info, err = h.client.Get(context.Background(), name, id)
		return err == nil && info.Status == want
	}, time.Minute, 2*time.Millisecond, "%s/%s never became %s", name, id, want)
	return info
}

// registerSteps registers name: n steps, each returning its index; the
// workflow returns their sum.
func registerSteps(reg *workflow.Registry, name string, n int) {
	workflow.MustRegister(reg, name, func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
		sum := 0
		for i := range n {
			v, err := workflow.Do(step, fmt.Sprintf("s-%d", i), func(ctx context.Context) (int, error) { return i, nil })
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
}

// registerGate registers name: its one step blocks until release is closed,
// after reporting the instance on started.
func registerGate(reg *workflow.Registry, name string, started chan<- string, release <-chan struct{}) {
	workflow.MustRegister(reg, name, func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		return workflow.Do(step, "gate", func(ctx context.Context) (string, error) {
			started <- ev.InstanceID
			select {
			case <-release:
				return "released", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
	})
}

func TestEagerStartRunsWithoutAClaim(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		registerSteps(reg, "three", 3)
		h := newEagerHost(t, b.NewStore(t), reg, true, nil)
		ctx := context.Background()

		info, err := h.client.Create(ctx, "three", dftype.CreateRequest{ID: "one"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, info.Status, "created running, not queued")
		require.NotNil(t, info.StartedAt)

		batch, err := h.client.CreateBatch(ctx, "three", []dftype.CreateRequest{{ID: "b1"}, {ID: "b2"}})
		require.NoError(t, err)
		for _, inst := range batch {
			require.Equal(t, dftype.StatusRunning, inst.Status)
		}
		for _, id := range []string{"one", "b1", "b2"} {
			done := h.waitStatus(t, "three", id, dftype.StatusComplete)
			require.JSONEq(t, "3", string(done.Output))
			require.Len(t, mustHistory(t, h.client, "three", id).Steps, 3)
		}
		require.EqualValues(t, 3, h.runner.EagerStarts())
		require.Zero(t, h.runner.Claimed(), "no claim round trip")
	})
}

func mustHistory(t *testing.T, c *client.Client, name, id string) *client.History {
	t.Helper()
	hist, err := c.History(context.Background(), name, id, client.HistoryParams{})
	require.NoError(t, err)
	return hist
}

func TestEagerStartFallsBackToTheQueue(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()

		t.Run("RunnerNotStarted", func(t *testing.T) {
			reg := workflow.NewRegistry()
			registerSteps(reg, "w", 1)
			h := newEagerHost(t, b.NewStore(t), reg, false, nil)
			info, err := h.client.Create(ctx, "w", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusQueued, info.Status)
			h.start(t)
			h.waitStatus(t, "w", "a", dftype.StatusComplete)
			require.Zero(t, h.runner.EagerStarts())
			require.EqualValues(t, 1, h.runner.Claimed())
		})

		t.Run("RunnerStopped", func(t *testing.T) {
			reg := workflow.NewRegistry()
			registerSteps(reg, "w", 1)
			h := newEagerHost(t, b.NewStore(t), reg, true, nil)
			require.NoError(t, h.runner.Stop(ctx))
			info, err := h.client.Create(ctx, "w", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusQueued, info.Status)
			task, err := h.store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "a"})
			require.NoError(t, err)
			require.Equal(t, db.TaskStatusPending, task.Status)
			require.Zero(t, h.runner.EagerStarts())
		})

		t.Run("Disabled", func(t *testing.T) {
			reg := workflow.NewRegistry()
			registerSteps(reg, "w", 1)
			h := newEagerHost(t, b.NewStore(t), reg, true, func(c *runner.Config) { c.DisableEagerStart = true })
			info, err := h.client.Create(ctx, "w", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusQueued, info.Status)
			h.waitStatus(t, "w", "a", dftype.StatusComplete)
			require.Zero(t, h.runner.EagerStarts())
			require.EqualValues(t, 1, h.runner.Claimed())
		})

		t.Run("WorkflowNotRegisteredOnTheRunner", func(t *testing.T) {
			store := b.NewStore(t)
			runnerReg := workflow.NewRegistry()
			registerSteps(runnerReg, "w", 1)
			h := newEagerHost(t, store, runnerReg, true, nil)
			clientReg := workflow.NewRegistry()
			registerSteps(clientReg, "w", 1)
			registerSteps(clientReg, "elsewhere", 1)
			c, err := client.New(&client.Config{Store: store, Registry: clientReg, EagerStarter: h.runner})
			require.NoError(t, err)
			info, err := c.Create(ctx, "elsewhere", dftype.CreateRequest{ID: "x"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusQueued, info.Status, "left for a runner that has it")
			info, err = c.Create(ctx, "w", dftype.CreateRequest{ID: "y"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusRunning, info.Status)
			h.waitStatus(t, "w", "y", dftype.StatusComplete)
			require.EqualValues(t, 1, h.runner.EagerStarts())
		})

		t.Run("RunnerFull", func(t *testing.T) {
			reg := workflow.NewRegistry()
			started := make(chan string, 10)
			release := make(chan struct{})
			registerGate(reg, "gate", started, release)
			h := newEagerHost(t, b.NewStore(t), reg, true, func(c *runner.Config) { c.MaxConcurrency = 2 })

			// A batch of five takes the two free slots and queues the rest.
			reqs := make([]dftype.CreateRequest, 5)
			for i := range reqs {
				reqs[i] = dftype.CreateRequest{ID: fmt.Sprintf("g-%d", i)}
			}
			created, err := h.client.CreateBatch(ctx, "gate", reqs)
			require.NoError(t, err)
			var statuses []dftype.InstanceStatus
			for _, inst := range created {
				statuses = append(statuses, inst.Status)
			}
			require.Equal(t, []dftype.InstanceStatus{
				dftype.StatusRunning, dftype.StatusRunning,
				dftype.StatusQueued, dftype.StatusQueued, dftype.StatusQueued,
			}, statuses)
			require.ElementsMatch(t, []string{"g-0", "g-1"}, []string{<-started, <-started})

			// Every slot is busy: a single create is queued too.
			info, err := h.client.Create(ctx, "gate", dftype.CreateRequest{ID: "single"})
			require.NoError(t, err)
			require.Equal(t, dftype.StatusQueued, info.Status)

			close(release)
			for _, r := range append(reqs, dftype.CreateRequest{ID: "single"}) {
				h.waitStatus(t, "gate", r.ID, dftype.StatusComplete)
			}
			require.EqualValues(t, 2, h.runner.EagerStarts())
			require.EqualValues(t, 4, h.runner.Claimed())
		})

		t.Run("ExistingIDStartsNothing", func(t *testing.T) {
			reg := workflow.NewRegistry()
			started := make(chan string, 10)
			release := make(chan struct{})
			registerGate(reg, "gate", started, release)
			h := newEagerHost(t, b.NewStore(t), reg, true, func(c *runner.Config) { c.MaxConcurrency = 1 })
			_, err := h.client.Create(ctx, "gate", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err)
			require.Equal(t, "a", <-started)
			close(release)
			h.waitStatus(t, "gate", "a", dftype.StatusComplete)

			// The reservation of a create that fails is given back: the
			// runner's one slot is free for the next create.
			_, err = h.client.Create(ctx, "gate", dftype.CreateRequest{ID: "a"})
			require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)
			created, err := h.client.CreateBatch(ctx, "gate", []dftype.CreateRequest{{ID: "a"}, {ID: "b"}})
			require.NoError(t, err)
			require.Len(t, created, 1)
			require.Equal(t, dftype.StatusQueued, created[0].Status, "the existing id used the batch's one slot")
			info, err := h.client.Create(ctx, "gate", dftype.CreateRequest{ID: "c"})
			require.NoError(t, err)
			require.Contains(t, []dftype.InstanceStatus{dftype.StatusRunning, dftype.StatusQueued}, info.Status)
			h.waitStatus(t, "gate", "b", dftype.StatusComplete)
			h.waitStatus(t, "gate", "c", dftype.StatusComplete)
			require.Equal(t, dftype.StatusComplete, h.waitStatus(t, "gate", "a", dftype.StatusComplete).Status)
		})
	})
}

// deadStore cuts a runner off from the database once dead is set: every
// write and claim fails, as if its process had died.
type deadStore struct {
	db.Store
	dead atomic.Bool
}

func (d *deadStore) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]db.Claim, error) {
	if d.dead.Load() {
		return nil, errNetwork
	}
	return d.Store.TaskClaim(ctx, p)
}

func (d *deadStore) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	if d.dead.Load() {
		return errNetwork
	}
	return d.Store.TaskHeartbeat(ctx, p)
}

func (d *deadStore) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	if d.dead.Load() {
		return errNetwork
	}
	return d.Store.TaskRelease(ctx, p)
}

func (d *deadStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if d.dead.Load() {
		return nil, errNetwork
	}
	return d.Store.Checkpoint(ctx, p)
}

func (d *deadStore) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	if d.dead.Load() {
		return nil, errNetwork
	}
	return d.Store.(db.BatchCheckpointer).CheckpointBatch(ctx, ps)
}

// TestEagerStartCrashAfterCommit: the runner an instance was eagerly started
// on dies right after the create committed; its lease expires and another
// runner claims and finishes the instance.
func TestEagerStartCrashAfterCommit(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		store := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		var calls atomic.Int32
		newReg := func() *workflow.Registry {
			reg := workflow.NewRegistry()
			workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
				return workflow.Do(step, "only", func(ctx context.Context) (string, error) {
					calls.Add(1)
					return "done", nil
				})
			})
			return reg
		}

		// Runner A: the one the create hands the instance to, cut off from
		// the database as soon as the create has committed.
		dead := &deadStore{Store: store}
		regA := newReg()
		a, err := runner.New(&runner.Config{
			Store: dead, Registry: regA, Clock: clk, Logger: quietLogger, ID: "a",
			LeaseDuration: 30 * time.Second, GroupCommitMax: 1,
		})
		require.NoError(t, err)
		c, err := client.New(&client.Config{
			Store: store, Registry: regA, Clock: clk,
			EagerStarter: &dyingStarter{Runner: a, dead: &dead.dead},
		})
		require.NoError(t, err)
		require.NoError(t, a.Start(ctx))
		// The loop's first claim holds every free slot while it runs; a
		// create in that window finds none and queues the instance. Wait
		// until that claim is over: on the mock clock nothing makes the
		// loop claim again.
		require.Eventually(t, func() bool { return a.Polls() >= 1 }, 10*time.Second, time.Millisecond)

		info, err := c.Create(ctx, "w", dftype.CreateRequest{ID: "crash"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, info.Status)
		task, err := store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "crash"})
		require.NoError(t, err)
		require.Equal(t, "a", task.LockOwner)
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = a.Stop(stopCtx) // its execution could write nothing
		require.EqualValues(t, 1, a.EagerStarts())

		// Runner B claims nothing while A's lease holds, and takes the
		// instance over once it expired.
		bRunner, err := runner.New(&runner.Config{
			Store: store, Registry: newReg(), Clock: clk, Logger: quietLogger, ID: "b", LeaseDuration: 30 * time.Second,
		})
		require.NoError(t, err)
		n, err := bRunner.RunDue(ctx, 10)
		require.NoError(t, err)
		require.Zero(t, n)
		clk.Add(30 * time.Second)
		n, err = bRunner.RunDue(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)

		got, err := c.Get(ctx, "w", "crash")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, got.Status)
		require.JSONEq(t, `"done"`, string(got.Output))
		require.EqualValues(t, 1, bRunner.Claimed())
		require.GreaterOrEqual(t, calls.Load(), int32(1))
	})
}

// dyingStarter is a runner whose process dies between the create's commit
// and the first write of the execution it starts.
type dyingStarter struct {
	*runner.Runner
	dead *atomic.Bool
}

func (d *dyingStarter) StartEager(lease *db.CreateLease, created []db.CreateResult) {
	d.dead.Store(true)
	d.Runner.StartEager(lease, created)
}

// TestEagerStartSharesTheConcurrencyLimit creates instances from many
// goroutines, singly and in batches, into a runner that both starts them
// eagerly and claims the rest: it never runs more than MaxConcurrency at once.
func TestEagerStartSharesTheConcurrencyLimit(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		const limit, creators, perCreator = 3, 4, 12
		var running, peak atomic.Int32
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (int, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			return workflow.Do(step, "s", func(ctx context.Context) (int, error) {
				time.Sleep(time.Millisecond) // overlap executions
				return 1, nil
			})
		})
		h := newEagerHost(t, b.NewStore(t), reg, true, func(c *runner.Config) {
			c.MaxConcurrency = limit
			c.PollInterval = 50 * time.Millisecond
		})
		ctx := context.Background()

		var wg sync.WaitGroup
		var ids sync.Map
		for g := range creators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < perCreator; {
					if i%3 == 0 {
						id := fmt.Sprintf("c%d-%d", g, i)
						_, err := h.client.Create(ctx, "w", dftype.CreateRequest{ID: id})
						if !(assertNoError(t, err)) {
							return
						}
						ids.Store(id, true)
						i++
						continue
					}
					reqs := []dftype.CreateRequest{{ID: fmt.Sprintf("c%d-%d", g, i)}, {ID: fmt.Sprintf("c%d-%d", g, i+1)}}
					_, err := h.client.CreateBatch(ctx, "w", reqs)
					if !(assertNoError(t, err)) {
						return
					}
					for _, r := range reqs {
						ids.Store(r.ID, true)
					}
					i += 2
				}
			}()
		}
		wg.Wait()
		total := 0
		ids.Range(func(k, _ any) bool {
			total++
			h.waitStatus(t, "w", k.(string), dftype.StatusComplete)
			return true
		})
		require.GreaterOrEqual(t, total, creators*perCreator)
		require.LessOrEqual(t, peak.Load(), int32(limit), "never more than MaxConcurrency at once")
		require.GreaterOrEqual(t, h.runner.EagerStarts()+h.runner.Claimed(), int64(total))
	})
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("create: %v", err)
		return false
	}
	return true
}

// registerWaiter registers name: it waits for an event "go" and returns its
// payload.
func registerWaiter(reg *workflow.Registry, name string) {
	workflow.MustRegister(reg, name, func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		return workflow.WaitForEvent[string](step, "wait", workflow.WaitOptions{Type: "go"})
	})
}

func TestEagerResumeRunsAWokenRunWithoutAClaim(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()

		t.Run("Eager", func(t *testing.T) {
			reg := workflow.NewRegistry()
			registerWaiter(reg, "wait")
			h := newEagerHost(t, b.NewStore(t), reg, true, nil)
			_, err := h.client.Create(ctx, "wait", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err)
			h.waitStatus(t, "wait", "a", dftype.StatusWaiting)

			for range 5 { // sends that wake nothing give their slot back
				require.NoError(t, h.client.SendEvent(ctx, "wait", "a", "other", nil))
			}
			require.NoError(t, h.client.SendEvent(ctx, "wait", "a", "go", []byte(`"v"`)))
			done := h.waitStatus(t, "wait", "a", dftype.StatusComplete)
			require.JSONEq(t, `"v"`, string(done.Output))
			require.EqualValues(t, 2, h.runner.EagerStarts(), "the create and the send")
			require.Zero(t, h.runner.Claimed(), "no claim round trip")

			// No slot leaked: once the run has finished, all four are free.
			require.Eventually(t, func() bool {
				lease := h.runner.ReserveEager("wait", 4)
				defer h.runner.StartEager(lease, nil)
				return lease != nil && lease.Max == 4
			}, 10*time.Second, time.Millisecond)
		})

		t.Run("Disabled", func(t *testing.T) {
			reg := workflow.NewRegistry()
			registerWaiter(reg, "wait")
			h := newEagerHost(t, b.NewStore(t), reg, true, func(c *runner.Config) { c.DisableEagerStart = true })
			_, err := h.client.Create(ctx, "wait", dftype.CreateRequest{ID: "a"})
			require.NoError(t, err)
			h.waitStatus(t, "wait", "a", dftype.StatusWaiting)
			require.NoError(t, h.client.SendEvent(ctx, "wait", "a", "go", []byte(`"v"`)))
			h.waitStatus(t, "wait", "a", dftype.StatusComplete)
			require.Zero(t, h.runner.EagerStarts())
			require.EqualValues(t, 2, h.runner.Claimed(), "claimed to start, and again to resume")
		})
	})
}

// loadCounter counts RunLoad calls.
type loadCounter struct {
	db.Store
	loads atomic.Int64
}

func (s *loadCounter) RunLoad(ctx context.Context, ref db.InstanceRef) (*db.RunState, error) {
	s.loads.Add(1)
	return s.Store.RunLoad(ctx, ref)
}

// CheckpointBatch keeps the group commit of the store it wraps.
func (s *loadCounter) CheckpointBatch(ctx context.Context, ps []*db.CheckpointParams) ([]db.CheckpointBatchResult, error) {
	return s.Store.(db.BatchCheckpointer).CheckpointBatch(ctx, ps)
}

func TestClaimedRunThatNeverStartedIsNotLoaded(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		reg := workflow.NewRegistry()
		registerSteps(reg, "three", 3)
		registerWaiter(reg, "wait")
		store := &loadCounter{Store: b.NewStore(t)}
		h := newEagerHost(t, store, reg, true, func(c *runner.Config) { c.DisableEagerStart = true })

		for _, id := range []string{"a", "b"} {
			_, err := h.client.Create(ctx, "three", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
			h.waitStatus(t, "three", id, dftype.StatusComplete)
		}
		require.Zero(t, store.loads.Load(), "claimed runs that never started are not loaded")

		// A run woken after a wait has steps: it is loaded.
		_, err := h.client.Create(ctx, "wait", dftype.CreateRequest{ID: "w"})
		require.NoError(t, err)
		h.waitStatus(t, "wait", "w", dftype.StatusWaiting)
		require.NoError(t, h.client.SendEvent(ctx, "wait", "w", "go", []byte(`"x"`)))
		h.waitStatus(t, "wait", "w", dftype.StatusComplete)
		require.EqualValues(t, 1, store.loads.Load())
		require.EqualValues(t, 4, h.runner.Claimed())
	})
}
