package runner_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// procStore is the database as one runner process sees it. Once the
// process is killed every call fails with db.ErrLeaseLost, so its runner
// drops what it holds and writes nothing more, and the leases it held
// expire as a dead process's would. It also tells whether the process
// holds the crasher's task (claimed and not handed back) and whether the
// crasher's run ended there.
type procStore struct {
	db.Store
	crasher string

	dead        chan struct{}
	kill        sync.Once
	crasherGone chan struct{}
	gone        sync.Once

	mu           sync.Mutex
	crasherTask  int64
	holdsCrasher bool
}

func newProcStore(s db.Store, crasher string) *procStore {
	return &procStore{Store: s, crasher: crasher, dead: make(chan struct{}), crasherGone: make(chan struct{})}
}

func (p *procStore) die() { p.kill.Do(func() { close(p.dead) }) }

func (p *procStore) killed() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// holds reports whether the process holds the crasher's task.
func (p *procStore) holds() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holdsCrasher
}

func (p *procStore) TaskClaim(ctx context.Context, params *db.TaskClaimParams) ([]db.Claim, error) {
	if p.killed() {
		return nil, db.ErrLeaseLost
	}
	tasks, err := p.Store.TaskClaim(ctx, params)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range tasks {
		if c.Task.InstanceID == p.crasher {
			p.crasherTask, p.holdsCrasher = c.Task.ID, true
		}
	}
	return tasks, err
}

func (p *procStore) TaskRelease(ctx context.Context, params *db.TaskReleaseParams) error {
	if p.killed() {
		return db.ErrLeaseLost
	}
	err := p.Store.TaskRelease(ctx, params)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && params.Task.ID == p.crasherTask {
		p.holdsCrasher = false
	}
	return err
}

func (p *procStore) TaskHeartbeat(ctx context.Context, params *db.TaskHeartbeatParams) error {
	if p.killed() {
		return db.ErrLeaseLost
	}
	return p.Store.TaskHeartbeat(ctx, params)
}

func (p *procStore) RunLoad(ctx context.Context, ref db.InstanceRef) (*db.RunState, error) {
	if p.killed() {
		return nil, db.ErrLeaseLost
	}
	return p.Store.RunLoad(ctx, ref)
}

func (p *procStore) Checkpoint(ctx context.Context, params *db.CheckpointParams) (*db.CheckpointResult, error) {
	if p.killed() {
		return nil, db.ErrLeaseLost
	}
	res, err := p.Store.Checkpoint(ctx, params)
	if err == nil && params.InstanceID == p.crasher {
		p.gone.Do(func() { close(p.crasherGone) })
	}
	return res, err
}

