package storetest

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
)

// eagerOwner is the runner an eager start leases to in these tests.
const eagerOwner = "eager-runner"

func (b *testBundle) eagerLease(max int) *db.CreateLease {
	return &db.CreateLease{Owner: eagerOwner, LockedUntil: b.at(lease), Max: max}
}

func (b *testBundle) createLeased(t *testing.T, id string) db.CreateResult {
	t.Helper()
	inst, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
		WorkflowName: workflowName, ID: id, Params: json.RawMessage(`{"id":"` + id + `"}`),
		Now: new(b.now), Lease: b.eagerLease(0),
	})
	require.NoError(t, err)
	return inst
}

// requireLeased checks that task is the first task of an eager start, as a
// claim by eagerOwner at the suite's now would have left it.
func (b *testBundle) requireLeased(t *testing.T, id string, task *db.Task) {
	t.Helper()
	require.NotNil(t, task, "leased task of %s", id)
	require.Equal(t, workflowName, task.WorkflowName)
	require.Equal(t, id, task.InstanceID)
	require.Equal(t, 1, task.RunNumber)
	require.Equal(t, db.TaskKindRun, task.Kind)
	require.Equal(t, db.TaskStatusProcessing, task.Status)
	require.Equal(t, eagerOwner, task.LockOwner)
	requireTimePtr(t, b.at(lease), task.LockedUntil)
	require.Equal(t, int64(1), task.Version)
	require.Equal(t, 1, task.Attempts)
	requireTime(t, b.now, task.RunAt)
}

