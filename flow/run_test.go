package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestVersionPinning shows that every instance runs the version that was the
// latest when it was created, whatever is applied later, and again after a
// restart.
func TestVersionPinning(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		p.apply(greetFlow("greet", "1.0.0"))
		info, err := p.client.Create(p.ctx(), "greet", dftype.CreateRequest{
			ID: "a", Params: json.RawMessage(`{"name":"Ada"}`),
			Metadata: json.RawMessage(`{"trigger":{"type":"api","source":"test"}}`),
		})
		require.NoError(t, err)
		require.JSONEq(t, `{"trigger":{"type":"api","source":"test"},"flow":{"id":"greet","version":"1.0.0"}}`, string(info.Metadata),
			"the pin is added to the metadata the caller gave")
		p.h.RunUntilIdle()
		p.h.RequireStatus("greet", "a", dftype.StatusWaiting)

		// Newer versions arrive while a waits, and one older than the
		// latest, and a pre-release.
		require.Equal(t, "1.9.0", p.apply(greetFlow("greet", "1.9.0")).Latest)
		require.Equal(t, "1.10.0", p.apply(greetFlow("greet", "1.10.0")).Latest)
		require.Equal(t, "1.10.0", p.apply(greetFlow("greet", "1.2.0")).Latest)
		require.Equal(t, "1.10.0", p.apply(greetFlow("greet", "2.0.0-rc.1")).Latest)
		p.create("greet", "b", `{"name":"Bo"}`)
		require.Equal(t, "1.10.0", p.pinOf("greet", "b"))

		// A Go caller may pin a version of its own choosing.
		_, err = p.client.Create(p.ctx(), "greet", dftype.CreateRequest{
			ID: "rc", Params: json.RawMessage(`{"name":"Cy"}`),
			Metadata: json.RawMessage(`{"flow":{"id":"greet","version":"2.0.0-rc.1"}}`),
		})
		require.NoError(t, err)
		_, err = p.client.Create(p.ctx(), "greet", dftype.CreateRequest{
			ID: "nope", Metadata: json.RawMessage(`{"flow":{"id":"greet","version":"3.0.0"}}`),
		})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		_, err = p.client.Create(p.ctx(), "greet", dftype.CreateRequest{
			ID: "other", Metadata: json.RawMessage(`{"flow":{"id":"order","version":"1.0.0"}}`),
		})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)

		p.h.RunUntilIdle()
		for _, id := range []string{"a", "b", "rc"} {
			p.h.SendEvent("greet", id, "go", nil)
		}
		p.h.RunUntilIdle()
		require.Equal(t, "v1.0.0 Ada", p.output("greet", "a"))
		require.Equal(t, "v1.10.0 Bo", p.output("greet", "b"))
		require.Equal(t, "v2.0.0-rc.1 Cy", p.output("greet", "rc"))

		// A restart runs the pinned version again.
		_, err = p.client.Restart(p.ctx(), "greet", "a")
		require.NoError(t, err)
		p.h.RunUntilIdle()
		p.h.SendEvent("greet", "a", "go", nil)
		p.h.RunUntilIdle()
		require.Equal(t, "v1.0.0 Ada", p.output("greet", "a"))
		require.Equal(t, 2, p.h.Status("greet", "a").RunNumber)
		require.Equal(t, "1.0.0", p.pinOf("greet", "a"))

		// Batches pin every instance.
		created, err := p.client.CreateBatch(p.ctx(), "greet", []dftype.CreateRequest{{ID: "c1"}, {ID: "c2"}})
		require.NoError(t, err)
		require.Len(t, created, 2)
		require.Equal(t, "1.10.0", p.pinOf("greet", "c1"))
		require.Equal(t, "1.10.0", p.pinOf("greet", "c2"))

		require.Zero(t, flow.CompileCount(p.flows), "Apply compiled every version already")
	})
}

// TestUnpinnedInstances runs instances written without the client's hook,
// as a cron schedule writes them: each runs the version that was the latest
// when it was created.
func TestUnpinnedInstances(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		p.apply(quickFlow("quick", "1.0.0"))
		p.h.Advance(time.Second)
		_, err := p.h.Client.Create(p.ctx(), "quick", dftype.CreateRequest{ID: "old"})
		require.NoError(t, err)
		p.h.Advance(time.Minute)
		p.apply(quickFlow("quick", "1.1.0"))
		p.h.Advance(time.Second)
		_, err = p.h.Client.Create(p.ctx(), "quick", dftype.CreateRequest{ID: "new"})
		require.NoError(t, err)
		p.h.RunUntilIdle()
		require.Equal(t, "1.0.0", p.output("quick", "old"), "1.1.0 came after it")
		require.Equal(t, "1.1.0", p.output("quick", "new"))
		pin, err := flow.PinOf(p.h.Status("quick", "old").Metadata)
		require.NoError(t, err)
		require.Nil(t, pin)
	})
}

