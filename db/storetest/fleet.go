package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// createPlaced creates an instance of workflowName at now with a namespace,
// queue, priority and dedupe key.
func (b *testBundle) createPlaced(t *testing.T, p db.InstanceCreateParams) db.CreateResult {
	t.Helper()
	if p.WorkflowName == "" {
		p.WorkflowName = workflowName
	}
	if p.Now == nil {
		p.Now = new(b.now)
	}
	if p.Params == nil {
		p.Params = json.RawMessage(`{}`)
	}
	res, err := b.store.InstanceCreate(b.ctx, &p)
	require.NoError(t, err)
	return res
}

// claimOn claims at the suite's now on the queues.
func (b *testBundle) claimOn(t *testing.T, max int, queues ...string) []*db.Task {
	t.Helper()
	claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
		Owner: owner, WorkflowNames: []string{workflowName}, Queues: queues,
		Max: max, Now: b.now, LockedUntil: b.at(lease),
	})
	require.NoError(t, err)
	return claimedTasks(t, b, claims)
}

func testFleet(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("CreateRecordsPlacement", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res := b.createPlaced(t, db.InstanceCreateParams{
			ID: "a", Namespace: "acme", Queue: "payments", Priority: 7, DedupeKey: "order-1",
		})
		require.False(t, res.Deduplicated)
		for _, inst := range []*db.Instance{res.Instance, b.get(t, "a")} {
			require.Equal(t, "acme", inst.Namespace)
			require.Equal(t, "payments", inst.Queue)
			require.Equal(t, 7, inst.Priority)
			require.Equal(t, "order-1", inst.DedupeKey)
		}
		task := b.task(t, "a")
		require.Equal(t, "payments", task.Queue)
		require.Equal(t, 7, task.InstancePriority)

		// Without placement: the default namespace and queue, priority 0.
		b.create(t, "plain")
		plain := b.get(t, "plain")
		require.Equal(t, workflow.DefaultNamespace, plain.Namespace)
		require.Equal(t, workflow.DefaultQueue, plain.Queue)
		require.Zero(t, plain.Priority)
		require.Empty(t, plain.DedupeKey)
	})

	t.Run("ClaimOrdersByPriorityThenToday", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// Created oldest first within each priority, in a mixed order.
		b.createPlaced(t, db.InstanceCreateParams{ID: "low", Priority: -5, Now: new(b.at(-10 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "high-new", Priority: 10, Now: new(b.at(-time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "zero-old", Now: new(b.at(-8 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "high-old", Priority: 10, Now: new(b.at(-2 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "zero-new", Now: new(b.at(-3 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "max", Priority: workflow.MaxPriority, Now: new(b.at(-time.Second))})
		// A resuming kind of priority 0, due later than the runs of its
		// priority, goes first among them (today's order); a resume does not
		// lose the instance's priority.
		b.createPlaced(t, db.InstanceCreateParams{ID: "zero-resumed", Now: new(b.at(-time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "high-resumed", Priority: 10, Now: new(b.at(-time.Second))})
		for _, id := range []string{"zero-resumed", "high-resumed"} {
			_, err := b.store.InstancePause(b.ctx, b.change(id))
			require.NoError(t, err)
			_, err = b.store.InstanceResume(b.ctx, b.change(id))
			require.NoError(t, err)
			require.Equal(t, db.TaskKindResume, b.task(t, id).Kind)
		}
		require.Equal(t, 10, b.task(t, "high-resumed").InstancePriority)

		require.Equal(t, []string{"max", "high-resumed"}, taskIDs(b.claimAt(t, b.now, 2)))
		require.Equal(t, []string{"high-old", "high-new", "zero-resumed"}, taskIDs(b.claimAt(t, b.now, 3)))
		require.Equal(t, []string{"zero-old", "zero-new", "low"}, taskIDs(b.claimAt(t, b.now, 10)))
	})

	t.Run("PriorityOutlivesSuspendAndRestart", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createPlaced(t, db.InstanceCreateParams{ID: "p", Priority: 3, Queue: "q"})
		task := b.claimOn(t, 1, "q")[0]
		b.suspend(t, task, false, b.now, db.TaskKindWake)
		require.Equal(t, 3, b.task(t, "p").InstancePriority)
		require.Equal(t, "q", b.task(t, "p").Queue)
		task = b.claimOn(t, 1, "q")[0]
		done := b.checkpoint(task)
		done.Outcome = db.OutcomeComplete
		done.Output = json.RawMessage(`1`)
		_, err := b.store.Checkpoint(b.ctx, done)
		require.NoError(t, err)
		// The run ended and its task was deleted; a restart inserts one with
		// the instance's queue and priority.
		_, err = b.store.InstanceRestart(b.ctx, b.change("p"))
		require.NoError(t, err)
		require.Equal(t, 3, b.task(t, "p").InstancePriority)
		require.Equal(t, "q", b.task(t, "p").Queue)
		require.Empty(t, b.claimOn(t, 10, "default"))
		require.Equal(t, []string{"p"}, taskIDs(b.claimOn(t, 10, "q")))
	})

	t.Run("ClaimServesOnlyItsQueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createPlaced(t, db.InstanceCreateParams{ID: "a1", Queue: "a", Now: new(b.at(-2 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "b1", Queue: "b", Priority: 100, Now: new(b.at(-3 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "d1", Now: new(b.at(-time.Second))})

		next, err := b.store.TaskNextRunAt(b.ctx, &db.TaskNextRunAtParams{WorkflowNames: []string{workflowName}, Queues: []string{"a"}})
		require.NoError(t, err)
		requireTimePtr(t, b.at(-2*time.Second), next, "only queue a's task counts")
		next, err = b.store.TaskNextRunAt(b.ctx, &db.TaskNextRunAtParams{WorkflowNames: []string{workflowName}, Queues: []string{"nobody"}})
		require.NoError(t, err)
		require.Nil(t, next)

		require.Empty(t, b.claimOn(t, 10, "nobody"))
		require.Equal(t, []string{"a1"}, taskIDs(b.claimOn(t, 10, "a")), "queue b's task of higher priority is not claimed")
		require.Equal(t, []string{"b1", "d1"}, taskIDs(b.claimOn(t, 10, "b", "default")))

		// An expired lease is reclaimed only by a runner of its queue.
		later := b.at(2 * lease)
		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: "runner-2", WorkflowNames: []string{workflowName}, Queues: []string{"c"}, Max: 10, Now: later, LockedUntil: later.Add(lease),
		})
		require.NoError(t, err)
		require.Empty(t, claims)
		claims, err = b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: "runner-2", WorkflowNames: []string{workflowName}, Queues: []string{"a"}, Max: 10, Now: later, LockedUntil: later.Add(lease),
		})
		require.NoError(t, err)
		require.Equal(t, []string{"a1"}, taskIDs(taskList(claims)))
	})

	t.Run("SendLeasesOnlyATaskOfTheLeaseQueues", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"mine", "theirs"} {
			queue := "q-" + id
			b.createPlaced(t, db.InstanceCreateParams{ID: id, Queue: queue})
			task := b.claimOn(t, 1, queue)[0]
			b.suspend(t, task, false, b.at(time.Hour), db.TaskKindWake, "go")
		}
		lease := &db.CreateLease{Owner: "runner-9", LockedUntil: b.at(lease), Max: 1, Queues: []string{"q-mine"}}
		for _, tc := range []struct {
			id     string
			leased bool
		}{{"mine", true}, {"theirs", false}} {
			res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
				WorkflowName: workflowName, InstanceID: tc.id, Type: "go", Payload: json.RawMessage(`1`),
				Now: new(b.now), Lease: lease,
			})
			require.NoError(t, err)
			require.True(t, res.Woken, tc.id)
			task := b.task(t, tc.id)
			if tc.leased {
				require.NotNil(t, res.LeasedTask)
				require.Equal(t, "runner-9", task.LockOwner)
				require.Equal(t, db.TaskStatusProcessing, task.Status)
				continue
			}
			require.Nil(t, res.LeasedTask, "a task of another queue is not leased")
			require.Equal(t, db.TaskStatusPending, task.Status)
			requireTime(t, b.now, task.RunAt, "it is due for a claim instead")
			require.Equal(t, dftype.StatusWaiting, b.get(t, tc.id).Status)
		}
	})

	t.Run("DedupeReturnsTheActiveHolder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		first := b.createPlaced(t, db.InstanceCreateParams{ID: "first", DedupeKey: "k"})
		require.False(t, first.Deduplicated)

		again := b.createPlaced(t, db.InstanceCreateParams{ID: "second", DedupeKey: "k", Params: json.RawMessage(`{"x":1}`)})
		require.True(t, again.Deduplicated)
		require.Equal(t, b.get(t, "first"), again.Instance)
		_, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "second"})
		require.ErrorIs(t, err, db.ErrNotFound, "nothing was created")
		_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "second"})
		require.ErrorIs(t, err, db.ErrNotFound)

		// The key is per namespace and workflow.
		other := b.createPlaced(t, db.InstanceCreateParams{ID: "other-ns", DedupeKey: "k", Namespace: "acme"})
		require.False(t, other.Deduplicated)
		otherWF := b.createPlaced(t, db.InstanceCreateParams{WorkflowName: otherName, ID: "other-wf", DedupeKey: "k"})
		require.False(t, otherWF.Deduplicated)

		// A terminal instance frees its key.
		_, err = b.store.InstanceTerminate(b.ctx, b.change("first"))
		require.NoError(t, err)
		third := b.createPlaced(t, db.InstanceCreateParams{ID: "third", DedupeKey: "k"})
		require.False(t, third.Deduplicated)
		require.Equal(t, "third", third.Instance.ID)

		// Restarting the terminated holder while another holds its key is
		// refused, and changes nothing.
		_, err = b.store.InstanceRestart(b.ctx, b.change("first"))
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		require.Equal(t, dftype.StatusTerminated, b.get(t, "first").Status)

		// An id that exists is still ErrAlreadyExists with a free key.
		_, err = b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: "third", DedupeKey: "fresh", Now: new(b.now)})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
	})

	t.Run("DedupeInABatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createPlaced(t, db.InstanceCreateParams{ID: "held", DedupeKey: "k1"})
		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now),
			Instances: []db.InstanceCreateItem{
				{ID: "n1", DedupeKey: "k1"}, // held by "held"
				{ID: "n2", DedupeKey: "k2", Queue: "bq", Priority: 2},
				{ID: "n3", DedupeKey: "k2"}, // held by n2, of this batch
				{ID: "n4", Queue: "bq", Priority: 2},
				{ID: "n5", Queue: "other", Priority: -1},
			},
		})
		require.NoError(t, err)
		var got []string
		for _, c := range created {
			got = append(got, fmt.Sprintf("%s/%v", c.Instance.ID, c.Deduplicated))
		}
		require.Equal(t, []string{"held/true", "n2/false", "n2/true", "n4/false", "n5/false"}, got)
		for _, id := range []string{"n1", "n3"} {
			_, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
			require.ErrorIs(t, err, db.ErrNotFound, id)
		}
		n2 := b.get(t, "n2")
		require.Equal(t, "bq", n2.Queue)
		require.Equal(t, 2, n2.Priority)
		require.Equal(t, 2, b.task(t, "n4").InstancePriority)
		require.Equal(t, []string{"n2", "n4"}, taskIDs(b.claimOn(t, 10, "bq")))
		n5 := b.task(t, "n5")
		require.Equal(t, "other", n5.Queue)
		require.Equal(t, -1, n5.InstancePriority)
	})

	t.Run("ConcurrentCreatesOfOneKeyMakeOneInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		const creators = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created []string
			holders = map[string]bool{}
			errs    = make(chan error, creators)
		)
		for i := range creators {
			wg.Go(func() {
				res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
					WorkflowName: workflowName, ID: fmt.Sprintf("c%d", i), DedupeKey: "same",
					Params: json.RawMessage(`{}`), Now: new(b.now),
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				holders[res.Instance.ID] = true
				if !res.Deduplicated {
					created = append(created, res.Instance.ID)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Len(t, created, 1, "one create made the instance")
		require.Equal(t, map[string]bool{created[0]: true}, holders, "every other create got it back")
		list, err := b.store.InstanceList(b.ctx, &db.InstanceListParams{WorkflowName: workflowName})
		require.NoError(t, err)
		require.Len(t, list, 1)
	})

	t.Run("NamespaceScopesLookupsAndChanges", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createPlaced(t, db.InstanceCreateParams{ID: "a", Namespace: "acme"})
		task := b.claimOn(t, 1)[0]
		b.suspend(t, task, false, b.at(time.Hour), db.TaskKindWake, "go")
		before := b.get(t, "a")

		// Another namespace does not find it, through any call.
		_, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a", Namespace: "globex"})
		require.ErrorIs(t, err, db.ErrNotFound)
		for name, change := range map[string]func(*db.InstanceChangeParams) (*db.Instance, error){
			"pause":     func(p *db.InstanceChangeParams) (*db.Instance, error) { return b.store.InstancePause(b.ctx, p) },
			"resume":    func(p *db.InstanceChangeParams) (*db.Instance, error) { return b.store.InstanceResume(b.ctx, p) },
			"terminate": func(p *db.InstanceChangeParams) (*db.Instance, error) { return b.store.InstanceTerminate(b.ctx, p) },
			"restart":   func(p *db.InstanceChangeParams) (*db.Instance, error) { return b.store.InstanceRestart(b.ctx, p) },
		} {
			p := b.change("a")
			p.Namespace = "globex"
			_, err := change(p)
			require.ErrorIs(t, err, db.ErrNotFound, name)
		}
		_, err = b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "a", Type: "go", Payload: json.RawMessage(`1`),
			Now: new(b.at(time.Second)), Namespace: "globex",
		})
		require.ErrorIs(t, err, db.ErrNotFound)
		require.Equal(t, before, b.get(t, "a"), "nothing changed")
		require.Empty(t, b.events(t, "a", 1), "no event was buffered")

		// Its own namespace, and no namespace (the engine's own callers), do.
		got, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "a", Namespace: "acme"})
		require.NoError(t, err)
		require.Equal(t, before, got)
		res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
			WorkflowName: workflowName, InstanceID: "a", Type: "go", Payload: json.RawMessage(`1`),
			Now: new(b.now), Namespace: "acme",
		})
		require.NoError(t, err)
		require.True(t, res.Woken)
		p := b.change("a")
		p.Namespace = "acme"
		inst, err := b.store.InstanceTerminate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusTerminated, inst.Status)

		// Ids are unique per workflow across namespaces.
		_, err = b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{WorkflowName: workflowName, ID: "a", Namespace: "globex", Now: new(b.now)})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
	})

	t.Run("ListFiltersByNamespaceAndQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createPlaced(t, db.InstanceCreateParams{ID: "a-x", Namespace: "a", Queue: "x", Now: new(b.at(-3 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "a-y", Namespace: "a", Queue: "y", Now: new(b.at(-2 * time.Second))})
		b.createPlaced(t, db.InstanceCreateParams{ID: "b-x", Namespace: "b", Queue: "x", Now: new(b.at(-time.Second))})
		ids := func(p db.InstanceListParams) []string {
			t.Helper()
			list, err := b.store.InstanceList(b.ctx, &p)
			require.NoError(t, err)
			out := []string{}
			for _, i := range list {
				out = append(out, i.ID)
			}
			return out
		}
		require.Equal(t, []string{"b-x", "a-y", "a-x"}, ids(db.InstanceListParams{}))
		require.Equal(t, []string{"a-y", "a-x"}, ids(db.InstanceListParams{Namespace: "a"}))
		require.Equal(t, []string{"a-y", "a-x"}, ids(db.InstanceListParams{Namespace: "a", WorkflowName: workflowName}))
		require.Equal(t, []string{"b-x", "a-x"}, ids(db.InstanceListParams{Queue: "x"}))
		require.Equal(t, []string{"a-x"}, ids(db.InstanceListParams{Namespace: "a", Queue: "x", WorkflowName: workflowName}))
		require.Empty(t, ids(db.InstanceListParams{Namespace: "c"}))
	})

	t.Run("PriorityOutOfRangeIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, p := range []int{workflow.MaxPriority + 1, workflow.MinPriority - 1} {
			_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
				WorkflowName: workflowName, ID: "bad", Priority: p, Now: new(b.now),
			})
			require.True(t, errors.Is(err, db.ErrInvalidData), "priority %d: %v", p, err)
			_, err = b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "bad"})
			require.ErrorIs(t, err, db.ErrNotFound, "nothing was written")
			_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "bad"})
			require.ErrorIs(t, err, db.ErrNotFound, "nothing was written")
		}
	})
}