// TestQuarantineSavesTheInnocents: a step that kills its process took down
// the instances running beside it, and their leases expired together. The
// first runner that takes them over runs them all again (one loss is not
// yet suspect) and dies with the crasher once more; from their second loss
// each runner runs one of these suspects at a time, so the crasher dies
// alone: it errors with "lost its runner" once it reaches MaxLeaseLosses
// (5), and every innocent completes. (Without the quarantine the innocents
// die with it each time and error with it.)
func TestQuarantineSavesTheInnocents(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		ctx := h.Context()
		const lease = 30 * time.Second

		// current is the process whose runner runs now: one at a time.
		var current atomic.Pointer[procStore]
		var crashes atomic.Int32
		workflow.MustRegister(h.Registry, "crasher", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "crash", func(ctx context.Context) (string, error) {
				crashes.Add(1)
				current.Load().die()
				return "unreachable", nil
			})
		})
		// An innocent step running in the crasher's process dies with it;
		// anywhere else it succeeds.
		innocentStep := func(ctx context.Context) (string, error) {
			p := current.Load()
			if p.holds() {
				select {
				case <-p.dead:
				case <-p.crasherGone:
				}
			}
			return "ok", nil
		}
		workflow.MustRegister(h.Registry, "innocent", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if _, err := workflow.Do(step, "a", innocentStep); err != nil {
				return "", err
			}
			if err := step.Sleep("pause", time.Second); err != nil {
				return "", err
			}
			return workflow.Do(step, "b", innocentStep)
		})

		// The crasher is created in the middle, so that claims, which take
		// the oldest first, meet innocents before it and after it.
		innocents := []string{"i1", "i2", "i3", "i4", "i5"}
		for i, id := range innocents {
			if i == 2 {
				_, err := h.Client.Create(ctx, "crasher", dftype.CreateRequest{ID: "c"})
				require.NoError(t, err)
			}
			_, err := h.Client.Create(ctx, "innocent", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		// One process claimed them all and died before any step ran.
		now := h.Now().UTC().Truncate(time.Microsecond)
		tasks, err := h.Store.TaskClaim(ctx, &db.TaskClaimParams{
			Owner: "dead-0", WorkflowNames: []string{"crasher", "innocent"}, Max: 10, Now: now, LockedUntil: now.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, tasks, 6)
		h.Advance(lease + time.Second)

		done := func() bool {
			if h.Status("crasher", "c").Status != dftype.StatusErrored {
				return false
			}
			for _, id := range innocents {
				if h.Status("innocent", id).Status.Terminal() {
					continue
				}
				return false
			}
			return true
		}
		deaths := 0
		for round := 1; !done(); round++ {
			require.Less(t, round, 100, "the instances did not settle")
			p := newProcStore(h.Store, "c")
			current.Store(p)
			r, err := runner.New(&runner.Config{
				Store: p, Registry: h.Registry, Clock: h.Clock, Logger: quietLogger,
				ID: fmt.Sprintf("proc-%d", round), LeaseDuration: lease, GroupCommitMax: 1,
			})
			require.NoError(t, err)
			_, err = r.RunDue(ctx, 100)
			require.NoError(t, err)
			if p.killed() {
				deaths++
				h.Advance(lease + time.Second)
			} else {
				h.Advance(time.Second)
			}
		}

		info := h.RequireStatus("crasher", "c", dftype.StatusErrored)
		require.Equal(t, runner.ErrorNameRunnerLost, info.Error.Name)
		require.Equal(t, `step "crash" lost its runner 5 times`, info.Error.Message)
		require.Equal(t, int32(4), crashes.Load(), "the crash step ran once per lease loss before the limit")
		require.Equal(t, 4, deaths)
		for _, id := range innocents {
			var out string
			h.RequireOutput("innocent", id, &out)
			require.Equal(t, "ok", out, id)
		}
	})
}

