package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/dispatcher"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

type keyed struct {
	Key string `json:"key"`
}

// limitCase is one limit the racing-runners test holds: the options that
// set it, how many instances share one slot group (by key or all), and the
// max.
type limitCase struct {
	name    string
	opts    []workflow.Option
	queue   string // set as a queue limit of max when not empty
	keys    int    // instances are spread over this many keys
	perKey  int
	max     int
	groupOf func(key string) string // the limited scope an instance counts in
}

// TestLimitsRacingRunners runs four runners on one database against a
// per-key limit of 1 over 100 keys, a workflow limit and a queue limit.
// A sampler reads the database while they run and never sees more admitted
// (non-terminal, not waiting for a slot) instances in a scope than its max;
// the workflow code itself never sees more running at once; every instance
// completes and every slot is given back.
func TestLimitsRacingRunners(t *testing.T) {
	t.Parallel()
	cases := []limitCase{
		{name: "key", keys: 100, perKey: 3, max: 1, groupOf: func(k string) string { return k },
			opts: []workflow.Option{workflow.WithConcurrencyKey(workflow.KeyOf(func(p keyed) string { return p.Key }), 1)}},
		{name: "workflow", keys: 40, perKey: 2, max: 3, groupOf: func(string) string { return "all" },
			opts: []workflow.Option{workflow.WithMaxRunning(3)}},
		{name: "queue", keys: 40, perKey: 2, max: 2, groupOf: func(string) string { return "all" }, queue: "limited",
			opts: []workflow.Option{workflow.WithQueue("limited")}},
	}
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				runLimitCase(t, b, tc)
			})
		}
	})
}

func runLimitCase(t *testing.T, b testharness.Backend, tc limitCase) {
	const runners = 4
	store := b.NewStore(t)
	ctx := context.Background()

	var (
		mu        sync.Mutex
		inflight  = map[string]int{}
		maxSeen   atomic.Int32
		violation atomic.Value
	)
	body := func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
		group := tc.groupOf(ev.Payload.Key)
		return workflow.Do(step, "work", func(ctx context.Context) (string, error) {
			mu.Lock()
			inflight[group]++
			if n := int32(inflight[group]); n > maxSeen.Load() {
				maxSeen.Store(n)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond) // work that overlaps with other instances
			mu.Lock()
			inflight[group]--
			mu.Unlock()
			return ev.Payload.Key, nil
		})
	}

	local := dispatcher.NewLocal()
	var regs []*workflow.Registry
	for i := range runners {
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "limited", body, tc.opts...)
		regs = append(regs, reg)
		r, err := runner.New(&runner.Config{
			Store: store, Registry: reg, Logger: quietLogger, ID: fmt.Sprintf("runner-%d", i),
			MaxConcurrency: 8, PollInterval: 20 * time.Millisecond, WakeFunc: local.Wake,
			Queues: []string{runner.AllQueues}, // the queue case runs on its own queue
		})
		require.NoError(t, err)
		local.Add(r)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() {
			stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, r.Stop(stop))
		})
	}
	c, err := client.New(&client.Config{Store: store, Registry: regs[0], WakeFunc: local.Wake})
	require.NoError(t, err)
	if tc.queue != "" {
		_, err := c.SetQueueLimits(ctx, tc.queue, client.QueueLimits{MaxRunning: tc.max})
		require.NoError(t, err)
	}

	// The sampler: what the database says is admitted and not terminal.
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	samples := 0
	go func() {
		defer close(sampleDone)
		for {
			select {
			case <-stopSampling:
				return
			default:
			}
			list, err := store.InstanceList(ctx, &db.InstanceListParams{
				WorkflowName: "limited", Limit: 1000,
				Statuses: []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause, dftype.StatusPaused},
			})
			if err != nil {
				violation.Store(fmt.Sprintf("sampling: %v", err))
				return
			}
			admitted := map[string]int{}
			for _, inst := range list {
				if inst.Status == dftype.StatusQueued && inst.WaitingFor != nil && inst.WaitingFor.Kind == db.LimitKindConcurrency {
					continue
				}
				var p keyed
				_ = json.Unmarshal(inst.Params, &p)
				g := tc.groupOf(p.Key)
				admitted[g]++
				if admitted[g] > tc.max {
					violation.Store(fmt.Sprintf("sample %d: %d admitted instances in %q, max %d", samples, admitted[g], g, tc.max))
				}
			}
			samples++
			time.Sleep(time.Millisecond) // the sampling interval: leave the database to the runners
		}
	}()

	total := tc.keys * tc.perKey
	for start := 0; start < total; start += 100 {
		reqs := make([]dftype.CreateRequest, 0, 100)
		for i := start; i < min(start+100, total); i++ {
			key := fmt.Sprintf("k%03d", i%tc.keys)
			reqs = append(reqs, dftype.CreateRequest{ID: fmt.Sprintf("i-%04d", i), Params: mustJSON(t, keyed{Key: key})})
		}
		_, err := c.CreateBatch(ctx, "limited", reqs)
		require.NoError(t, err)
	}

	require.Eventually(t, func() bool {
		res, err := c.List(ctx, client.ListParams{WorkflowName: "limited", Statuses: []dftype.InstanceStatus{dftype.StatusComplete}, PageSize: 1000})
		return err == nil && len(res.Instances) == total
	}, 3*time.Minute, 20*time.Millisecond, "every instance completes")
	close(stopSampling)
	<-sampleDone

	if v := violation.Load(); v != nil {
		t.Fatal(v)
	}
	require.Positive(t, samples)
	require.LessOrEqual(t, int(maxSeen.Load()), tc.max, "the workflow code saw more running at once than the limit")
	if tc.queue != "" {
		q, err := c.GetQueue(ctx, tc.queue)
		require.NoError(t, err)
		require.Zero(t, q.Running, "every slot of the queue is given back")
	}
}