// testEager covers creates with a CreateLease (eager start): the instance
// starts running with its task already leased, in the create's transaction.
func testEager(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("CreateLeasedStartsTheInstanceWithItsTaskLeased", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		c := b.createLeased(t, "e-1")
		inst := c.Instance
		require.Equal(t, dftype.StatusRunning, inst.Status)
		requireTimePtr(t, b.now, inst.StartedAt)
		requireTime(t, b.now, inst.CreatedAt)
		require.Equal(t, 1, inst.RunNumber)
		requireJSON(t, `{"id":"e-1"}`, inst.Params)
		b.requireLeased(t, "e-1", c.LeasedTask)

		stored := b.task(t, "e-1")
		require.Equal(t, c.LeasedTask, stored, "the returned task is the stored one")
		got := b.get(t, "e-1")
		require.Equal(t, inst, got)

		// Nobody claims it while the lease holds; nothing is due.
		require.Empty(t, b.claimAt(t, b.now, 10))
		require.Empty(t, b.claimAt(t, b.at(lease/2), 10))

		// The holder checkpoints with the returned task, as after a claim.
		res, err := b.store.Checkpoint(b.ctx, b.checkpoint(c.LeasedTask))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, res.Status)
		cp := b.checkpoint(c.LeasedTask)
		cp.Outcome, cp.Output = db.OutcomeComplete, json.RawMessage(`1`)
		_, err = b.store.Checkpoint(b.ctx, cp)
		require.NoError(t, err)
		require.Equal(t, dftype.StatusComplete, b.get(t, "e-1").Status)
	})

	t.Run("ExpiredEagerLeaseIsReclaimed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		inst := b.createLeased(t, "crash")
		// The holder dies after the commit: the lease expires and a claim takes it.
		task := b.claimIDAt(t, "crash", b.at(lease))
		require.Equal(t, owner, task.LockOwner)
		require.Equal(t, int64(2), task.Version)
		require.Equal(t, 2, task.Attempts)
		_, err := b.store.Checkpoint(b.ctx, b.checkpoint(inst.LeasedTask))
		require.ErrorIs(t, err, db.ErrLeaseLost, "the dead holder is fenced out")
		require.NoError(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(task), LockedUntil: b.at(2 * lease)}))
		require.Equal(t, dftype.StatusRunning, b.get(t, "crash").Status)
	})

	t.Run("CreateLeasedOfTakenIDChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		before := b.create(t, "dup")
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "dup", Now: new(b.at(1)), Lease: b.eagerLease(0),
		})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		require.Equal(t, before, b.get(t, "dup"))
		task := b.task(t, "dup")
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.Empty(t, task.LockOwner)
		require.Equal(t, int64(0), task.Version)
	})

	t.Run("PauseAndTerminateOfALeasedInstance", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		p := b.createLeased(t, "p")
		inst, err := b.store.InstancePause(b.ctx, b.change("p"))
		require.NoError(t, err)
		require.Equal(t, dftype.StatusWaitingForPause, inst.Status, "a started instance parks at its next step")
		res, err := b.store.Checkpoint(b.ctx, b.checkpoint(p.LeasedTask))
		require.NoError(t, err)
		require.True(t, res.PauseRequested)

		x := b.createLeased(t, "x")
		_, err = b.store.InstanceTerminate(b.ctx, b.change("x"))
		require.NoError(t, err)
		_, err = b.store.Checkpoint(b.ctx, b.checkpoint(x.LeasedTask))
		require.ErrorIs(t, err, db.ErrLeaseLost)
	})

	t.Run("CreateLeasedRecordsTheCreateHook", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
			WorkflowName: workflowName, ID: "h", Now: new(b.now), RecordHooks: true, Lease: b.eagerLease(0),
		})
		require.NoError(t, err)
		require.Equal(t, []string{"create h 0s"}, b.recorded(t))
	})

	t.Run("CreateManyLeasesTheFirstMaxItems", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.create(t, "taken")
		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), Lease: b.eagerLease(3),
			Instances: []db.InstanceCreateItem{
				{ID: "a", Params: json.RawMessage(`1`)},
				{ID: "taken"},
				{ID: "b"},
				{ID: "c"},
				{ID: "d"},
			},
		})
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "c", "d"}, ids(instances(created)))
		for _, c := range created[:2] {
			inst := c.Instance
			require.Equal(t, dftype.StatusRunning, inst.Status, inst.ID)
			requireTimePtr(t, b.now, inst.StartedAt)
			b.requireLeased(t, inst.ID, c.LeasedTask)
			require.Equal(t, c.LeasedTask, b.task(t, inst.ID))
		}
		requireJSON(t, `1`, created[0].Instance.Params)
		for _, c := range created[2:] {
			inst := c.Instance
			require.Equal(t, dftype.StatusQueued, inst.Status, inst.ID)
			require.Nil(t, inst.StartedAt)
			require.Nil(t, c.LeasedTask)
		}
		require.Equal(t, dftype.StatusQueued, b.get(t, "taken").Status)
		// Only the queued ones are claimable.
		require.ElementsMatch(t, []string{"taken", "c", "d"}, taskIDs(b.claimAt(t, b.now, 10)))
	})

	t.Run("CreateManyWithoutRoomLeasesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), Lease: b.eagerLease(0),
			Instances: []db.InstanceCreateItem{{ID: "a"}, {ID: "b"}},
		})
		require.NoError(t, err)
		for _, c := range created {
			require.Equal(t, dftype.StatusQueued, c.Instance.Status)
			require.Nil(t, c.LeasedTask)
		}
		require.Len(t, b.claimAt(t, b.now, 10), 2)
	})

	t.Run("CreateManyAllLeased", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		created, err := b.store.InstanceCreateMany(b.ctx, &db.InstanceCreateManyParams{
			WorkflowName: workflowName, Now: new(b.now), Lease: b.eagerLease(5), RecordHooks: true,
			Instances: []db.InstanceCreateItem{{ID: "a"}, {ID: "b"}},
		})
		require.NoError(t, err)
		for _, c := range created {
			b.requireLeased(t, c.Instance.ID, c.LeasedTask)
		}
		require.Empty(t, b.claimAt(t, b.now, 10))
		require.ElementsMatch(t, []string{"create a 0s", "create b 0s"}, b.recorded(t))
	})
}
