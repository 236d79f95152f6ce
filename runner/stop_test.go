package runner_test

import (
	"context"
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

// frozenStore is a runner's view of the database while its process is
// stopped (SIGSTOP, a long pause of the whole process): nothing it sends
// arrives. The tests below stop only one goroutine of the runner, so this
// stops the others' heartbeats, as the stop would.
type frozenStore struct {
	db.Store
	frozen atomic.Bool
}

func (f *frozenStore) TaskHeartbeat(ctx context.Context, p *db.TaskHeartbeatParams) error {
	if f.frozen.Load() {
		return errNetwork
	}
	return f.Store.TaskHeartbeat(ctx, p)
}

func (f *frozenStore) WorkerHeartbeat(ctx context.Context, p *db.WorkerHeartbeatParams) (db.WorkerHeartbeatResult, error) {
	if f.frozen.Load() {
		return db.WorkerHeartbeatResult{}, errNetwork
	}
	return f.Store.WorkerHeartbeat(ctx, p)
}

func (f *frozenStore) WorkerReap(ctx context.Context, p *db.WorkerReapParams) (db.WorkerReapResult, error) {
	if f.frozen.Load() {
		return db.WorkerReapResult{}, errNetwork
	}
	return f.Store.WorkerReap(ctx, p)
}

// twoStepWorkflow registers "two": step "a", then step "b"; runs counts
// each step's callbacks by name.
func twoStepWorkflow(reg *workflow.Registry, runs *sync.Map) {
	count := func(name string) {
		n, _ := runs.LoadOrStore(name, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
	}
	workflow.MustRegister(reg, "two", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
		a, err := workflow.Do(step, "a", func(context.Context) (string, error) { count("a"); return "a", nil })
		if err != nil {
			return "", err
		}
		return workflow.Do(step, "b", func(context.Context) (string, error) { count("b"); return a + "b", nil })
	})
}

func runsOf(runs *sync.Map, name string) int32 {
	n, ok := runs.Load(name)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// stopAt returns a StepOverrideFunc that, on the first attempt of step,
// freezes the store (the process is stopped), tells stopped and waits for
// resume, then unfreezes it: the runner stops after it decided to start
// the step and before the step's function runs. It keeps the step's own
// function.
func stopAt(step string, store *frozenStore, stopped chan<- struct{}, resume <-chan struct{}) func(string, string) workflow.StepFunc {
	var once sync.Once
	return func(_, name string) workflow.StepFunc {
		if name == step {
			once.Do(func() {
				store.frozen.Store(true)
				close(stopped)
				<-resume
				store.frozen.Store(false)
			})
		}
		return nil
	}
}

// TestRunnerStoppedPastItsLeaseBeforeAStepStartsNoneOnce: a runner stopped
// between deciding to start a step and running its function, for longer
// than its lease, while another runner takes the instance over and
// completes that step, must not run the step when it resumes. Before the
// runner checked its lease on the attempt's goroutine, just before the
// function, it ran the step a second time.
func TestRunnerStoppedPastItsLeaseBeforeAStepStartsNoneOnce(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		base := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		const lease = 30 * time.Second
		var runs sync.Map
		stopped, resume := make(chan struct{}), make(chan struct{})
		storeA := &frozenStore{Store: base}
		newRunner := func(store db.Store, id string, override func(string, string) workflow.StepFunc) *runner.Runner {
			reg := workflow.NewRegistry()
			twoStepWorkflow(reg, &runs)
			r, err := runner.New(&runner.Config{
				Store: store, Registry: reg, Clock: clk, Logger: quietLogger, ID: id,
				LeaseDuration: lease, StepOverrideFunc: override,
			})
			require.NoError(t, err)
			return r
		}
		ra := newRunner(storeA, "a", stopAt("b", storeA, stopped, resume))
		rb := newRunner(base, "b", nil)
		reg := workflow.NewRegistry()
		twoStepWorkflow(reg, &runs)
		c, err := client.New(&client.Config{Store: base, Registry: reg, Clock: clk})
		require.NoError(t, err)
		_, err = c.Create(ctx, "two", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		aDone := make(chan error, 1)
		go func() { _, err := ra.RunDue(ctx, 1); aDone <- err }()
		<-stopped
		require.Equal(t, int32(1), runsOf(&runs, "a"))

		// A is stopped past its lease: B takes the instance over, replays
		// a and runs b.
		clk.Add(lease + time.Second)
		n, err := rb.RunDue(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 1, n, "B took the expired lease over")
		info, err := c.Get(ctx, "two", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status)
		require.Equal(t, int32(1), runsOf(&runs, "b"))

		// A resumes where it stopped: b must not run again.
		close(resume)
		require.NoError(t, <-aDone)
		require.Equal(t, int32(1), runsOf(&runs, "b"), "the resumed runner ran step b, which B had completed")
		require.Equal(t, int32(1), runsOf(&runs, "a"))
		info, err = c.Get(ctx, "two", "x")
		require.NoError(t, err)
		require.JSONEq(t, `"ab"`, string(info.Output))
	})
}

// TestRunnerStoppedPastItsLeaseRenewsWhenNobodyTookOver: the same stop,
// but no other runner claimed the instance meanwhile. The resumed runner
// renews its lease before the step starts, and goes on: the step runs
// once, in the same pass, and no lease loss is counted.
func TestRunnerStoppedPastItsLeaseRenewsWhenNobodyTookOver(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		base := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		const lease = 30 * time.Second
		var runs sync.Map
		stopped, resume := make(chan struct{}), make(chan struct{})
		store := &frozenStore{Store: base}
		reg := workflow.NewRegistry()
		twoStepWorkflow(reg, &runs)
		r, err := runner.New(&runner.Config{
			Store: store, Registry: reg, Clock: clk, Logger: quietLogger, ID: "a",
			LeaseDuration: lease, StepOverrideFunc: stopAt("b", store, stopped, resume),
		})
		require.NoError(t, err)
		c, err := client.New(&client.Config{Store: base, Registry: reg, Clock: clk})
		require.NoError(t, err)
		_, err = c.Create(ctx, "two", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)

		done := make(chan error, 1)
		go func() { _, err := r.RunDue(ctx, 1); done <- err }()
		<-stopped
		clk.Add(lease + time.Second)
		close(resume)
		require.NoError(t, <-done)

		info, err := c.Get(ctx, "two", "x")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, info.Status, "the run went on in the same pass")
		require.Equal(t, int32(1), runsOf(&runs, "b"))
		require.Equal(t, int64(1), r.Claimed(), "one claim, no takeover")
	})
}

