package runner_test

import (
	"context"
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

// killableStore is a runner's view of the database that a test can cut,
// as if the runner's process were killed: every call fails until revived.
// Fenced task writes made after the revival report their errors on fenced.
type killableStore struct {
	db.Store
	killed  atomic.Bool
	revived atomic.Bool
	fenced  chan error
	// reaped, when not nil, receives the Now of each reap that returned
	// without an error, once it returned (dropped when its buffer is full).
	reaped chan time.Time
}

func (k *killableStore) down() error {
	if k.killed.Load() {
		return errNetwork
	}
	return nil
}

func (k *killableStore) report(err error) {
	if k.revived.Load() && err != nil {
		select {
		case k.fenced <- err:
		default:
		}
	}
}

func (k *killableStore) TaskClaim(ctx context.Context, p *db.TaskClaimParams) ([]db.Claim, error) {
	if err := k.down(); err != nil {
		return nil, err
	}
	return k.Store.TaskClaim(ctx, p)
}

func (k *killableStore) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	if err := k.down(); err != nil {
		return err
	}
	err := k.Store.TaskHeartbeat(ctx, p)
	k.report(err)
	return err
}

func (k *killableStore) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	if err := k.down(); err != nil {
		return err
	}
	err := k.Store.TaskRelease(ctx, p)
	k.report(err)
	return err
}

func (k *killableStore) Checkpoint(ctx context.Context, p *db.CheckpointParams) (*db.CheckpointResult, error) {
	if err := k.down(); err != nil {
		return nil, err
	}
	res, err := k.Store.Checkpoint(ctx, p)
	k.report(err)
	return res, err
}

func (k *killableStore) WorkerHeartbeat(ctx context.Context, p *db.WorkerHeartbeatParams) (db.WorkerHeartbeatResult, error) {
	if err := k.down(); err != nil {
		return db.WorkerHeartbeatResult{}, err
	}
	return k.Store.WorkerHeartbeat(ctx, p)
}

func (k *killableStore) WorkerReap(ctx context.Context, p *db.WorkerReapParams) (db.WorkerReapResult, error) {
	if err := k.down(); err != nil {
		return db.WorkerReapResult{}, err
	}
	res, err := k.Store.WorkerReap(ctx, p)
	if err == nil && k.reaped != nil {
		select {
		case k.reaped <- p.Now:
		default:
		}
	}
	return res, err
}

func (k *killableStore) WorkerDeregister(ctx context.Context, p *db.WorkerDeregisterParams) (*db.Worker, error) {
	if err := k.down(); err != nil {
		return nil, err
	}
	return k.Store.WorkerDeregister(ctx, p)
}

// workerBundle is a store, a fake clock, a client and the blocking workflow
// "w" (its first call blocks until release is closed).
type workerBundle struct {
	ctx     context.Context
	store   db.Store
	clk     *clock.Mock
	client  *client.Client
	calls   atomic.Int32
	started chan string
	release chan struct{}
}

func setupWorkers(t *testing.T, b testharness.Backend) *workerBundle {
	t.Helper()
	wb := &workerBundle{
		ctx: context.Background(), store: b.NewStore(t), clk: clock.NewMock(),
		started: make(chan string, 4), release: make(chan struct{}),
	}
	wb.clk.Set(testharness.DefaultStart)
	reg := workflow.NewRegistry()
	blockingWorkflow(reg, wb.started, wb.release, &wb.calls)
	var err error
	wb.client, err = client.New(&client.Config{Store: wb.store, Registry: reg, Clock: wb.clk})
	require.NoError(t, err)
	return wb
}

// newRunner is a runner of "w" over store with the bundle's clock, a long
// lease (so that only the reaper frees a task early) and a 5 second worker
// heartbeat with the default threshold (15 seconds). It polls once an hour:
// the tests wake it (Notify, or the reaper's release), and a poll timer
// that fires while the fake clock moves would race with the loop's Reset
// (benbjohnson/clock's Timer sends under the clock's lock).
func (wb *workerBundle) newRunner(t *testing.T, store db.Store, id string) *runner.Runner {
	t.Helper()
	reg := workflow.NewRegistry()
	blockingWorkflow(reg, wb.started, wb.release, &wb.calls)
	r, err := runner.New(&runner.Config{
		Store: store, Registry: reg, Clock: wb.clk, Logger: quietLogger, ID: id,
		LeaseDuration: 10 * time.Minute, WorkerHeartbeatInterval: 5 * time.Second, PollInterval: time.Hour,
		Labels: map[string]string{"zone": "eu-1"}, Version: "v9.9.9",
	})
	require.NoError(t, err)
	return r
}