// newLimitHarness is a harness with one workflow that waits for a "go"
// event, limited by opts.
func newLimitHarness(t *testing.T, b testharness.Backend, opts ...workflow.Option) *testharness.Harness {
	h := testharness.New(t, testharness.WithBackend(b))
	workflow.MustRegister(h.Registry, "gated", func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
		if _, err := workflow.WaitForEvent[json.RawMessage](step, "gate", workflow.WaitOptions{Type: "go", Timeout: time.Hour}); err != nil {
			return "", err
		}
		return ev.Payload.Key, nil
	}, opts...)
	return h
}

func createKeyed(t *testing.T, h *testharness.Harness, id, key string) *dftype.InstanceInfo {
	t.Helper()
	info, err := h.Client.Create(h.Context(), "gated", dftype.CreateRequest{ID: id, Params: mustJSON(t, keyed{Key: key})})
	require.NoError(t, err)
	return info
}

// TestLimitsWaitingState checks the visible waiting state and that
// terminate, restart, pause and resume keep the slot count right: a
// terminated holder frees its slot for the oldest waiter, a restarted
// terminal instance waits for a slot again, a waiting instance that is
// paused and resumed stays waiting, and a terminated waiter frees nothing.
func TestLimitsWaitingState(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := newLimitHarness(t, b, workflow.WithMaxRunning(1))
		ctx := h.Context()
		createKeyed(t, h, "a", "x")
		info := createKeyed(t, h, "b", "x")
		require.Equal(t, dftype.StatusQueued, info.Status)
		createKeyed(t, h, "c", "x")
		h.RunUntilIdle()
		h.RequireStatus("gated", "a", dftype.StatusWaiting)
		b1 := h.RequireStatus("gated", "b", dftype.StatusQueued)
		require.Equal(t, &dftype.WaitingFor{Kind: "concurrency", Scope: "workflow", Name: "gated", Max: 1}, b1.WaitingFor)
		require.Equal(t, b1.WaitingFor, h.History("gated", "b").Instance.WaitingFor, "the history shows the limit too")
		list, err := h.Client.List(ctx, client.ListParams{WorkflowName: "gated", Statuses: []dftype.InstanceStatus{dftype.StatusQueued}})
		require.NoError(t, err)
		require.Len(t, list.Instances, 2)
		for _, inst := range list.Instances {
			require.NotNil(t, inst.WaitingFor, "the list says which limit holds %s back", inst.ID)
		}
		_, err = h.Store.TaskGet(ctx, db.InstanceRef{WorkflowName: "gated", ID: "b"})
		require.ErrorIs(t, err, db.ErrNotFound, "a waiting instance has no claimable task")

		// Pause and resume a waiter: it stays waiting, with no task.
		_, err = h.Client.Pause(ctx, "gated", "c")
		require.NoError(t, err)
		_, err = h.Client.Resume(ctx, "gated", "c")
		require.NoError(t, err)
		_, err = h.Store.TaskGet(ctx, db.InstanceRef{WorkflowName: "gated", ID: "c"})
		require.ErrorIs(t, err, db.ErrNotFound, "a resumed waiter still waits for a slot")

		// Terminate the holder: the oldest waiter (b) is admitted and runs.
		_, err = h.Client.Terminate(ctx, "gated", "a")
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("gated", "b", dftype.StatusWaiting)
		require.NotNil(t, h.RequireStatus("gated", "c", dftype.StatusQueued).WaitingFor)

		// Restart the terminated one: it waits for a slot again.
		_, err = h.Client.Restart(ctx, "gated", "a")
		require.NoError(t, err)
		require.NotNil(t, h.RequireStatus("gated", "a", dftype.StatusQueued).WaitingFor)

		// Terminating a waiter frees nothing: b still holds the slot.
		_, err = h.Client.Terminate(ctx, "gated", "c")
		require.NoError(t, err)
		h.RunUntilIdle()
		require.NotNil(t, h.RequireStatus("gated", "a", dftype.StatusQueued).WaitingFor)

		// b completes: a (restarted) is admitted, runs and completes.
		h.SendEvent("gated", "b", "go", nil)
		h.RunUntilIdle()
		h.RequireStatus("gated", "b", dftype.StatusComplete)
		h.RequireStatus("gated", "a", dftype.StatusWaiting)
		h.SendEvent("gated", "a", "go", nil)
		h.RunUntilIdle()
		h.RequireStatus("gated", "a", dftype.StatusComplete)

		// Restarting a running limited instance keeps its slot: the next
		// waiter still waits.
		createKeyed(t, h, "d", "x")
		createKeyed(t, h, "e", "x")
		h.RunUntilIdle()
		h.RequireStatus("gated", "d", dftype.StatusWaiting)
		_, err = h.Client.Restart(ctx, "gated", "d")
		require.NoError(t, err)
		h.RunUntilIdle()
		h.RequireStatus("gated", "d", dftype.StatusWaiting)
		require.NotNil(t, h.RequireStatus("gated", "e", dftype.StatusQueued).WaitingFor)
	})
}

