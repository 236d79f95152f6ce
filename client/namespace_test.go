package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestCreatePlacesTheInstance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "pay", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "ok", nil
		},
			workflow.WithQueue("payments"))
		ctx := h.Context()

		info, err := h.Client.Create(ctx, "pay", dftype.CreateRequest{ID: "a", Priority: 9})
		require.NoError(t, err)
		require.Equal(t, "payments", info.Queue, "the workflow's queue")
		require.Equal(t, workflow.DefaultNamespace, info.Namespace)
		require.Equal(t, 9, info.Priority)

		info, err = h.Client.Create(ctx, "pay", dftype.CreateRequest{ID: "b", Queue: "urgent", Namespace: "acme"})
		require.NoError(t, err)
		require.Equal(t, "urgent", info.Queue, "the create's queue wins")
		require.Equal(t, "acme", info.Namespace)

		scoped := h.Client.Namespace("globex")
		info, err = scoped.Create(ctx, "pay", dftype.CreateRequest{ID: "c"})
		require.NoError(t, err)
		require.Equal(t, "globex", info.Namespace, "a view creates in its namespace")
		_, err = scoped.Create(ctx, "pay", dftype.CreateRequest{ID: "d", Namespace: "acme"})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest, "a view refuses another namespace")
	})
}

func TestCreateRefusesBadPlacement(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _ := setup(t, b)
		ctx := h.Context()
		for _, tc := range []struct {
			req  dftype.CreateRequest
			want error
		}{
			{dftype.CreateRequest{ID: "x", Queue: "no spaces"}, workflow.ErrInvalidRequest},
			{dftype.CreateRequest{ID: "x", Queue: "-dash"}, workflow.ErrInvalidRequest},
			{dftype.CreateRequest{ID: "x", Namespace: "a/b"}, workflow.ErrInvalidRequest},
			{dftype.CreateRequest{ID: "x", Priority: workflow.MaxPriority + 1}, workflow.ErrInvalidPriority},
			{dftype.CreateRequest{ID: "x", Priority: workflow.MinPriority - 1}, workflow.ErrInvalidPriority},
			{dftype.CreateRequest{ID: "x", DedupeKey: "bad\nkey"}, workflow.ErrInvalidRequest},
			{dftype.CreateRequest{ID: "x", DedupeKey: string(make([]byte, workflow.MaxDedupeKeyLength+1))}, workflow.ErrInvalidRequest},
		} {
			_, err := h.Client.Create(ctx, "greet", tc.req)
			require.ErrorIs(t, err, tc.want, "%+v", tc.req)
			_, err = h.Client.CreateBatch(ctx, "greet", []dftype.CreateRequest{tc.req})
			require.ErrorIs(t, err, tc.want, "batch %+v", tc.req)
		}
		_, err := h.Client.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "p", Namespace: "a"}, {ID: "q", Namespace: "b"}})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest, "a batch shares one namespace")
		_, err = h.Client.CreateBatch(ctx, "greet", []dftype.CreateRequest{{ID: "p", Priority: 1}, {ID: "q", Priority: 2000}})
		require.ErrorIs(t, err, workflow.ErrInvalidPriority, "every request is checked before anything is written")
		_, err = h.Client.Namespace("bad ns").Get(ctx, "greet", "x")
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		_, err = h.Client.List(ctx, client.ListParams{Queue: "bad queue"})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		requireNothingWritten(t, h)
	})
}

