package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// testInvokeChange pins what management changes do to a parent and its
// children: the terminate and restart cascades, and that no order of a
// child's end and the changes of it and its parent can deadlock.
func testInvokeChange(t *testing.T, newStore func(t *testing.T) db.Store) {
	// createChild creates id as the child of step key of parent's run 1.
	createChild := func(t *testing.T, b *testBundle, parent, id, key string, policy db.ParentPolicy) {
		t.Helper()
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: id, Now: new(b.now),
			Parent: &db.ParentLink{WorkflowName: workflowName, InstanceID: parent, RunNumber: 1, StepKey: key, Policy: policy},
		})
		require.NoError(t, err)
	}

	// A child's terminate locks the child and sends its end to the parent;
	// its last checkpoint locks the parent, then the child; the parent's
	// terminate and restart lock the parent, then the child. Raced, none
	// fails but for the documented conditions (a lost lease, an ended
	// instance), and the child always ends.
	t.Run("ChildEndRacesChangesWithoutDeadlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		const rounds = 25
		for i := range rounds {
			p, c := fmt.Sprintf("p%02d", i), fmt.Sprintf("c%02d", i)
			b.create(t, p)
			createChild(t, b, p, c, "sum", "")
			// The parent runs (the child's end is buffered for it), and so
			// does the child.
			var childTask *db.Task
			for _, task := range b.claimAt(t, b.now, 100) {
				if task.InstanceID == c {
					childTask = task
				}
			}
			require.NotNil(t, childTask, "round %d: the child is claimed", i)

			calls := []func() error{
				func() error {
					_, err := b.store.InstanceTerminate(b.ctx, b.change(c))
					return err
				},
				func() error {
					cp := b.checkpoint(childTask)
					cp.Outcome, cp.Output = db.OutcomeComplete, json.RawMessage(`3`)
					cp.NotifyParent = &db.ParentNotify{
						ChildWorkflowName: workflowName, ChildInstanceID: c,
						WorkflowName: workflowName, InstanceID: p, RunNumber: 1, StepKey: "sum",
						Payload: json.RawMessage(`{"status":"complete","output":3}`),
					}
					_, err := b.store.Checkpoint(b.ctx, cp)
					return err
				},
				func() error {
					_, err := b.store.InstanceTerminate(b.ctx, b.change(p))
					return err
				},
				func() error {
					_, err := b.store.InstanceRestart(b.ctx, b.change(p))
					return err
				},
			}
			errs := make([]error, len(calls))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for j, call := range calls {
				wg.Go(func() {
					<-start
					errs[j] = call()
				})
			}
			close(start)
			wg.Wait()
			for j, err := range errs {
				if err != nil && !errors.Is(err, db.ErrLeaseLost) && !errors.Is(err, db.ErrTerminal) {
					t.Fatalf("round %d, call %d: %v", i, j, err)
				}
			}
			require.True(t, b.get(t, c).Status.Terminal(), "round %d: the child ended", i)
			parent := b.get(t, p)
			require.Contains(t, []dftype.InstanceStatus{dftype.StatusTerminated, dftype.StatusQueued}, parent.Status, "round %d", i)
			require.Equal(t, 2, parent.RunNumber, "round %d: restarted", i)
		}
	})

	t.Run("RestartTerminatesChildrenOfEarlierRuns", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		parentTask := b.claim(t, "p")
		createChild(t, b, "p", "kept", "a", "")
		createChild(t, b, "p", "left", "b", db.ParentPolicyAbandon)
		createChild(t, b, "p", "done", "c", "")
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "grand", Now: new(b.now),
			Parent: &db.ParentLink{WorkflowName: workflowName, InstanceID: "kept", RunNumber: 1, StepKey: "x"},
		})
		require.NoError(t, err)
		done := b.claimAt(t, b.now, 100)
		require.ElementsMatch(t, []string{"done", "grand", "kept", "left"}, taskIDs(done))
		for _, task := range done {
			if task.InstanceID == "done" {
				cp := b.checkpoint(task)
				cp.Outcome, cp.Output = db.OutcomeComplete, json.RawMessage(`1`)
				_, err := b.store.Checkpoint(b.ctx, cp)
				require.NoError(t, err)
			}
		}

		inst, err := b.store.InstanceRestart(b.ctx, b.change("p"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, inst.Status)
		require.Equal(t, 2, inst.RunNumber)
		for _, id := range []string{"kept", "grand"} {
			require.Equal(t, dftype.StatusTerminated, b.get(t, id).Status, "%s: the old run's child (and its child) is terminated", id)
			_, err := b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
			require.ErrorIs(t, err, db.ErrNotFound, "%s: a terminated child's task is deleted", id)
		}
		require.Equal(t, dftype.StatusRunning, b.get(t, "left").Status, "an abandoned child keeps running")
		require.Equal(t, dftype.StatusComplete, b.get(t, "done").Status, "an ended child is left alone")
		require.Empty(t, b.events(t, "p", 1), "the old run is sent no end")
		require.Empty(t, b.events(t, "p", 2), "the new run is sent no end")
		_, err = b.store.Checkpoint(b.ctx, b.checkpoint(parentTask))
		require.ErrorIs(t, err, db.ErrLeaseLost, "the old run's runner is fenced out")

		// A restart of the new run, whose children have ended, changes none.
		_, err = b.store.InstanceRestart(b.ctx, b.change("p"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, b.get(t, "left").Status)
		require.Equal(t, dftype.StatusComplete, b.get(t, "done").Status)
	})
}