// TestLimitsPerKey checks that a per-key limit holds one key back and lets
// another run.
func TestLimitsPerKey(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := newLimitHarness(t, b, workflow.WithConcurrencyKey(workflow.KeyOf(func(p keyed) string { return p.Key }), 1))
		createKeyed(t, h, "a1", "a")
		createKeyed(t, h, "a2", "a")
		createKeyed(t, h, "b1", "b")
		h.RunUntilIdle()
		h.RequireStatus("gated", "a1", dftype.StatusWaiting)
		h.RequireStatus("gated", "b1", dftype.StatusWaiting)
		a2 := h.RequireStatus("gated", "a2", dftype.StatusQueued)
		require.Equal(t, &dftype.WaitingFor{Kind: "concurrency", Scope: "key", Name: "a", Max: 1}, a2.WaitingFor)
		h.SendEvent("gated", "a1", "go", nil)
		h.RunUntilIdle()
		h.RequireStatus("gated", "a2", dftype.StatusWaiting)
	})
}

// TestLimitsLeaseExpiry checks that a holder whose runner died (its lease
// expires) does not leak its slot: another runner reclaims it, and once it
// completes the waiter runs.
func TestLimitsLeaseExpiry(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "once", func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
			return ev.Payload.Key, nil
		}, workflow.WithMaxRunning(1))
		ctx := h.Context()
		for _, id := range []string{"a", "b"} {
			_, err := h.Client.Create(ctx, "once", dftype.CreateRequest{ID: id, Params: mustJSON(t, keyed{Key: id})})
			require.NoError(t, err)
		}
		// A runner that claims a and dies.
		claims, err := h.Store.TaskClaim(ctx, &db.TaskClaimParams{
			Owner: "dead", WorkflowNames: []string{"once"}, Max: 10, Now: h.Now(), LockedUntil: h.Now().Add(time.Minute),
		})
		require.NoError(t, err)
		require.Len(t, claims, 1, "only the admitted instance is claimable")
		require.Equal(t, "a", claims[0].Task.InstanceID)
		require.Zero(t, h.RunDue(), "nothing is due while the dead runner's lease holds")
		h.Advance(2 * time.Minute)
		h.RunUntilIdle()
		h.RequireStatus("once", "a", dftype.StatusComplete)
		h.RequireStatus("once", "b", dftype.StatusComplete)
	})
}

