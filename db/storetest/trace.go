package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// traceContext is an encoded trace context as the engine stores one: opaque
// to the store, which must round-trip it byte for byte.
const traceContext = `{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"vendor=x"}`

func testTrace(t *testing.T, newStore func(t *testing.T) db.Store) {
	// requireCarried checks that every read of the instance carries tc: a
	// get, the run a resume loads, and the list.
	requireCarried := func(t *testing.T, b *testBundle, id, tc string) {
		t.Helper()
		require.Equal(t, tc, b.get(t, id).TraceContext, "InstanceGet")
		state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
		require.NoError(t, err)
		require.Equal(t, tc, state.Instance.TraceContext, "RunLoad")
	}

	t.Run("RoundTrips", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "traced", Now: new(b.now), TraceContext: traceContext,
		})
		require.NoError(t, err)
		require.Equal(t, traceContext, res.Instance.TraceContext, "the create's result carries it")
		plain := b.create(t, "plain")
		require.Empty(t, plain.TraceContext, "a create without one stores none")
		requireCarried(t, b, "traced", traceContext)
		requireCarried(t, b, "plain", "")

		// The claim of a run that never started returns it with the run.
		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{workflowName}, Max: 10, Now: b.now, LockedUntil: b.at(lease),
		})
		require.NoError(t, err)
		require.Len(t, claims, 2)
		for _, c := range claims {
			requireFreshRun(t, b, &c)
			if c.FreshRun != nil && c.Task.InstanceID == "traced" {
				require.Equal(t, traceContext, c.FreshRun.TraceContext, "the claim's fresh run")
			}
		}
		task, other := claims[0].Task, claims[1].Task
		if task.InstanceID != "traced" {
			task, other = other, task
		}
		done := b.checkpoint(other)
		done.Outcome = db.OutcomeComplete
		_, err = b.store.Checkpoint(b.ctx, done)
		require.NoError(t, err)
		// A suspend and a later resume keep it: it never changes.
		b.suspend(t, task, false, b.at(3*time.Hour), db.TaskKindWake)
		resumed := b.claimIDAt(t, "traced", b.at(3*time.Hour))
		require.Equal(t, "traced", resumed.InstanceID)
		requireCarried(t, b, "traced", traceContext)
		// A restart keeps it too: the new run links to the same creator.
		_, err = b.store.InstanceRestart(b.ctx, b.change("traced"))
		require.NoError(t, err)
		requireCarried(t, b, "traced", traceContext)
	})

	t.Run("Leased", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "eager", Now: new(b.now), Lease: b.eagerLease(0), TraceContext: traceContext,
		})
		require.NoError(t, err)
		require.NotNil(t, res.LeasedTask)
		require.Equal(t, traceContext, res.Instance.TraceContext)
		requireCarried(t, b, "eager", traceContext)
	})

	t.Run("DedupeAndLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "d1", Now: new(b.now), DedupeKey: "k", TraceContext: traceContext,
		})
		require.NoError(t, err)
		requireCarried(t, b, "d1", traceContext)
		// A deduplicated create stores nothing: the holder keeps its own.
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "d2", Now: new(b.now), DedupeKey: "k", TraceContext: `{"traceparent":"other"}`,
		})
		require.NoError(t, err)
		require.True(t, res.Deduplicated)
		requireCarried(t, b, "d1", traceContext)

		limits := []db.LimitSpec{{Scope: db.WorkflowScope(workflowName), Define: true, MaxRunning: 1}}
		res, err = b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "l1", Now: new(b.now), Limits: limits, TraceContext: traceContext,
		})
		require.NoError(t, err)
		require.Equal(t, traceContext, res.Instance.TraceContext)
		requireCarried(t, b, "l1", traceContext)
	})

	t.Run("Batch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "taken")
		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), Lease: b.eagerLease(1),
			Instances: []db.InstanceCreateItem{
				{ID: "b1", TraceContext: traceContext},
				{ID: "taken", TraceContext: traceContext},
				{ID: "b2", TraceContext: traceContext},
				{ID: "b3"},
			},
		})
		require.NoError(t, err)
		require.Len(t, created, 3)
		for _, c := range created {
			want := traceContext
			if c.Instance.ID == "b3" {
				want = ""
			}
			require.Equal(t, want, c.Instance.TraceContext, c.Instance.ID)
			requireCarried(t, b, c.Instance.ID, want)
		}
		requireCarried(t, b, "taken", "")

		limits := []db.LimitSpec{{Scope: db.WorkflowScope(workflowName), Define: true, MaxRunning: 1}}
		created, err = b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now),
			Instances: []db.InstanceCreateItem{
				{ID: "m1", TraceContext: traceContext, Limits: limits},
				{ID: "m2", TraceContext: traceContext, Limits: limits},
			},
		})
		require.NoError(t, err)
		require.Len(t, created, 2)
		requireCarried(t, b, "m1", traceContext)
		requireCarried(t, b, "m2", traceContext)
	})
}