func TestDedupeKeyReturnsTheActiveInstance(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, greet := setup(t, b)
		ctx := h.Context()

		first, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "one", DedupeKey: "order-7"})
		require.NoError(t, err)
		require.False(t, first.Deduplicated)
		require.Equal(t, "order-7", first.DedupeKey)

		again, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "two", DedupeKey: "order-7"})
		require.NoError(t, err)
		require.True(t, again.Deduplicated)
		require.Equal(t, "one", again.ID)

		// The typed binding gets the holder's handle.
		inst, err := greet.Create(ctx, workflow.CreateOptions[params]{DedupeKey: "order-7"})
		require.NoError(t, err)
		require.Equal(t, "one", inst.ID())

		// A batch: the held key returns the holder, the others are created.
		batch, err := h.Client.CreateBatch(ctx, "greet", []dftype.CreateRequest{
			{ID: "b1", DedupeKey: "order-7"}, {ID: "b2", DedupeKey: "order-8"},
		})
		require.NoError(t, err)
		require.Len(t, batch, 2)
		require.Equal(t, []string{"one", "b2"}, []string{batch[0].ID, batch[1].ID})
		require.Equal(t, []bool{true, false}, []bool{batch[0].Deduplicated, batch[1].Deduplicated})

		// Once the holder ends, the key is free.
		h.RunUntilIdle()
		h.RequireStatus("greet", "one", dftype.StatusComplete)
		fresh, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "three", DedupeKey: "order-7"})
		require.NoError(t, err)
		require.False(t, fresh.Deduplicated)
		require.Equal(t, "three", fresh.ID)
		_, err = h.Client.Restart(ctx, "greet", "one")
		require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)
		require.ErrorContains(t, err, "dedupe key")
		h.RequireStatus("greet", "one", dftype.StatusComplete)

		// Concurrent creates of one key make one instance.
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			ids = map[string]int{}
		)
		for i := range 6 {
			wg.Go(func() {
				info, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: fmt.Sprintf("c%d", i), DedupeKey: "race"})
				if !assertNoError(t, err) {
					return
				}
				mu.Lock()
				ids[info.ID]++
				mu.Unlock()
			})
		}
		wg.Wait()
		require.Len(t, ids, 1, "every create got the same instance: %v", ids)
	})
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func TestNamespaceViewSeesOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "waits", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (json.RawMessage, error) {
			return workflow.WaitForEvent[json.RawMessage](step, "wait", workflow.WaitOptions{Type: "go"})
		})
		ctx := h.Context()
		acme, globex := h.Client.Namespace("acme"), h.Client.Namespace("globex")
		_, err := acme.Create(ctx, "waits", dftype.CreateRequest{ID: "a1"})
		require.NoError(t, err)
		_, err = globex.Create(ctx, "waits", dftype.CreateRequest{ID: "g1"})
		require.NoError(t, err)
		h.RunUntilIdle()
		require.Equal(t, "acme", acme.Scope())
		require.Empty(t, h.Client.Scope())

		// globex cannot see or touch acme's instance: not found, as if it
		// did not exist.
		_, err = globex.Get(ctx, "waits", "a1")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
		for _, f := range []func() error{
			func() error { _, err := globex.Pause(ctx, "waits", "a1"); return err },
			func() error { _, err := globex.Resume(ctx, "waits", "a1"); return err },
			func() error { _, err := globex.Terminate(ctx, "waits", "a1"); return err },
			func() error { _, err := globex.Restart(ctx, "waits", "a1"); return err },
			func() error { return globex.SendEvent(ctx, "waits", "a1", "go", json.RawMessage(`1`)) },
			func() error { _, err := globex.History(ctx, "waits", "a1", client.HistoryParams{}); return err },
		} {
			require.ErrorIs(t, f(), workflow.ErrInstanceNotFound)
		}
		h.RequireStatus("waits", "a1", dftype.StatusWaiting)

		list, err := globex.List(ctx, client.ListParams{WorkflowName: "waits"})
		require.NoError(t, err)
		require.Len(t, list.Instances, 1)
		require.Equal(t, "g1", list.Instances[0].ID)
		_, err = globex.List(ctx, client.ListParams{Namespace: "acme"})
		require.ErrorIs(t, err, workflow.ErrInvalidRequest, "a view lists only its namespace")

		// The unscoped client sees both, and filters on request.
		all, err := h.Client.List(ctx, client.ListParams{})
		require.NoError(t, err)
		require.Len(t, all.Instances, 2)
		only, err := h.Client.List(ctx, client.ListParams{Namespace: "acme"})
		require.NoError(t, err)
		require.Len(t, only.Instances, 1)

		// acme can.
		require.NoError(t, acme.SendEvent(ctx, "waits", "a1", "go", json.RawMessage(`"hi"`)))
		h.RunUntilIdle()
		h.RequireStatus("waits", "a1", dftype.StatusComplete)

		// Ids are unique per workflow across namespaces.
		_, err = globex.Create(ctx, "waits", dftype.CreateRequest{ID: "a1"})
		require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)
	})
}

// TestDedupedCreateKeepsItsDeadline: a create with a dedupe key that
// creates the instance records its deadline, as every create does.
func TestDedupedCreateKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "pay", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "ok", nil
		})
		deadline := h.Clock.Now().Add(time.Hour)
		info, err := h.Client.Create(h.Context(), "pay", dftype.CreateRequest{ID: "a", DedupeKey: "k", Deadline: deadline})
		require.NoError(t, err)
		require.False(t, info.Deduplicated)
		got, err := h.Client.Get(h.Context(), "pay", "a")
		require.NoError(t, err)
		require.NotNil(t, got.DeadlineAt, "the deadline is stored")
		require.True(t, got.DeadlineAt.Equal(deadline.UTC().Truncate(time.Microsecond)), "deadline %s", got.DeadlineAt)
	})
}