// TestLimitsRate checks a rate limit of 2 starts per minute over 9
// instances created at once (fake clock): no minute's window holds more
// than 2 starts, none is dropped, and the ones the window holds back say
// so.
func TestLimitsRate(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "rated", func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
			return ev.Payload.Key, nil
		}, workflow.WithRateLimit(2, time.Minute))
		ctx := h.Context()
		const n = 9
		for i := range n {
			_, err := h.Client.Create(ctx, "rated", dftype.CreateRequest{ID: fmt.Sprintf("r%d", i), Params: mustJSON(t, keyed{Key: "x"})})
			require.NoError(t, err)
		}
		require.Equal(t, 2, h.RunDue())
		held := h.RequireStatus("rated", "r2", dftype.StatusQueued)
		require.NotNil(t, held.WaitingFor)
		require.Equal(t, "rate", held.WaitingFor.Kind)
		require.Equal(t, 2, held.WaitingFor.Max)
		require.NotNil(t, held.WaitingFor.Until)

		var starts []time.Time
		for range 40 {
			h.RunDue()
			h.Advance(5 * time.Second)
		}
		h.RunUntilIdle()
		for i := range n {
			info := h.RequireStatus("rated", fmt.Sprintf("r%d", i), dftype.StatusComplete)
			require.NotNil(t, info.StartedAt)
			starts = append(starts, *info.StartedAt)
		}
		perWindow := map[time.Time]int{}
		for _, at := range starts {
			perWindow[at.Truncate(time.Minute)]++
		}
		for w, count := range perWindow {
			require.LessOrEqual(t, count, 2, "the window at %s started %d", w, count)
		}
		require.Len(t, perWindow, (n+1)/2, "each window is used in full before the next")
	})
}

// TestLimitsBadInput checks the refusals: limits that are not positive, a
// per-key rate without a key, a key function that fails (nothing is
// written), a queue limit below zero and an unknown queue.
func TestLimitsBadInput(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	noop := func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
		return "", nil
	}
	for name, opt := range map[string]workflow.Option{
		"zero max":      workflow.WithMaxRunning(0),
		"negative max":  workflow.WithMaxRunning(-1),
		"zero rate":     workflow.WithRateLimit(0, time.Second),
		"zero period":   workflow.WithRateLimit(1, 0),
		"nil key":       workflow.WithConcurrencyKey(nil, 1),
		"zero key max":  workflow.WithConcurrencyKey(workflow.KeyOf(func(p keyed) string { return p.Key }), 0),
		"key rate only": workflow.WithKeyRateLimit(1, time.Second),
	} {
		_, err := workflow.Register(reg, "bad-"+fmt.Sprint(len(name)), noop, opt)
		require.ErrorIs(t, err, workflow.ErrInvalidLimit, name)
	}
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		failing := func(json.RawMessage) (string, error) { return "", fmt.Errorf("no customer") }
		workflow.MustRegister(h.Registry, "keyed", noop, workflow.WithConcurrencyKey(failing, 1))
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "keyed", dftype.CreateRequest{ID: "k"})
		require.ErrorIs(t, err, workflow.ErrConcurrencyKey)
		_, err = h.Client.Get(ctx, "keyed", "k")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "a refused create writes nothing")

		_, err = h.Client.SetQueueLimits(ctx, "q", client.QueueLimits{MaxRunning: -1})
		require.ErrorIs(t, err, workflow.ErrInvalidLimit)
		_, err = h.Client.SetQueueLimits(ctx, "q", client.QueueLimits{Rate: workflow.RateLimit{Limit: 0, Period: time.Second}})
		require.ErrorIs(t, err, workflow.ErrInvalidLimit)
		_, err = h.Client.SetQueueLimits(ctx, "q", client.QueueLimits{Rate: workflow.RateLimit{Limit: 3, Period: -time.Second}})
		require.ErrorIs(t, err, workflow.ErrInvalidLimit)
		_, err = h.Client.GetQueue(ctx, "q")
		require.ErrorIs(t, err, client.ErrQueueNotFound, "a refused set writes nothing")
		q, err := h.Client.SetQueueLimits(ctx, "q", client.QueueLimits{MaxRunning: 3, Rate: workflow.RateLimit{Limit: 10, Period: time.Minute}})
		require.NoError(t, err)
		require.Equal(t, 3, q.MaxRunning)
		list, err := h.Client.ListQueues(ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.Equal(t, "q", list[0].Name)
	})
}