func (wb *workerBundle) worker(t *testing.T, id string) *db.Worker {
	t.Helper()
	w, err := wb.store.WorkerGet(wb.ctx, id)
	require.NoError(t, err)
	return w
}

func (wb *workerBundle) status(t *testing.T, id string) dftype.InstanceStatus {
	t.Helper()
	info, err := wb.client.Get(wb.ctx, "w", id)
	require.NoError(t, err)
	return info.Status
}

func TestWorkerRegistersHeartbeatsAndDeregisters(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		wb := setupWorkers(t, b)
		r := wb.newRunner(t, wb.store, "worker-1")
		require.NoError(t, r.Start(wb.ctx))
		require.Eventually(t, func() bool {
			_, err := wb.store.WorkerGet(wb.ctx, "worker-1")
			return err == nil
		}, 10*time.Second, 5*time.Millisecond)
		w := wb.worker(t, "worker-1")
		require.Equal(t, db.WorkerStatusOnline, w.Status)
		require.Equal(t, []string{workflow.DefaultQueue}, w.Queues)
		require.Equal(t, []string{"w"}, w.Workflows)
		require.Equal(t, map[string]string{"zone": "eu-1"}, w.Labels)
		require.Equal(t, "v9.9.9", w.Version)
		require.Equal(t, runner.DefaultMaxConcurrency, w.MaxConcurrency)

		_, err := wb.client.Create(wb.ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		r.Notify()
		<-wb.started
		wb.clk.Add(5 * time.Second)
		require.Eventually(t, func() bool {
			w := wb.worker(t, "worker-1")
			return w.ActiveCount == 1 && w.LastHeartbeatAt.Equal(wb.clk.Now())
		}, 10*time.Second, 5*time.Millisecond, "the heartbeat records the active count")
		close(wb.release)
		require.Eventually(t, func() bool { return wb.status(t, "x") == dftype.StatusComplete }, 10*time.Second, 5*time.Millisecond)
		// The run is counted once its execution returns, just after its
		// last checkpoint: beat until a heartbeat has seen it.
		require.Eventually(t, func() bool {
			wb.clk.Add(5 * time.Second)
			w, err := wb.store.WorkerGet(wb.ctx, "worker-1")
			return err == nil && w.CompletedTotal == 1 && w.ActiveCount == 0
		}, 10*time.Second, 50*time.Millisecond, "the heartbeat records the totals")

		require.NoError(t, r.Stop(wb.ctx))
		w = wb.worker(t, "worker-1")
		require.Equal(t, db.WorkerStatusOffline, w.Status)
		require.NotNil(t, w.DeregisteredAt, "a clean stop deregisters")

		// The same id registers the same row again: no duplicate.
		again := wb.newRunner(t, wb.store, "worker-1")
		require.NoError(t, again.Start(wb.ctx))
		require.Eventually(t, func() bool { return wb.worker(t, "worker-1").Status == db.WorkerStatusOnline }, 10*time.Second, 5*time.Millisecond)
		all, err := wb.store.WorkerList(wb.ctx, &db.WorkerListParams{})
		require.NoError(t, err)
		require.Len(t, all, 1)
		require.Nil(t, all[0].DeregisteredAt)
		require.NoError(t, again.Stop(wb.ctx))
	})
}

func TestDefaultIDsDifferWithinAProcess(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	store := testharness.SQLiteMemory.NewStore(t)
	a, err := runner.New(&runner.Config{Store: store, Registry: reg})
	require.NoError(t, err)
	b, err := runner.New(&runner.Config{Store: store, Registry: reg})
	require.NoError(t, err)
	require.NotEqual(t, a.ID(), b.ID())
}