// TestQuarantineHandsBackASecondSuspect: tasks that lost their runner twice
// in a row are suspects. A runner that runs a suspect task
// hands a second suspect from its claim straight back, pending and due at
// once (for other runners), without counting a lease loss, and claims no
// suspect while the first is still suspect. Once the first checkpoints (its
// losses reset), the runner takes the second.
func TestQuarantineHandsBackASecondSuspect(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		ctx := h.Context()
		const lease = 30 * time.Second // the harness's runner's

		type gate struct{ entered, proceed chan struct{} }
		gates := map[string]*gate{}
		for _, key := range []string{"x/one", "x/two", "y/one", "y/two"} {
			gates[key] = &gate{entered: make(chan struct{}), proceed: make(chan struct{})}
		}
		wait := func(instance, key string) func(context.Context) (string, error) {
			return func(ctx context.Context) (string, error) {
				g := gates[instance+"/"+key]
				close(g.entered)
				<-g.proceed
				return key, nil
			}
		}
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			id := ev.InstanceID
			if _, err := workflow.Do(step, "one", wait(id, "one")); err != nil {
				return "", err
			}
			return workflow.Do(step, "two", wait(id, "two"))
		})
		for _, id := range []string{"x", "y"} {
			_, err := h.Client.Create(ctx, "w", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		// Two processes in a row claimed them both and died.
		for i := range 2 {
			now := h.Now().UTC().Truncate(time.Microsecond)
			tasks, err := h.Store.TaskClaim(ctx, &db.TaskClaimParams{
				Owner: fmt.Sprintf("dead-%d", i), WorkflowNames: []string{"w"}, Max: 10, Now: now, LockedUntil: now.Add(lease),
			})
			require.NoError(t, err)
			require.Len(t, tasks, 2)
			h.Advance(lease + time.Second)
		}

		runDue := func() <-chan int { return runDueAsync(ctx, h.Runner, 10) }
		task := func(id string) *db.Task {
			t.Helper()
			task, err := h.Store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: id})
			require.NoError(t, err)
			return task
		}

		// Both are suspects: the claim keeps x (the older) and hands y back.
		first := runDue()
		awaitSignal(t, gates["x/one"].entered, "x's first step")
		y := task("y")
		require.Equal(t, db.TaskStatusPending, y.Status)
		require.Equal(t, db.SuspectLeaseLosses, y.LeaseLosses, "the hand-back counted no loss")
		require.Empty(t, y.LockOwner)
		require.True(t, y.RunAt.Equal(h.Now().UTC().Truncate(time.Microsecond)), "due at once, not %s", y.RunAt)
		require.Equal(t, db.SuspectLeaseLosses, task("x").LeaseLosses)

		// While x is still suspect the runner's claims leave y alone.
		h.Advance(time.Second)
		select {
		case n := <-runDue():
			require.Equal(t, 0, n)
		case <-time.After(10 * time.Second):
			t.Fatal("the second RunDue did not return")
		}
		require.Equal(t, y, task("y"), "not claimed")

		// x's first checkpoint resets its losses and frees the quarantine:
		// the next claim takes y beside it.
		close(gates["x/one"].proceed)
		awaitSignal(t, gates["x/two"].entered, "x's second step")
		require.Zero(t, task("x").LeaseLosses)
		h.Advance(time.Second)
		second := runDue()
		awaitSignal(t, gates["y/one"].entered, "y's first step")
		require.Equal(t, "w", task("y").WorkflowName)
		require.Equal(t, db.TaskStatusProcessing, task("y").Status)

		for _, key := range []string{"x/two", "y/one", "y/two"} {
			close(gates[key].proceed)
		}
		for _, ran := range []<-chan int{first, second} {
			select {
			case n := <-ran:
				require.Equal(t, 1, n)
			case <-time.After(10 * time.Second):
				t.Fatal("RunDue did not return")
			}
		}
		for _, id := range []string{"x", "y"} {
			var out string
			h.RequireOutput("w", id, &out)
			require.Equal(t, "two", out)
		}
	})
}