// TestReleaseStartsOnlyServedQueues: when a limited run ends, the waiter its
// release admits is started at once on the releasing runner only when that
// runner serves the waiter's queue; a waiter of another queue gets a task
// due for a runner that serves it, and the releasing runner never runs it.
func TestReleaseStartsOnlyServedQueues(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		ctx := context.Background()
		var ran sync.Map // instance id -> runner id
		newRegistry := func(runnerID string) *workflow.Registry {
			reg := workflow.NewRegistry()
			workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
				ran.Store(ev.InstanceID, runnerID)
				_, err := step.WaitForEvent("gate", workflow.WaitOptions{Type: "go"})
				return runnerID, err
			}, workflow.WithMaxRunning(1))
			return reg
		}
		regA := newRegistry("a")
		a, err := runner.New(&runner.Config{
			Store: store, Registry: regA, Logger: quietLogger, ID: "runner-a", Queues: []string{"qa"},
			PollInterval: 20 * time.Millisecond,
		})
		require.NoError(t, err)
		require.NoError(t, a.Start(ctx))
		t.Cleanup(func() { require.NoError(t, a.Stop(context.Background())) })
		c, err := client.New(&client.Config{Store: store, Registry: regA, WakeFunc: func(string) { a.Notify() }})
		require.NoError(t, err)

		_, err = c.Create(ctx, "w", dftype.CreateRequest{ID: "first", Queue: "qa"})
		require.NoError(t, err)
		_, err = c.Create(ctx, "w", dftype.CreateRequest{ID: "second", Queue: "qb"})
		require.NoError(t, err)
		waitStatus := func(id string, want dftype.InstanceStatus) *dftype.InstanceInfo {
			var info *dftype.InstanceInfo
			require.Eventually(t, func() bool {
				info, err = c.Get(ctx, "w", id)
				return err == nil && info.Status == want
			}, 10*time.Second, 5*time.Millisecond, "%s %s", id, want)
			return info
		}
		waitStatus("first", dftype.StatusWaiting)
		second := waitStatus("second", dftype.StatusQueued)
		require.NotNil(t, second.WaitingFor, "second waits for the slot first holds")

		// first ends on runner a, which frees the slot: second is admitted,
		// but its queue is not a's.
		require.NoError(t, c.SendEvent(ctx, "w", "first", "go", nil))
		waitStatus("first", dftype.StatusComplete)
		require.Eventually(t, func() bool {
			task, err := store.TaskGet(ctx, db.InstanceRef{WorkflowName: "w", ID: "second"})
			return err == nil && task.Status == db.TaskStatusPending && task.Queue == "qb"
		}, 10*time.Second, 5*time.Millisecond, "second has a task of its queue, due for a claim")
		// Runner a polls every 20ms: give it many polls to take second.
		require.Never(t, func() bool { _, ok := ran.Load("second"); return ok }, 300*time.Millisecond, 10*time.Millisecond,
			"runner a does not serve queue qb")
		info, err := c.Get(ctx, "w", "second")
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, info.Status)

		// A runner of qb takes it.
		b2, err := runner.New(&runner.Config{
			Store: store, Registry: newRegistry("b"), Logger: quietLogger, ID: "runner-b", Queues: []string{"qb"},
			PollInterval: 20 * time.Millisecond,
		})
		require.NoError(t, err)
		require.NoError(t, b2.Start(ctx))
		t.Cleanup(func() { require.NoError(t, b2.Stop(context.Background())) })
		waitStatus("second", dftype.StatusWaiting)
		by, _ := ran.Load("second")
		require.Equal(t, "b", by)
	})
}