func TestDrainedWorkerTakesNothingNewAndFinishesInFlight(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		wb := setupWorkers(t, b)
		r := wb.newRunner(t, wb.store, "worker-1")
		require.NoError(t, r.Start(wb.ctx))
		_, err := wb.client.Create(wb.ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		r.Notify()
		<-wb.started

		// A drain requested through the store (the API, the CLI) is seen at
		// the worker's next heartbeat.
		_, err = wb.store.WorkerDrain(wb.ctx, &db.WorkerDrainParams{ID: "worker-1", Now: wb.clk.Now()})
		require.NoError(t, err)
		require.False(t, r.Draining())
		wb.clk.Add(5 * time.Second)
		require.Eventually(t, r.Draining, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, db.WorkerStatusDraining, wb.worker(t, "worker-1").Status)

		// It takes nothing new: no claim, no eager start.
		_, err = wb.client.Create(wb.ctx, "w", dftype.CreateRequest{ID: "y"})
		require.NoError(t, err)
		n, err := r.RunDue(wb.ctx, 10)
		require.NoError(t, err)
		require.Zero(t, n, "a draining runner claims nothing")
		require.Nil(t, r.ReserveEager("w", 1), "a draining runner reserves no eager start")
		r.Notify()
		select {
		case <-r.Drained():
			t.Fatal("drained while a step was still running")
		default:
		}

		// Its in-flight work finishes, then it deregisters.
		close(wb.release)
		awaitSignal(t, r.Drained(), "the drain")
		require.Equal(t, dftype.StatusComplete, wb.status(t, "x"))
		require.Equal(t, dftype.StatusQueued, wb.status(t, "y"), "y was never taken")
		require.Equal(t, int64(1), r.Claimed())
		w := wb.worker(t, "worker-1")
		require.Equal(t, db.WorkerStatusOffline, w.Status)
		require.NotNil(t, w.DeregisteredAt)
		require.NotNil(t, w.DrainRequestedAt)
	})
}

func TestDrainGraceHandsBackWhatIsStillRunning(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		wb := setupWorkers(t, b)
		reg := workflow.NewRegistry()
		blockingWorkflow(reg, wb.started, wb.release, &wb.calls)
		r, err := runner.New(&runner.Config{
			Store: wb.store, Registry: reg, Clock: wb.clk, Logger: quietLogger, ID: "worker-1",
			LeaseDuration: 10 * time.Minute, DrainGrace: 20 * time.Millisecond, PollInterval: time.Hour,
		})
		require.NoError(t, err)
		require.NoError(t, r.Start(wb.ctx))
		_, err = wb.client.Create(wb.ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		r.Notify()
		<-wb.started

		require.ErrorIs(t, r.Drain(wb.ctx), context.DeadlineExceeded)
		awaitSignal(t, r.Drained(), "the drain")
		task, err := wb.store.TaskGet(wb.ctx, db.InstanceRef{WorkflowName: "w", ID: "x"})
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusPending, task.Status, "handed back at the end of the grace")
		w := wb.worker(t, "worker-1")
		require.Equal(t, db.WorkerStatusOffline, w.Status)
		require.NotNil(t, w.DrainRequestedAt, "Drain marks the worker draining first")
		close(wb.release)
	})
}