func TestVersionsThatCannotRun(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		p.apply(quickFlow("quick", "1.0.0"))
		for id, md := range map[string]string{
			"missing": `{"flow":{"id":"quick","version":"9.9.9"}}`,
			"garbled": `{"flow":"9.9.9"}`,
			"foreign": `{"flow":{"id":"order","version":"1.0.0"}}`,
		} {
			_, err := p.h.Client.Create(p.ctx(), "quick", dftype.CreateRequest{ID: id, Metadata: json.RawMessage(md)})
			require.NoError(t, err)
		}
		p.h.RunUntilIdle()
		require.Equal(t, flow.ErrorNameVersionNotFound, p.h.RequireStatus("quick", "missing", dftype.StatusErrored).Error.Name)
		require.Equal(t, flow.ErrorNameInvalidPin, p.h.RequireStatus("quick", "garbled", dftype.StatusErrored).Error.Name)
		require.Equal(t, flow.ErrorNameInvalidPin, p.h.RequireStatus("quick", "foreign", dftype.StatusErrored).Error.Name)
	})
}

// TestAnotherProcess applies flows in one process and creates, runs and
// finds them in another over the same database.
func TestAnotherProcess(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		t.Run("LoadAndRun", func(t *testing.T) {
			t.Parallel()
			api := newProcess(t, b)
			api.apply(greetFlow("greet", "1.0.0"))
			api.create("greet", "x", `{"name":"Xi"}`)
			api.create("greet", "y", `{"name":"Yu"}`)

			worker := api.sibling()
			require.False(t, worker.flows.IsFlow("greet"))
			require.Zero(t, worker.h.RunDue(), "a runner claims only the flows it registered")
			added, err := worker.flows.Load(worker.ctx())
			require.NoError(t, err)
			require.Equal(t, []string{"greet"}, added)
			again, err := worker.flows.Load(worker.ctx())
			require.NoError(t, err)
			require.Empty(t, again)

			worker.h.RunUntilIdle()
			worker.h.RequireStatus("greet", "x", dftype.StatusWaiting)
			worker.h.SendEvent("greet", "x", "go", nil)
			worker.h.SendEvent("greet", "y", "go", nil)
			worker.h.RunUntilIdle()
			require.Equal(t, "v1.0.0 Xi", worker.output("greet", "x"))
			require.Equal(t, "v1.0.0 Yu", worker.output("greet", "y"))
			require.EqualValues(t, 1, flow.CompileCount(worker.flows), "compiled once per version, not per instance or run")
		})

		t.Run("CreateLoadsAnUnknownFlow", func(t *testing.T) {
			t.Parallel()
			api := newProcess(t, b)
			other := api.sibling()
			api.apply(quickFlow("quick", "2.0.0"))
			other.create("quick", "q", `{}`)
			require.True(t, other.flows.IsFlow("quick"))
			require.Equal(t, "2.0.0", other.pinOf("quick", "q"))
			other.h.RunUntilIdle()
			require.Equal(t, "2.0.0", other.output("quick", "q"))

			_, err := other.client.Create(other.ctx(), "nothing", dftype.CreateRequest{})
			require.ErrorIs(t, err, workflow.ErrWorkflowNotFound)

			// Resolve does the same for a name alone (a schedule's).
			api.apply(quickFlow("scheduled", "1.0.0"))
			require.False(t, other.flows.IsFlow("scheduled"))
			require.NoError(t, other.flows.Resolve(other.ctx(), "scheduled"))
			require.True(t, other.flows.IsFlow("scheduled"))
			require.NoError(t, other.flows.Resolve(other.ctx(), "nothing"), "no stored flow: nothing to do")
			require.NoError(t, other.flows.Resolve(other.ctx(), "not a name!"))
		})

		t.Run("RefreshAndNotify", func(t *testing.T) {
			t.Parallel()
			api := newProcess(t, b)
			woken := make(chan string, 10)
			worker := api.sibling(func(c *flow.Config) {
				c.WakeFunc = func(name string) { woken <- name }
			})
			require.NoError(t, worker.flows.Start(worker.ctx()))
			t.Cleanup(func() { require.NoError(t, worker.flows.Stop(context.Background())) })
			require.Error(t, worker.flows.Start(worker.ctx()), "started once")

			api.apply(quickFlow("ticked", "1.0.0"))
			worker.h.Advance(time.Minute) // the refresh interval
			require.Equal(t, "ticked", receive(t, woken))
			require.True(t, worker.flows.IsFlow("ticked"))

			api.apply(quickFlow("notified", "1.0.0"))
			worker.flows.Notify("notified") // a wake-up for a name the worker does not know
			require.Equal(t, "notified", receive(t, woken))
			api.create("notified", "n", `{}`)
			worker.h.RunUntilIdle()
			require.Equal(t, "1.0.0", worker.output("notified", "n"))

			worker.flows.Notify("notified") // known: nothing to do
			worker.flows.Notify("")
			select {
			case name := <-woken:
				t.Fatalf("unexpected refresh registered %q", name)
			default:
			}
		})

		t.Run("FlowsThisHostCannotRunAreSkipped", func(t *testing.T) {
			t.Parallel()
			custom, err := flow.NewHandlers(flow.WithHandler(shoutHandler{}))
			require.NoError(t, err)
			api := newProcess(t, b, withHandlers(custom))
			api.apply([]byte(`{"id": "loud", "version": "1.0.0", "initialStepId": "s",
				"steps": {"s": {"id": "s", "type": "shout", "input": {"key": "text"}, "outputKey": "out"}}, "output": "out"}`))
			api.apply(quickFlow("quick", "1.0.0"))

			var logs syncBuffer
			worker := api.sibling(func(c *flow.Config) {
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			added, err := worker.flows.Load(worker.ctx())
			require.NoError(t, err)
			require.Equal(t, []string{"quick"}, added)
			require.False(t, worker.flows.IsFlow("loud"))
			_, err = worker.flows.Load(worker.ctx())
			require.NoError(t, err)
			require.Equal(t, 1, strings.Count(logs.String(), "not registered on this host"), "warned once: %s", logs.String())
			require.Contains(t, logs.String(), "flow=loud")

			api.create("loud", "l", `{"text":"hi"}`)
			api.h.RunUntilIdle()
			require.Equal(t, "HI!", api.output("loud", "l"))
		})
	})
}