// TestReleaseHandsTheSlotOver runs a runner of one slot against a
// workflow limit of one: when a run ends, every slot of the runner is
// busy (its own), so the instance its release admits starts in the slot
// the ending run frees, without a claim, and the runner never runs more
// than its one slot.
func TestReleaseHandsTheSlotOver(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := b.NewStore(t)
		ctx := context.Background()
		var (
			running, maxRunning atomic.Int32
			started             = make(chan string, 3)
			gates               sync.Map // instance id -> chan struct{}
		)
		gate := func(id string) chan struct{} {
			ch, _ := gates.LoadOrStore(id, make(chan struct{}))
			return ch.(chan struct{})
		}
		var opened sync.Map
		open := func(id string) {
			if _, done := opened.LoadOrStore(id, true); !done {
				close(gate(id))
			}
		}
		reg := workflow.NewRegistry()
		workflow.MustRegister(reg, "w", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "work", func(ctx context.Context) (string, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for m := maxRunning.Load(); n > m && !maxRunning.CompareAndSwap(m, n); m = maxRunning.Load() {
				}
				started <- ev.InstanceID
				select {
				case <-gate(ev.InstanceID):
				case <-ctx.Done():
					return "", ctx.Err()
				}
				return ev.InstanceID, nil
			})
		}, workflow.WithMaxRunning(1))
		r, err := runner.New(&runner.Config{
			Store: store, Registry: reg, Logger: quietLogger, ID: "runner-1", MaxConcurrency: 1,
			PollInterval: 20 * time.Millisecond,
		})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
		// Before the runner stops (cleanups run last first), every step
		// may return, also when an assertion below failed.
		t.Cleanup(func() {
			for _, id := range []string{"first", "second", "third"} {
				open(id)
			}
		})
		c, err := client.New(&client.Config{Store: store, Registry: reg, WakeFunc: func(string) { r.Notify() }})
		require.NoError(t, err)

		for _, id := range []string{"first", "second", "third"} {
			_, err = c.Create(ctx, "w", dftype.CreateRequest{ID: id})
			require.NoError(t, err)
		}
		next := func() string {
			select {
			case id := <-started:
				return id
			case <-time.After(20 * time.Second):
				t.Fatal("no instance started")
				return ""
			}
		}
		require.Equal(t, "first", next())
		require.Equal(t, int64(1), r.Claimed(), "first was claimed")
		require.Zero(t, r.EagerStarts())

		open("first")
		require.Equal(t, "second", next(), "the oldest waiter is admitted")
		require.Equal(t, int64(1), r.Claimed(), "second started without a claim")
		require.Equal(t, int64(1), r.EagerStarts(), "second started in the slot first's end freed")
		open("second")
		require.Equal(t, "third", next())
		require.Equal(t, int64(1), r.Claimed())
		require.Equal(t, int64(2), r.EagerStarts())
		open("third")
		for _, id := range []string{"first", "second", "third"} {
			require.Eventually(t, func() bool {
				info, err := c.Get(ctx, "w", id)
				return err == nil && info.Status == dftype.StatusComplete
			}, 20*time.Second, 5*time.Millisecond, "%s completes", id)
		}
		require.Equal(t, int32(1), maxRunning.Load(), "never more than the runner's one slot")
		// second and third started in the slot handed over, without a
		// claim: each logged its start with its first checkpoint.
		requireStartedOnce(t, store, "w", "first", "second", "third")
	})
}