// TestQuarantineCoversEagerResume: an event that wakes a suspect run (its
// runner died while the run still waited for the event: here, as its wait
// timed out) leases it to the runner without a claim. While the runner runs
// another suspect, the eager resume hands it back without counting a loss,
// and the loop leaves it alone until the quarantine is free; then the loop
// runs it.
func TestQuarantineCoversEagerResume(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		reg := workflow.NewRegistry()
		registerWaiter(reg, "wait") // its wait times out after 24 hours
		started, release := make(chan string, 1), make(chan struct{})
		registerGate(reg, "gate", started, release)
		h := newEagerHost(t, b.NewStore(t), reg, false, nil)
		// Instances are created through a client that wakes no one, so
		// that no wake-up is pending when the runner starts: its loop then
		// claims once and idles, and holds no slot when the send reserves.
		quiet, err := client.New(&client.Config{Store: h.store, Registry: reg})
		require.NoError(t, err)
		// claimDead claims a task as a runner whose clock reads at and
		// that died at once.
		claimDead := func(name string, at time.Time) *db.Task {
			t.Helper()
			tasks, err := h.store.TaskClaim(ctx, &db.TaskClaimParams{
				Owner: "dead", WorkflowNames: []string{name}, Max: 1,
				Now: at.UTC().Truncate(time.Microsecond), LockedUntil: time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond),
			})
			require.NoError(t, err)
			require.Len(t, tasks, 1)
			return tasks[0].Task
		}
		task := func(name, id string) *db.Task {
			t.Helper()
			task, err := h.store.TaskGet(ctx, db.InstanceRef{WorkflowName: name, ID: id})
			require.NoError(t, err)
			return task
		}

		// "a" waits for "go". Twice a runner took it when the wait timed
		// out and gave it back with a loss counted (its store kept
		// failing): a pending suspect whose wait step still waits.
		_, err = quiet.Create(ctx, "wait", dftype.CreateRequest{ID: "a"})
		require.NoError(t, err)
		n, err := h.runner.RunDue(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		h.waitStatus(t, "wait", "a", dftype.StatusWaiting)
		for range db.SuspectLeaseLosses {
			dead := claimDead("wait", time.Now().Add(25*time.Hour))
			require.NoError(t, h.store.TaskRelease(ctx, &db.TaskReleaseParams{
				Task: db.TaskRef{ID: dead.ID, Version: dead.Version}, RunAt: time.Now().Add(24 * time.Hour), CountLeaseLoss: true,
			}))
		}
		require.Equal(t, db.SuspectLeaseLosses, task("wait", "a").LeaseLosses)

		// "g" is a suspect too (two runners died holding it, the claim
		// counts the second loss): the runner claims it and runs it.
		_, err = quiet.Create(ctx, "gate", dftype.CreateRequest{ID: "g"})
		require.NoError(t, err)
		claimDead("gate", time.Now())
		require.Equal(t, 1, claimDead("gate", time.Now()).LeaseLosses)
		h.start(t)
		select {
		case <-started:
		case <-time.After(30 * time.Second):
			t.Fatal("the suspect g did not start")
		}

		// The event leases "a" to the runner, whose eager resume meets
		// the quarantine: handed back.
		version := task("wait", "a").Version
		require.NoError(t, h.client.SendEvent(ctx, "wait", "a", "go", []byte(`"v"`)))
		handedBack := func() bool {
			a, err := h.store.TaskGet(ctx, db.InstanceRef{WorkflowName: "wait", ID: "a"})
			return err == nil && a.Version == version+1 && a.Status == db.TaskStatusPending
		}
		if !assert.Eventually(t, handedBack, 30*time.Second, time.Millisecond) {
			a, err := h.store.TaskGet(ctx, db.InstanceRef{WorkflowName: "wait", ID: "a"})
			t.Fatalf("a was not leased and handed back: %+v, %v (version before %d, eager starts %d, claimed %d)", a, err, version, h.runner.EagerStarts(), h.runner.Claimed())
		}
		require.Equal(t, db.SuspectLeaseLosses, task("wait", "a").LeaseLosses, "the hand-back counted no loss")
		require.Zero(t, h.runner.EagerStarts())
		require.Equal(t, dftype.StatusRunning, h.waitStatus(t, "gate", "g", dftype.StatusRunning).Status)

		// g ends and frees the quarantine, which wakes the loop: its claim
		// runs "a" (the poll interval is long).
		close(release)
		h.waitStatus(t, "gate", "g", dftype.StatusComplete)
		done := h.waitStatus(t, "wait", "a", dftype.StatusComplete)
		require.JSONEq(t, `"v"`, string(done.Output))
		require.Zero(t, h.runner.EagerStarts())
	})
}

// TestQuarantineLetsASingleCrashRecoverAtFullSpeed: one lost lease is what
// every crash of a process does to all it held (a deploy's SIGKILL, an
// OOM), so the tasks of a process that died once, each at one loss, are
// not suspects: the runner that takes them over runs them all at once,
// hands none back, and claims the next ones beside them.
func TestQuarantineLetsASingleCrashRecoverAtFullSpeed(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		ctx := h.Context()
		const lease = 30 * time.Second // the harness's runner's

		ids := []string{"a", "b", "c", "d"}
		entered := map[string]chan struct{}{}
		for _, id := range ids {
			entered[id] = make(chan struct{})
		}
		proceed := make(chan struct{})
		workflow.MustRegister(h.Registry, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "one", func(ctx context.Context) (string, error) {
				close(entered[ev.InstanceID])
				<-proceed
				return "ok", nil
			})
		})
		for _, id := range ids[:3] {
			_, err := h.Client.Create(ctx, "w", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		// One process claimed them all and died.
		now := h.Now().UTC().Truncate(time.Microsecond)
		tasks, err := h.Store.TaskClaim(ctx, &db.TaskClaimParams{
			Owner: "dead-0", WorkflowNames: []string{"w"}, Max: 10, Now: now, LockedUntil: now.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, tasks, 3)
		h.Advance(lease + time.Second)

		runDue := func() <-chan int { return runDueAsync(ctx, h.Runner, 10) }

		// The runner runs the three side by side: each step has started
		// while none has ended.
		first := runDue()
		for _, id := range ids[:3] {
			awaitSignal(t, entered[id], id+"'s step")
			task, err := h.Store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: id})
			require.NoError(t, err)
			require.Equal(t, db.TaskStatusProcessing, task.Status, id)
			require.Equal(t, 1, task.LeaseLosses, id)
		}

		// Its claims still take expired leases and new tasks beside them.
		_, err = h.Client.Create(ctx, "w", dftype.CreateRequest{ID: "d"})
		require.NoError(t, err)
		h.Advance(time.Second)
		second := runDue()
		awaitSignal(t, entered["d"], "d's step")

		close(proceed)
		for _, ran := range []<-chan int{first, second} {
			select {
			case n := <-ran:
				require.Positive(t, n)
			case <-time.After(10 * time.Second):
				t.Fatal("RunDue did not return")
			}
		}
		for _, id := range ids {
			var out string
			h.RequireOutput("w", id, &out)
			require.Equal(t, "ok", out, id)
		}
	})
}

