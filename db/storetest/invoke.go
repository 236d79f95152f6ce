package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

func testInvoke(t *testing.T, newStore func(t *testing.T) db.Store) {
	const childType = "@invoke/1/sum"
	// createChildOf creates id as the child of step key of parent, run.
	createChildOf := func(t *testing.T, b *testBundle, parent, id string, run int, key string, policy db.ParentPolicy) *db.Instance {
		t.Helper()
		res, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: id, Now: new(b.now),
			Parent: &db.ParentLink{WorkflowName: workflowName, InstanceID: parent, RunNumber: run, StepKey: key, Policy: policy},
		})
		require.NoError(t, err)
		return res.Instance
	}
	// createChild creates id as the child of step "sum" of parent, run 1.
	createChild := func(t *testing.T, b *testBundle, parent, id string, policy db.ParentPolicy) *db.Instance {
		t.Helper()
		return createChildOf(t, b, parent, id, 1, "sum", policy)
	}
	// waitForChild suspends the claimed parent on its invoke step "sum".
	waitForChild := func(t *testing.T, b *testBundle, task *db.Task) *db.CheckpointResult {
		t.Helper()
		p := b.checkpoint(task)
		p.Steps = []db.StepWrite{{
			Key: "sum", Type: db.StepTypeInvoke, Status: db.StepStatusWaiting,
			WaitEventType: childType, WakeAt: new(b.at(24 * time.Hour)),
		}}
		p.Outcome, p.NextRunAt, p.NextKind, p.WaitEventTypes = db.OutcomeSuspend, b.at(24*time.Hour), db.TaskKindWake, []string{childType}
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		return res
	}
	// endChild completes the claimed child, delivering its end to the parent.
	endChild := func(t *testing.T, b *testBundle, task *db.Task, parent string) *db.CheckpointResult {
		t.Helper()
		p := b.checkpoint(task)
		p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`3`)
		p.NotifyParent = &db.ParentNotify{
			ChildWorkflowName: workflowName, ChildInstanceID: task.InstanceID,
			WorkflowName: workflowName, InstanceID: parent, RunNumber: 1, StepKey: "sum",
			Payload: json.RawMessage(`{"status":"complete","output":3}`),
		}
		require.False(t, p.Batchable(), "a child's end commits on its own")
		res, err := b.store.Checkpoint(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, res.Status)
		return res
	}

	t.Run("ParentLinkRecorded", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		child := createChild(t, b, "p", "c", "")
		want := &db.ParentLink{WorkflowName: workflowName, InstanceID: "p", RunNumber: 1, StepKey: "sum", Policy: db.ParentPolicyTerminate}
		require.Equal(t, want, child.Parent, "the default policy is terminate")
		require.Equal(t, want, b.get(t, "c").Parent)
		require.Nil(t, b.get(t, "p").Parent)
		createChildOf(t, b, "p", "d", 1, "other", db.ParentPolicyAbandon)
		children, err := b.store.InstanceChildren(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "p"})
		require.NoError(t, err)
		require.Len(t, children, 2)
		require.Equal(t, "c", children[0].ID)
		require.Equal(t, db.ParentPolicyAbandon, children[1].Parent.Policy)
		none, err := b.store.InstanceChildren(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "c"})
		require.NoError(t, err)
		require.Empty(t, none)
		_, err = b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "c", Now: new(b.now),
			Parent: &db.ParentLink{WorkflowName: workflowName, InstanceID: "p", RunNumber: 1, StepKey: "sum"},
		})
		require.ErrorIs(t, err, db.ErrAlreadyExists, "the same id twice is refused; the caller compares the links")
	})

	// A step starts at most one child per run, whatever id a second create
	// names and whichever way the create goes (queued, leased for an eager
	// start, limited): the second changes nothing, and InstanceChildOf
	// finds the first. This is what makes the start of a child exactly-once
	// with random ids.
	t.Run("OneChildPerStepAndRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		first := createChild(t, b, "p", "c", "")
		link := &db.ParentLink{WorkflowName: workflowName, InstanceID: "p", RunNumber: 1, StepKey: "sum"}
		for name, p := range map[string]*db.InstanceCreateParams{
			"queued": {WorkflowName: workflowName, ID: "c2", Now: new(b.now), Parent: link},
			"leased": {WorkflowName: workflowName, ID: "c3", Now: new(b.now), Parent: link,
				Lease: &db.CreateLease{Owner: "eager", LockedUntil: b.at(lease)}},
			"limited": {WorkflowName: workflowName, ID: "c4", Now: new(b.now), Parent: link,
				Limits: []db.LimitSpec{{Scope: "workflow:" + workflowName, Define: true, MaxRunning: 5}}},
			"another workflow": {WorkflowName: "shipping", ID: "c5", Now: new(b.now), Parent: link},
		} {
			_, err := b.store.InstanceCreate(b.ctx, p)
			require.ErrorIs(t, err, db.ErrAlreadyExists, name)
			_, err = b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.ID})
			require.ErrorIs(t, err, db.ErrNotFound, "%s: the refused create wrote no instance", name)
			_, err = b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: p.WorkflowName, ID: p.ID})
			require.ErrorIs(t, err, db.ErrNotFound, "%s: and no task", name)
		}
		got, err := b.store.InstanceChildOf(b.ctx, link)
		require.NoError(t, err)
		require.Equal(t, first.ID, got.ID)
		require.Equal(t, first.Parent, got.Parent)

		// Another run or another step of the same parent has a child of
		// its own.
		createChildOf(t, b, "p", "r2", 2, "sum", "")
		createChildOf(t, b, "p", "s2", 1, "other", "")
		for _, c := range []struct {
			run  int
			key  string
			want string
		}{{1, "sum", "c"}, {2, "sum", "r2"}, {1, "other", "s2"}} {
			got, err := b.store.InstanceChildOf(b.ctx, &db.ParentLink{WorkflowName: workflowName, InstanceID: "p", RunNumber: c.run, StepKey: c.key})
			require.NoError(t, err)
			require.Equal(t, c.want, got.ID)
		}
		for _, l := range []*db.ParentLink{
			{WorkflowName: workflowName, InstanceID: "p", RunNumber: 3, StepKey: "sum"},
			{WorkflowName: workflowName, InstanceID: "p", RunNumber: 1, StepKey: "none"},
			{WorkflowName: "shipping", InstanceID: "p", RunNumber: 1, StepKey: "sum"},
		} {
			_, err := b.store.InstanceChildOf(b.ctx, l)
			require.ErrorIs(t, err, db.ErrNotFound, "%+v", l)
		}
	})

	t.Run("ChildEndWakesWaitingParentInItsCheckpoint", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		parentTask := b.claim(t, "p")
		createChild(t, b, "p", "c", "")
		res := waitForChild(t, b, parentTask)
		require.False(t, res.Due)
		childTask := b.claim(t, "c")
		end := endChild(t, b, childTask, "p")
		require.True(t, end.ParentWoken, "the parent's task was made due")

		task := b.task(t, "p")
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.False(t, task.RunAt.After(b.now), "due now")
		require.Equal(t, db.TaskKindResume, task.Kind)
		steps := b.steps(t, "p", 1)
		require.Len(t, steps, 1)
		require.Equal(t, db.StepStatusComplete, steps[0].Status, "the invoke step got the child's end in the child's transaction")
		require.Equal(t, db.StepTypeInvoke, steps[0].Type, "the step keeps its type")
		var ev workflow.ReceivedEvent
		require.NoError(t, json.Unmarshal(steps[0].Result, &ev))
		requireJSON(t, `{"status":"complete","output":3}`, ev.Payload)
	})

	t.Run("ChildEndGoesOnlyToTheStepItsParentColumnsName", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		parentTask := b.claim(t, "p")
		createChild(t, b, "p", "c", "")
		waitForChild(t, b, parentTask)
		// A notify naming p's step from an instance that is not its child
		// (a plain create, whatever its metadata says), or from the child
		// but naming another run or step, delivers nothing; the ending
		// checkpoint commits all the same.
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "f", Now: new(b.now),
			Metadata: json.RawMessage(`{"parent":{"workflowName":"billing","instanceId":"p","runNumber":1,"step":"sum","depth":1}}`),
		})
		require.NoError(t, err)
		tasks := b.claimAt(t, b.now, 100)
		require.ElementsMatch(t, []string{"c", "f"}, taskIDs(tasks))
		forged := func(task *db.Task, run int, step string) *db.CheckpointParams {
			p := b.checkpoint(task)
			p.Outcome, p.Output = db.OutcomeComplete, json.RawMessage(`666`)
			p.NotifyParent = &db.ParentNotify{
				ChildWorkflowName: workflowName, ChildInstanceID: task.InstanceID,
				WorkflowName: workflowName, InstanceID: "p", RunNumber: run, StepKey: step,
				Payload: json.RawMessage(`{"status":"complete","output":666}`),
			}
			return p
		}
		byID := map[string]*db.Task{tasks[0].InstanceID: tasks[0], tasks[1].InstanceID: tasks[1]}
		res, err := b.store.Checkpoint(b.ctx, forged(byID["f"], 1, "sum"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, res.Status, "the forger's end commits")
		require.False(t, res.ParentWoken)
		require.Equal(t, dftype.StatusComplete, b.get(t, "f").Status)
		require.Empty(t, b.events(t, "p", 1), "nothing reached the parent from a non-child")
		require.Equal(t, db.StepStatusWaiting, b.steps(t, "p", 1)[0].Status)
		require.Equal(t, db.TaskStatusPending, b.task(t, "p").Status)
		require.True(t, b.task(t, "p").RunAt.After(b.now), "the parent was not woken")

		// The real child, naming another step or run of its parent.
		res, err = b.store.Checkpoint(b.ctx, forged(byID["c"], 1, "other"))
		require.NoError(t, err)
		require.False(t, res.ParentWoken)
		require.Equal(t, dftype.StatusComplete, b.get(t, "c").Status)
		createChildOf(t, b, "p", "d", 1, "other", "")
		res, err = b.store.Checkpoint(b.ctx, forged(b.claim(t, "d"), 2, "other"))
		require.NoError(t, err)
		require.False(t, res.ParentWoken)
		require.Equal(t, dftype.StatusComplete, b.get(t, "d").Status)
		require.Empty(t, b.events(t, "p", 1), "nothing reached the parent from a child naming another step")
		require.Equal(t, db.StepStatusWaiting, b.steps(t, "p", 1)[0].Status)
	})

	t.Run("ClaimAndRunLoadCarryTheParentLink", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		b.claim(t, "p")
		createChild(t, b, "p", "c", db.ParentPolicyAbandon)
		want := &db.ParentLink{WorkflowName: workflowName, InstanceID: "p", RunNumber: 1, StepKey: "sum", Policy: db.ParentPolicyAbandon}
		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: owner, WorkflowNames: []string{workflowName}, Max: 10, Now: b.now, LockedUntil: b.now.Add(lease),
		})
		require.NoError(t, err)
		require.Len(t, claims, 1)
		require.NotNil(t, claims[0].FreshRun, "a child that never ran comes with its instance")
		require.Equal(t, want, claims[0].FreshRun.Parent, "with its parent link: the runner delivers its end there")
		state, err := b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "c"})
		require.NoError(t, err)
		require.Equal(t, want, state.Instance.Parent)
		state, err = b.store.RunLoad(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: "p"})
		require.NoError(t, err)
		require.Nil(t, state.Instance.Parent)
	})

	t.Run("DepthCountsTheParentChain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		createChild(t, b, "p", "c", "")
		createChild(t, b, "c", "g", "")
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "x", Now: new(b.now),
			Metadata: json.RawMessage(`{"parent":{"workflowName":"billing","instanceId":"g","runNumber":1,"step":"sum","depth":1}}`),
		})
		require.NoError(t, err)
		depth := func(id string, max int) int {
			t.Helper()
			n, err := b.store.InstanceDepth(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id}, max)
			require.NoError(t, err)
			return n
		}
		require.Equal(t, 0, depth("p", 16))
		require.Equal(t, 1, depth("c", 16))
		require.Equal(t, 2, depth("g", 16))
		require.Equal(t, 1, depth("g", 1), "counted up to max")
		require.Equal(t, 0, depth("x", 16), "metadata is no parent link")
		require.Equal(t, 0, depth("missing", 16))
	})

	t.Run("ChildEndWhileParentRunsIsBuffered", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		parentTask := b.claim(t, "p")
		createChild(t, b, "p", "c", "")
		childTask := b.claim(t, "c")
		end := endChild(t, b, childTask, "p")
		require.False(t, end.ParentWoken, "a running parent is not woken")
		events := b.events(t, "p", 1)
		require.Len(t, events, 1)
		require.Equal(t, childType, events[0].Type)
		res := waitForChild(t, b, parentTask)
		require.True(t, res.Due, "the parent's suspend finds the child's end and is due at once")
	})

	t.Run("ChildEndToEndedParentCommits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		createChild(t, b, "p", "c", db.ParentPolicyAbandon)
		_, err := b.store.InstanceTerminate(b.ctx, b.change("p"))
		require.NoError(t, err)
		childTask := b.claim(t, "c")
		end := endChild(t, b, childTask, "p")
		require.False(t, end.ParentWoken)
		require.Equal(t, dftype.StatusComplete, b.get(t, "c").Status)
		require.Empty(t, b.events(t, "p", 1))
	})

	t.Run("TerminateCascades", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		createChild(t, b, "p", "c", "")
		createChildOf(t, b, "p", "a", 1, "other", db.ParentPolicyAbandon)
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "g", Now: new(b.now),
			Parent: &db.ParentLink{WorkflowName: workflowName, InstanceID: "c", RunNumber: 1, StepKey: "sum"},
		})
		require.NoError(t, err)
		inst, err := b.store.InstanceTerminate(b.ctx, b.change("p"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusTerminated, inst.Status)
		for _, id := range []string{"c", "g"} {
			require.Equal(t, dftype.StatusTerminated, b.get(t, id).Status, id)
			_, err := b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
			require.ErrorIs(t, err, db.ErrNotFound, "a terminated child's task is deleted")
		}
		require.Equal(t, dftype.StatusQueued, b.get(t, "a").Status, "an abandoned child keeps running")
	})

	t.Run("TerminatedChildWakesParent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "p")
		parentTask := b.claim(t, "p")
		createChild(t, b, "p", "c", "")
		waitForChild(t, b, parentTask)
		_, err := b.store.InstanceTerminate(b.ctx, b.change("c"))
		require.NoError(t, err)
		task := b.task(t, "p")
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.False(t, task.RunAt.After(b.now), "due now")
		steps := b.steps(t, "p", 1)
		require.Equal(t, db.StepStatusComplete, steps[0].Status)
		var ev workflow.ReceivedEvent
		require.NoError(t, json.Unmarshal(steps[0].Result, &ev))
		var out dftype.ChildOutcome
		require.NoError(t, ev.Decode(&out))
		require.Equal(t, dftype.StatusTerminated, out.Status)
		require.Equal(t, "c", out.InstanceID)
	})
}