// rateRun creates instances on the fake clock and steps it forward seven
// seconds at a time (a step that does not divide the period, so starts
// fall inside windows, not only on their boundaries), running what is due
// at each step. At every step it checks that no instance failed and that
// each one not started yet is queued and waits for a rate limit. It
// returns each instance's start once all completed.
func rateRun(t *testing.T, h *testharness.Harness, ids map[string]string, period time.Duration) map[string]time.Time {
	t.Helper()
	ctx := h.Context()
	starts := map[string]time.Time{}
	for step := 0; len(starts) < len(ids); step++ {
		require.Less(t, step, 1000, "every instance starts")
		h.RunDue()
		for id, wf := range ids {
			if _, ok := starts[id]; ok {
				continue
			}
			info, err := h.Client.Get(ctx, wf, id)
			require.NoError(t, err)
			switch {
			case info.StartedAt != nil:
				require.NotEqual(t, dftype.StatusErrored, info.Status, "%s failed", id)
				starts[id] = *info.StartedAt
			default:
				require.Equal(t, dftype.StatusQueued, info.Status, "%s waits in the queue", id)
				require.NotNil(t, info.WaitingFor, "%s says what holds it back", id)
				require.Equal(t, "rate", info.WaitingFor.Kind, id)
				require.NotNil(t, info.WaitingFor.Until, id)
				require.True(t, info.WaitingFor.Until.After(h.Now()), "%s waits for a later window", id)
				require.Equal(t, dftype.Duration(period), info.WaitingFor.Period, id)
			}
		}
		h.Advance(7 * time.Second)
	}
	h.RunUntilIdle()
	for id, wf := range ids {
		h.RequireStatus(wf, id, dftype.StatusComplete)
	}
	return starts
}

// requireRate checks that the starts keep to n per period within one
// period's tolerance: no window (periods aligned on multiples of the
// period) holds more than n, so no sliding period holds more than 2n; and
// the excess is not held back longer than it must be: every window but the
// last is used in full.
func requireRate(t *testing.T, starts []time.Time, n int, period time.Duration) {
	t.Helper()
	perWindow := map[time.Time]int{}
	for _, at := range starts {
		perWindow[at.Truncate(period)]++
	}
	for w, count := range perWindow {
		require.LessOrEqual(t, count, n, "the window at %s started %d", w, count)
	}
	for _, from := range starts {
		inPeriod := 0
		for _, at := range starts {
			if !at.Before(from) && at.Before(from.Add(period)) {
				inPeriod++
			}
		}
		require.LessOrEqual(t, inPeriod, 2*n, "the period from %s started %d", from, inPeriod)
	}
	require.Len(t, perWindow, (len(starts)+n-1)/n, "each window is used in full before the next")
}

// TestLimitsQueueRate checks a queue rate limit of 3 starts per minute,
// set at run time, over two workflows on the queue (fake clock): their
// starts share the queue's windows, none holds more than 3, the excess
// waits (queued, waiting for the queue's rate) and every instance
// completes; a workflow on another queue is not held back.
func TestLimitsQueueRate(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		body := func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
			return workflow.Do(step, "work", func(ctx context.Context) (string, error) { return ev.Payload.Key, nil })
		}
		workflow.MustRegister(h.Registry, "qa", body, workflow.WithQueue("slow"))
		workflow.MustRegister(h.Registry, "qb", body, workflow.WithQueue("slow"))
		workflow.MustRegister(h.Registry, "free", body)
		ctx := h.Context()
		_, err := h.Client.SetQueueLimits(ctx, "slow", client.QueueLimits{Rate: workflow.RateLimit{Limit: 3, Period: time.Minute}})
		require.NoError(t, err)
		h.Advance(10 * time.Second) // creates start inside a window, not on its boundary

		ids := map[string]string{}
		for i := range 11 {
			wf := []string{"qa", "qb"}[i%2]
			id := fmt.Sprintf("s%02d", i)
			_, err := h.Client.Create(ctx, wf, dftype.CreateRequest{ID: id, Params: mustJSON(t, keyed{Key: id})})
			require.NoError(t, err)
			ids[id] = wf
		}
		for i := range 5 {
			id := fmt.Sprintf("f%d", i)
			_, err := h.Client.Create(ctx, "free", dftype.CreateRequest{ID: id, Params: mustJSON(t, keyed{Key: id})})
			require.NoError(t, err)
		}
		held := h.RequireStatus("qb", "s03", dftype.StatusQueued)
		require.NotNil(t, held.WaitingFor)
		require.Equal(t, dftype.WaitingFor{
			Kind: "rate", Scope: "queue", Name: "slow", Max: 3, Period: dftype.Duration(time.Minute),
			Until: held.WaitingFor.Until,
		}, *held.WaitingFor)
		require.Equal(t, h.Now().Truncate(time.Minute).Add(time.Minute), *held.WaitingFor.Until, "the fourth start waits for the next window")

		require.Equal(t, 3+5, h.RunDue(), "the queue's window starts 3; the other queue is not held back")
		for i := range 5 {
			h.RequireStatus("free", fmt.Sprintf("f%d", i), dftype.StatusComplete)
		}
		created := h.Now()
		starts := rateRun(t, h, ids, time.Minute)
		var all []time.Time
		for _, at := range starts {
			require.False(t, at.Before(created))
			all = append(all, at)
		}
		requireRate(t, all, 3, time.Minute)
	})
}