// TestRunnerStoppedPastItsReapBeforeAStepStartsNoneOnce: a runner whose
// task lease is long, stopped past the heartbeat threshold of its worker
// row, is marked offline by another runner's reaper, which releases its
// task before the lease would have expired; the other runner takes the
// instance and completes the step. When the stopped runner resumes, its
// lease is still good by its own clock, but it must not start the step:
// it renews its worker row first, learns it was marked offline, and drops
// the run. Before a step start also waited for the worker's heartbeat
// threshold, it ran the step a second time.
func TestRunnerStoppedPastItsReapBeforeAStepStartsNoneOnce(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		base := b.NewStore(t)
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		var runs sync.Map
		stopped, resume := make(chan struct{}), make(chan struct{})
		storeA := &frozenStore{Store: base}
		// B's reaps report their times (see killableStore).
		storeB := &killableStore{Store: base, reaped: make(chan time.Time, 64)}
		newRunner := func(store db.Store, id string, override func(string, string) workflow.StepFunc) *runner.Runner {
			reg := workflow.NewRegistry()
			twoStepWorkflow(reg, &runs)
			r, err := runner.New(&runner.Config{
				Store: store, Registry: reg, Clock: clk, Logger: quietLogger, ID: id,
				LeaseDuration: 10 * time.Minute, WorkerHeartbeatInterval: 5 * time.Second, PollInterval: time.Hour,
				StepOverrideFunc: override,
			})
			require.NoError(t, err)
			return r
		}
		ra := newRunner(storeA, "a", stopAt("b", storeA, stopped, resume))
		rb := newRunner(storeB, "b", nil)
		var resumed sync.Once
		resumeOnce := func() { resumed.Do(func() { close(resume) }) }
		require.NoError(t, ra.Start(ctx))
		require.NoError(t, rb.Start(ctx))
		defer func() {
			require.NoError(t, ra.Stop(ctx))
			require.NoError(t, rb.Stop(ctx))
		}()
		// Deferred last, so it runs first: a failure must not leave A
		// stopped, since Stop would wait for it.
		defer resumeOnce()
		reg := workflow.NewRegistry()
		twoStepWorkflow(reg, &runs)
		c, err := client.New(&client.Config{Store: base, Registry: reg, Clock: clk})
		require.NoError(t, err)
		// B's reaper runs once its own heartbeats have been good for a
		// whole threshold (15 s); A beats all along.
		for range 4 {
			clk.Add(5 * time.Second)
			require.Eventually(t, func() bool {
				for _, id := range []string{"a", "b"} {
					if w, err := base.WorkerGet(ctx, id); err != nil || !w.LastHeartbeatAt.Equal(clk.Now()) {
						return false
					}
				}
				return true
			}, 10*time.Second, 5*time.Millisecond, "A and B heartbeat")
		}

		_, err = c.Create(ctx, "two", dftype.CreateRequest{ID: "x"})
		require.NoError(t, err)
		aDone := make(chan error, 1)
		go func() { _, err := ra.RunDue(ctx, 1); aDone <- err }()
		<-stopped
		require.Equal(t, int32(1), runsOf(&runs, "a"))

		// A stays stopped for 20 s: past its worker's threshold, far from
		// the end of its task's ten-minute lease. B's reaper marks it
		// offline and releases its task; B's runner completes the instance.
		for range 4 {
			clk.Add(5 * time.Second)
			awaitReapAt(t, storeB.reaped, clk.Now())
		}
		w, err := base.WorkerGet(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusOffline, w.Status)
		// B's loop, woken by its reap's release, claims the task.
		require.Eventually(t, func() bool {
			info, err := c.Get(ctx, "two", "x")
			return err == nil && info.Status == dftype.StatusComplete
		}, 10*time.Second, 5*time.Millisecond, "B completes the instance")
		require.Equal(t, int32(1), runsOf(&runs, "b"))

		// A resumes, its lease good for nine more minutes by its clock.
		resumeOnce()
		require.NoError(t, <-aDone)
		require.Equal(t, int32(1), runsOf(&runs, "b"),
			"the resumed runner ran step b, which B had completed after the reaper released A's task")
		w, err = base.WorkerGet(ctx, "a")
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusOnline, w.Status, "A registered again before it would have started the step")
		info, err := c.Get(ctx, "two", "x")
		require.NoError(t, err)
		require.JSONEq(t, `"ab"`, string(info.Output))
	})
}

// awaitReapAt waits until a reap with Now at has returned (reaped is a
// killableStore's), skipping those of earlier times.
func awaitReapAt(t *testing.T, reaped <-chan time.Time, at time.Time) {
	t.Helper()
	for {
		select {
		case now := <-reaped:
			if now.Equal(at) {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no reap at %s", at)
		}
	}
}