// TestKilledWorkersTasksArePickedUpAfterTheHeartbeatThreshold kills a
// worker that holds a task (fake clock): the other worker's reaps leave it
// online and its task held while its last heartbeat is at most the
// threshold old, the first reap past the threshold marks it offline and
// releases its task, which the other worker then runs long before the
// lease would expire, and the killed worker's writes through its old
// lease fail once it comes back.
func TestKilledWorkersTasksArePickedUpAfterTheHeartbeatThreshold(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		wb := setupWorkers(t, b)
		killable := &killableStore{Store: wb.store, fenced: make(chan error, 16)}
		// B's reaps report their times, so that the test knows which reaps
		// have run before it looks at A.
		observed := &killableStore{Store: wb.store, reaped: make(chan time.Time, 64)}
		ra := wb.newRunner(t, killable, "a")
		rb := wb.newRunner(t, observed, "b")
		require.NoError(t, ra.Start(wb.ctx))
		_, err := wb.client.Create(wb.ctx, "w", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		ra.Notify()
		require.Equal(t, "call 1", <-wb.started)
		require.NoError(t, rb.Start(wb.ctx))
		start := wb.clk.Now()
		require.Eventually(t, func() bool {
			_, err := wb.store.WorkerGet(wb.ctx, "b")
			return err == nil
		}, 10*time.Second, 5*time.Millisecond, "B registered")

		// Both beat for 20 seconds: B's reaper, which waits for a whole
		// threshold (15s) of its own good heartbeats, is running by then,
		// so below only A's heartbeat age decides when A is offline.
		for range 4 {
			wb.clk.Add(5 * time.Second)
			require.Eventually(t, func() bool {
				for _, id := range []string{"a", "b"} {
					if w, err := wb.store.WorkerGet(wb.ctx, id); err != nil || !w.LastHeartbeatAt.Equal(wb.clk.Now()) {
						return false
					}
				}
				return true
			}, 10*time.Second, 5*time.Millisecond, "A and B heartbeat")
		}
		awaitReap := func(at time.Time) {
			t.Helper()
			for {
				select {
				case now := <-observed.reaped:
					if now.Equal(at) {
						return
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("B did not reap at %s", at)
				}
			}
		}
		awaitReap(wb.clk.Now())
		lastBeat := wb.worker(t, "a").LastHeartbeatAt
		require.True(t, lastBeat.Equal(wb.clk.Now()))

		// A is killed: it stops heartbeating without deregistering, and its
		// task's lease still has ten minutes to run.
		killable.killed.Store(true)

		// Lower bound: up to the threshold (15s, a heartbeat exactly 15s
		// old is still in time), B's reaps leave A online and its task held
		// by it.
		for range 3 {
			wb.clk.Add(5 * time.Second)
			awaitReap(wb.clk.Now())
			require.LessOrEqual(t, wb.clk.Now().Sub(lastBeat), 15*time.Second)
			require.Equal(t, db.WorkerStatusOnline, wb.worker(t, "a").Status,
				"A is not offline %s after its last heartbeat", wb.clk.Now().Sub(lastBeat))
			task, err := wb.store.TaskGet(wb.ctx, db.InstanceRef{WorkflowName: "w", ID: "x"})
			require.NoError(t, err)
			require.Equal(t, db.TaskStatusProcessing, task.Status, "A's task is not released before the threshold")
			require.Equal(t, "a", task.LockOwner)
			require.Equal(t, int32(1), wb.calls.Load(), "nobody else ran x")
		}

		// Upper bound: the first reap past the threshold marks A offline.
		wb.clk.Add(5 * time.Second)
		awaitReap(wb.clk.Now())
		require.Equal(t, db.WorkerStatusOffline, wb.worker(t, "a").Status,
			"B's reaper marks A offline once its heartbeat is older than the threshold")
		require.Nil(t, wb.worker(t, "a").DeregisteredAt)
		require.Equal(t, db.WorkerStatusOnline, wb.worker(t, "b").Status)

		// B takes the task at once, long before the lease would expire.
		require.Eventually(t, func() bool { return wb.status(t, "x") == dftype.StatusComplete }, 10*time.Second, 5*time.Millisecond)
		require.Less(t, wb.clk.Now().Sub(start), time.Minute)
		info, err := wb.client.Get(wb.ctx, "w", "x")
		require.NoError(t, err)
		require.JSONEq(t, `"call 2"`, string(info.Output))

		// A comes back: its writes through its old lease fail and change
		// nothing.
		killable.revived.Store(true)
		killable.killed.Store(false)
		close(wb.release)
		wb.clk.Add(5 * time.Second)
		select {
		case err := <-killable.fenced:
			require.ErrorIs(t, err, db.ErrLeaseLost)
		case <-time.After(10 * time.Second):
			t.Fatal("the revived worker made no fenced write")
		}
		hist, err := wb.client.History(wb.ctx, "w", "x", client.HistoryParams{})
		require.NoError(t, err)
		require.Len(t, hist.Steps, 1)
		require.JSONEq(t, `"call 2"`, string(hist.Steps[0].Result))
		info, err = wb.client.Get(wb.ctx, "w", "x")
		require.NoError(t, err)
		require.JSONEq(t, `"call 2"`, string(info.Output))

		// At its next heartbeat it learns it was offline and registers again.
		require.Eventually(t, func() bool {
			wb.clk.Add(5 * time.Second)
			return wb.worker(t, "a").Status == db.WorkerStatusOnline
		}, 10*time.Second, 20*time.Millisecond)
		require.NoError(t, ra.Stop(wb.ctx))
		require.NoError(t, rb.Stop(wb.ctx))
	})
}