// TestLimitsKeyRate checks a per-key rate limit of 2 starts per minute
// with two keys (fake clock): key a has 7 instances and key b 3, created
// a's first. Each key's starts keep to 2 per window, a's excess waits
// (queued, waiting for a's rate) and does not hold b back: b's first two
// start at once, in the first window, and every instance completes.
func TestLimitsKeyRate(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "kr", func(ctx context.Context, ev workflow.Event[keyed], step workflow.Step) (string, error) {
			return workflow.Do(step, "work", func(ctx context.Context) (string, error) { return ev.Payload.Key, nil })
		},
			// A max running far above the instances: only the rate holds
			// them back.
			workflow.WithConcurrencyKey(workflow.KeyOf(func(p keyed) string { return p.Key }), 100),
			workflow.WithKeyRateLimit(2, time.Minute))
		ctx := h.Context()
		h.Advance(10 * time.Second)

		ids := map[string]string{}
		keyOf := map[string]string{}
		for _, k := range []struct {
			key string
			n   int
		}{{"a", 7}, {"b", 3}} {
			for i := range k.n {
				id := fmt.Sprintf("%s%d", k.key, i)
				_, err := h.Client.Create(ctx, "kr", dftype.CreateRequest{ID: id, Params: mustJSON(t, keyed{Key: k.key})})
				require.NoError(t, err)
				ids[id], keyOf[id] = "kr", k.key
			}
		}
		a2 := h.RequireStatus("kr", "a2", dftype.StatusQueued)
		require.NotNil(t, a2.WaitingFor)
		require.Equal(t, dftype.WaitingFor{
			Kind: "rate", Scope: "key", Name: "a", Max: 2, Period: dftype.Duration(time.Minute),
			Until: a2.WaitingFor.Until,
		}, *a2.WaitingFor)
		require.NotNil(t, h.RequireStatus("kr", "b2", dftype.StatusQueued).WaitingFor)

		first := h.Now()
		require.Equal(t, 4, h.RunDue(), "two of each key start in the first window")
		for _, id := range []string{"a0", "a1", "b0", "b1"} {
			h.RequireStatus("kr", id, dftype.StatusComplete)
		}
		starts := rateRun(t, h, ids, time.Minute)
		byKey := map[string][]time.Time{}
		for id, at := range starts {
			byKey[keyOf[id]] = append(byKey[keyOf[id]], at)
		}
		requireRate(t, byKey["a"], 2, time.Minute)
		requireRate(t, byKey["b"], 2, time.Minute)
		for _, id := range []string{"b0", "b1"} {
			require.Equal(t, first, starts[id], "a's excess does not hold %s back", id)
		}
		require.Equal(t, first.Truncate(time.Minute).Add(time.Minute), starts["b2"].Truncate(time.Minute),
			"b's third waits for b's next window only, not behind a's excess")
	})
}