// TestStoreErrorsAreRetried fails the run path's store reads a few times:
// the instance completes all the same.
func TestStoreErrorsAreRetried(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		store := &flakyStore{Store: b.NewStore(t)}
		api := newProcessWith(t, testharness.New(t, testharness.WithStore(store)))
		api.apply(quickFlow("quick", "1.0.0"))
		api.create("quick", "q", `{}`)
		worker := api.sibling()
		_, err := worker.flows.Load(worker.ctx())
		require.NoError(t, err)
		flow.ForgetCompiled(worker.flows)
		store.failures.Store(2) // the pin read, then the definition read
		worker.h.RunUntilIdle()
		require.Equal(t, "1.0.0", worker.output("quick", "q"))
		require.Zero(t, store.failures.Load())
	})
}

// flakyStore fails InstanceGet and FlowGet while failures is positive.
type flakyStore struct {
	db.Store
	failures atomic.Int64
}

var errFlaky = errors.New("connection reset (test)")

func (s *flakyStore) fail() bool {
	for {
		n := s.failures.Load()
		if n <= 0 {
			return false
		}
		if s.failures.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (s *flakyStore) InstanceGet(ctx context.Context, ref db.InstanceRef) (*db.Instance, error) {
	if s.fail() {
		return nil, errFlaky
	}
	return s.Store.InstanceGet(ctx, ref)
}

func (s *flakyStore) FlowGet(ctx context.Context, ref db.FlowRef) (*db.Flow, error) {
	if s.fail() {
		return nil, errFlaky
	}
	return s.Store.FlowGet(ctx, ref)
}

// shoutHandler is a host handler: its input in upper case with a "!".
type shoutHandler struct{}

func (shoutHandler) Type() string                          { return "shout" }
func (shoutHandler) Validate(config json.RawMessage) error { return nil }
func (shoutHandler) Run(_ context.Context, inv *flow.Invocation) (any, error) {
	s, _ := inv.Input.(string)
	return strings.ToUpper(s) + "!", nil
}

// receive returns the next value of ch, failing the test after a while.
func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a signal")
		return ""
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