func TestReaperBackFromAnOutageSparesLiveWorkers(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		wb := setupWorkers(t, b)
		ka := &killableStore{Store: wb.store, fenced: make(chan error, 16)}
		kb := &killableStore{Store: wb.store, fenced: make(chan error, 16)}
		ra := wb.newRunner(t, ka, "a")
		rb := wb.newRunner(t, kb, "b")
		require.NoError(t, ra.Start(wb.ctx))
		require.NoError(t, rb.Start(wb.ctx))
		registered := wb.clk.Now()
		beatAt := func(at time.Time, ids ...string) bool {
			for _, id := range ids {
				w, err := wb.store.WorkerGet(wb.ctx, id)
				if err != nil || !w.LastHeartbeatAt.Equal(at) {
					return false
				}
			}
			return true
		}
		require.Eventually(t, func() bool { return beatAt(registered, "a", "b") }, 10*time.Second, 5*time.Millisecond, "both registered")
		beat := func(ids ...string) {
			t.Helper()
			wb.clk.Add(5 * time.Second)
			require.Eventually(t, func() bool { return beatAt(wb.clk.Now(), ids...) }, 10*time.Second, 5*time.Millisecond)
		}
		beat("a", "b")

		// The database is out for 30 seconds for both.
		ka.killed.Store(true)
		kb.killed.Store(true)
		for range 6 {
			wb.clk.Add(5 * time.Second)
		}
		// A gets through first; B five seconds later. A must not take B
		// for dead in between: its reaper waits for a whole threshold of
		// its own good heartbeats.
		ka.killed.Store(false)
		beat("a")
		kb.killed.Store(false)
		for range 4 {
			beat("a", "b")
		}
		for _, id := range []string{"a", "b"} {
			w := wb.worker(t, id)
			require.Equal(t, db.WorkerStatusOnline, w.Status, id)
			require.True(t, w.RegisteredAt.Equal(registered), "%s was never marked offline and registered again", id)
		}
		require.NoError(t, ra.Stop(wb.ctx))
		require.NoError(t, rb.Stop(wb.ctx))
	})
}

// slowRegisterStore makes a worker's registration take a while.
type slowRegisterStore struct {
	db.Store
}

func (s *slowRegisterStore) WorkerRegister(ctx context.Context, p *db.WorkerRegisterParams) (*db.Worker, error) {
	time.Sleep(100 * time.Millisecond)
	return s.Store.WorkerRegister(ctx, p)
}

func TestRegistrationNeverReleasesAnEagerStart(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		wb := setupWorkers(t, b)
		store := &slowRegisterStore{Store: wb.store}
		reg := workflow.NewRegistry()
		blockingWorkflow(reg, wb.started, wb.release, &wb.calls)
		r, err := runner.New(&runner.Config{Store: store, Registry: reg, Clock: wb.clk, Logger: quietLogger, ID: "w1", PollInterval: time.Hour})
		require.NoError(t, err)
		// Start returns once the worker registered, so the registration (which
		// releases what the id held before) cannot take the eager start's task.
		require.NoError(t, r.Start(wb.ctx))
		// The loop's first claim holds every free slot while it runs, so the
		// test reserves its eager start as the client would, once a slot is
		// free, and creates with it.
		var lease *db.CreateLease
		require.Eventually(t, func() bool {
			lease = r.ReserveEager("w", 1)
			return lease != nil
		}, 10*time.Second, time.Millisecond)
		res, err := wb.store.InstanceCreate(wb.ctx, &db.InstanceCreateParams{WorkflowName: "w", ID: "x", Lease: lease})
		require.NoError(t, err)
		r.StartEager(lease, []db.CreateResult{res})
		require.Equal(t, int64(1), r.EagerStarts())
		<-wb.started
		time.Sleep(150 * time.Millisecond) // past a registration that would have run late
		close(wb.release)
		require.Eventually(t, func() bool { return wb.status(t, "x") == dftype.StatusComplete }, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, int32(1), wb.calls.Load(), "the step ran once")
		require.NoError(t, r.Stop(wb.ctx))
	})
}