// A view lists only the children of its own namespace: a child lives in
// its parent's namespace, but one an older version started in another
// namespace is not the view's to see, in Children nor in Get's children.
func TestNamespaceViewListsOnlyItsChildren(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _ := setup(t, b)
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "p", Namespace: "acme"})
		require.NoError(t, err)
		for i, ns := range []string{"acme", workflow.DefaultNamespace} {
			_, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{
				ID: fmt.Sprintf("child-%s", ns), Namespace: ns,
				Parent: &dftype.ParentRef{WorkflowName: "greet", InstanceID: "p", RunNumber: 1, StepKey: fmt.Sprintf("s%d", i)},
			})
			require.NoError(t, err)
		}
		all, err := h.Client.Children(ctx, "greet", "p")
		require.NoError(t, err)
		require.Len(t, all, 2, "the unscoped client sees every child")

		acme := h.Client.Namespace("acme")
		children, err := acme.Children(ctx, "greet", "p")
		require.NoError(t, err)
		require.Len(t, children, 1)
		require.Equal(t, "child-acme", children[0].ID)
		info, err := acme.Get(ctx, "greet", "p")
		require.NoError(t, err)
		require.Len(t, info.Children, 1)
		require.Equal(t, "child-acme", info.Children[0].ID)
	})
}

// A child create whose parent step has a child already answers that child,
// whatever id it names (a replay after a crash picks a new random id), and
// refuses an id another instance holds.
func TestChildCreateFindsTheStepsChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h, _ := setup(t, b)
		ctx := h.Context()
		_, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "p"})
		require.NoError(t, err)
		parent := &dftype.ParentRef{WorkflowName: "greet", InstanceID: "p", RunNumber: 1, StepKey: "s"}
		first, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "c1", Parent: parent})
		require.NoError(t, err)
		again, err := h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "c2", Parent: parent})
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID, "the step's child, not a second one")
		_, err = h.Client.Get(ctx, "greet", "c2")
		require.ErrorIs(t, err, workflow.ErrInstanceNotFound)

		other := &dftype.ParentRef{WorkflowName: "greet", InstanceID: "p", RunNumber: 1, StepKey: "t"}
		_, err = h.Client.Create(ctx, "greet", dftype.CreateRequest{ID: "p", Parent: other})
		require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists, "an id held by another instance")
		require.ErrorContains(t, err, "is not the child of step")
	})
}

// A view's placement check sees where each create would put its instance,
// the queue the workflow would give it too, and its refusal refuses the
// create (every item of a batch is checked first), writing nothing.
func TestPlacementCheckRefusesBeforeWriting(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		workflow.MustRegister(h.Registry, "pay", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "ok", nil
		},
			workflow.WithQueue("payments"))
		ctx := h.Context()
		errRefused := errors.New("refused")
		var seen []client.Placement
		view := h.Client.Namespace("acme").WithPlacementCheck(func(_ context.Context, p client.Placement) error {
			seen = append(seen, p)
			if p.Queue != p.DefaultQueue || p.Priority > 0 {
				return errRefused
			}
			return nil
		})

		info, err := view.Create(ctx, "pay", dftype.CreateRequest{ID: "a", Priority: -5})
		require.NoError(t, err)
		require.Equal(t, "payments", info.Queue)
		_, err = view.Create(ctx, "pay", dftype.CreateRequest{ID: "b", Queue: "payments"})
		require.NoError(t, err, "naming the workflow's own queue")
		require.Equal(t, []client.Placement{
			{WorkflowName: "pay", Namespace: "acme", Queue: "payments", DefaultQueue: "payments", Priority: -5},
			{WorkflowName: "pay", Namespace: "acme", Queue: "payments", DefaultQueue: "payments"},
		}, seen)

		for _, req := range []dftype.CreateRequest{{ID: "c", Queue: "bulk"}, {ID: "d", Priority: 1}} {
			_, err := view.Create(ctx, "pay", req)
			require.ErrorIs(t, err, errRefused)
			_, err = h.Client.Get(ctx, "pay", req.ID)
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "a refused create writes nothing")
		}
		_, err = view.CreateBatch(ctx, "pay", []dftype.CreateRequest{{ID: "e"}, {ID: "f", Queue: "bulk"}})
		require.ErrorIs(t, err, errRefused)
		for _, id := range []string{"e", "f"} {
			_, err = h.Client.Get(ctx, "pay", id)
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound, "a refused batch writes nothing")
		}
		// Without a check, as the unscoped client: any queue and priority.
		info, err = h.Client.Namespace("acme").Create(ctx, "pay", dftype.CreateRequest{ID: "g", Queue: "bulk", Priority: 1000})
		require.NoError(t, err)
		require.Equal(t, "bulk", info.Queue)
	})
}