// slowReleaseStore holds every TaskRelease until the step it names has
// started or a while has passed, and logs both in order: a hand-back that
// the runner does not wait for loses that race.
type slowReleaseStore struct {
	db.Store
	stepStarted chan struct{}

	mu  sync.Mutex
	log []string
}

func (s *slowReleaseStore) record(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, what)
}

func (s *slowReleaseStore) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *slowReleaseStore) TaskRelease(ctx context.Context, p *db.TaskReleaseParams) error {
	select {
	case <-s.stepStarted:
	case <-time.After(2 * time.Second):
	}
	err := s.Store.TaskRelease(ctx, p)
	s.record("hand-back returned")
	return err
}

// TestQuarantineHandsBackBeforeTheSuspectRuns: a claim that returns two
// suspects keeps the first and hands the second back; the one it keeps
// must not start before the hand-back has committed. Should it kill the
// process, a suspect still held would die beside it, a lease loss the
// quarantine is there to spare it. (The hand-back used to run in the
// background while the kept suspect started at once.)
func TestQuarantineHandsBackBeforeTheSuspectRuns(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		ctx := context.Background()
		base := b.NewStore(t)
		store := &slowReleaseStore{Store: base, stepStarted: make(chan struct{})}
		clk := clock.NewMock()
		clk.Set(testharness.DefaultStart)
		const lease = 30 * time.Second
		var once sync.Once
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "one", func(context.Context) (string, error) {
				store.record("step of " + ev.InstanceID + " started")
				once.Do(func() { close(store.stepStarted) })
				return "one", nil
			})
		})
		c, err := client.New(&client.Config{Store: base, Registry: reg, Clock: clk})
		require.NoError(t, err)
		for _, id := range []string{"x", "y"} {
			_, err := c.Create(ctx, "w", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		// Two processes in a row claimed them both and died.
		for i := range 2 {
			now := clk.Now().UTC().Truncate(time.Microsecond)
			tasks, err := base.TaskClaim(ctx, &db.TaskClaimParams{
				Owner: fmt.Sprintf("dead-%d", i), WorkflowNames: []string{"w"}, Max: 10, Now: now, LockedUntil: now.Add(lease),
			})
			require.NoError(t, err)
			require.Len(t, tasks, 2)
			clk.Add(lease + time.Second)
		}
		r, err := runner.New(&runner.Config{
			Store: store, Registry: reg, Clock: clk, Logger: quietLogger, ID: "r",
			LeaseDuration: lease, PollInterval: time.Hour,
		})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		defer func() { require.NoError(t, r.Stop(ctx)) }()
		r.Notify()
		awaitSignal(t, store.stepStarted, "the kept suspect's step")
		events := store.events()
		require.NotEmpty(t, events)
		require.Equal(t, "hand-back returned", events[0],
			"the kept suspect started before the other suspect was handed back: %v", events)
		require.Eventually(t, func() bool {
			for _, id := range []string{"x", "y"} {
				info, err := c.Get(ctx, "w", id)
				if err != nil || info.Status != dftype.StatusComplete {
					return false
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond, "both complete")
	})
}
