package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// Run runs the conformance suite. newStore is called once per subtest and
// must return an empty, migrated store that the test owns (closing it, if
// needed, through t.Cleanup). Subtests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("Instance", func(t *testing.T) { t.Parallel(); testInstance(t, newStore) })
	t.Run("InstanceList", func(t *testing.T) { t.Parallel(); testInstanceList(t, newStore) })
	t.Run("Lifecycle", func(t *testing.T) { t.Parallel(); testLifecycle(t, newStore) })
	t.Run("LifecycleLog", func(t *testing.T) { t.Parallel(); testLifecycleLog(t, newStore) })
	t.Run("Eager", func(t *testing.T) { t.Parallel(); testEager(t, newStore) })
	t.Run("Task", func(t *testing.T) { t.Parallel(); testTask(t, newStore) })
	t.Run("Checkpoint", func(t *testing.T) { t.Parallel(); testCheckpoint(t, newStore) })
	t.Run("CheckpointBatch", func(t *testing.T) { t.Parallel(); testCheckpointBatch(t, newStore) })
	t.Run("LimitRelease", func(t *testing.T) { t.Parallel(); testLimitRelease(t, newStore) })
	t.Run("LeaseLosses", func(t *testing.T) { t.Parallel(); testLeaseLosses(t, newStore) })
	t.Run("Refusal", func(t *testing.T) { t.Parallel(); testRefusal(t, newStore) })
	t.Run("Event", func(t *testing.T) { t.Parallel(); testEvent(t, newStore) })
	t.Run("Concurrency", func(t *testing.T) { t.Parallel(); testConcurrency(t, newStore) })
	t.Run("Time", func(t *testing.T) { t.Parallel(); testTime(t, newStore) })
	t.Run("History", func(t *testing.T) { t.Parallel(); testHistory(t, newStore) })
	t.Run("PayloadBudget", func(t *testing.T) { t.Parallel(); testPayloadBudget(t, newStore) })
	t.Run("Hooks", func(t *testing.T) { t.Parallel(); testHooks(t, newStore) })
	t.Run("Outbox", func(t *testing.T) { t.Parallel(); testOutbox(t, newStore) })
	t.Run("Schedule", func(t *testing.T) { t.Parallel(); testSchedule(t, newStore) })
	t.Run("Flow", func(t *testing.T) { t.Parallel(); testFlow(t, newStore) })
	t.Run("Fleet", func(t *testing.T) { t.Parallel(); testFleet(t, newStore) })
	t.Run("Attempts", func(t *testing.T) { t.Parallel(); testAttempts(t, newStore) })
	t.Run("Worker", func(t *testing.T) { t.Parallel(); testWorker(t, newStore) })
	t.Run("Compensation", func(t *testing.T) { t.Parallel(); testCompensation(t, newStore) })
	t.Run("Invoke", func(t *testing.T) { t.Parallel(); testInvoke(t, newStore) })
	t.Run("InvokeChange", func(t *testing.T) { t.Parallel(); testInvokeChange(t, newStore) })
	t.Run("Stats", func(t *testing.T) { t.Parallel(); testStats(t, newStore) })
	t.Run("Trace", func(t *testing.T) { t.Parallel(); testTrace(t, newStore) })
	t.Run("Ping", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, newStore(t).Ping(t.Context()))
	})
}

// base is the suite's "now": far in the future and on a whole microsecond, so
// that a backend reading its own clock instead of the Now parameter is caught
// and every backend can store it exactly.
var base = time.Date(2041, time.March, 4, 10, 0, 0, 0, time.UTC)

// lease is the lease the suite takes when it claims.
const lease = 30 * time.Second

const (
	workflowName = "billing"
	otherName    = "shipping"
	owner        = "runner-1"
)

type testBundle struct {
	ctx   context.Context
	store db.Store
	now   time.Time
}

func setup(t *testing.T, newStore func(t *testing.T) db.Store) *testBundle {
	t.Helper()
	return &testBundle{ctx: t.Context(), store: newStore(t), now: base}
}

// batcher is the store's group commit; a store that does not offer the
// capability skips the test.
func (b *testBundle) batcher(t *testing.T) db.BatchCheckpointer {
	t.Helper()
	batcher, ok := b.store.(db.BatchCheckpointer)
	if !ok {
		t.Skip("the store offers no db.BatchCheckpointer")
	}
	return batcher
}

// at returns the suite's now moved by d.
func (b *testBundle) at(d time.Duration) time.Time { return b.now.Add(d) }

func (b *testBundle) create(t *testing.T, id string) *db.Instance {
	t.Helper()
	return b.createAt(t, workflowName, id, b.now)
}

func (b *testBundle) createAt(t *testing.T, name, id string, now time.Time) *db.Instance {
	t.Helper()
	inst, err := b.store.InstanceCreate(b.ctx, &db.InstanceCreateParams{
		WorkflowName: name,
		ID:           id,
		Params:       json.RawMessage(`{"id":"` + id + `"}`),
		Now:          new(now),
	})
	require.NoError(t, err)
	require.Nil(t, inst.LeasedTask, "a create without a lease leases nothing")
	return inst.Instance
}

func (b *testBundle) get(t *testing.T, id string) *db.Instance {
	t.Helper()
	inst, err := b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	require.NoError(t, err)
	return inst
}

func (b *testBundle) task(t *testing.T, id string) *db.Task {
	t.Helper()
	task, err := b.store.TaskGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: id})
	require.NoError(t, err)
	return task
}

func (b *testBundle) claimAt(t *testing.T, now time.Time, max int) []*db.Task {
	t.Helper()
	tasks, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
		Owner:         owner,
		WorkflowNames: []string{workflowName},
		Max:           max,
		Now:           now,
		LockedUntil:   now.Add(lease),
	})
	require.NoError(t, err)
	return claimedTasks(t, b, tasks)
}

// claimedTasks checks the runs claims returned with their tasks
// (requireFreshRun) and returns the tasks, to compare with TaskGet's.
func claimedTasks(t *testing.T, b *testBundle, claims []db.Claim) []*db.Task {
	t.Helper()
	tasks := make([]*db.Task, len(claims))
	for i := range claims {
		requireFreshRun(t, b, &claims[i])
		tasks[i] = claims[i].Task
	}
	return tasks
}

// taskList is the tasks of claims.
func taskList(claims []db.Claim) []*db.Task {
	tasks := make([]*db.Task, len(claims))
	for i := range claims {
		tasks[i] = claims[i].Task
	}
	return tasks
}

// requireFreshRun checks the run a claim returned with its task: if any, it
// is the instance exactly as stored after the claim (its parent link
// included), and has no steps.
func requireFreshRun(t *testing.T, b *testBundle, c *db.Claim) {
	t.Helper()
	if c.FreshRun == nil {
		return
	}
	want := b.get(t, c.Task.InstanceID)
	require.Equal(t, want, c.FreshRun, "the fresh run is the instance as the claim left it")
	require.Empty(t, b.steps(t, c.Task.InstanceID, c.FreshRun.RunNumber), "a fresh run has no steps")
}

// claim claims at the suite's now and requires that exactly the task of the
// instance id was claimed: tests create what they claim in order.
func (b *testBundle) claim(t *testing.T, id string) *db.Task {
	t.Helper()
	return b.claimIDAt(t, id, b.now)
}

func (b *testBundle) claimIDAt(t *testing.T, id string, now time.Time) *db.Task {
	t.Helper()
	tasks := b.claimAt(t, now, 100)
	require.Equal(t, []string{id}, taskIDs(tasks), "claimed tasks")
	return tasks[0]
}

// checkpoint returns checkpoint params for a claimed task at the suite's now.
func (b *testBundle) checkpoint(task *db.Task) *db.CheckpointParams {
	return &db.CheckpointParams{
		Task:         ref(task),
		WorkflowName: task.WorkflowName,
		InstanceID:   task.InstanceID,
		RunNumber:    task.RunNumber,
		Now:          b.now,
		Outcome:      db.OutcomeContinue,
	}
}

func (b *testBundle) change(id string) *db.InstanceChangeParams {
	return &db.InstanceChangeParams{WorkflowName: workflowName, ID: id, Now: new(b.now)}
}

func (b *testBundle) send(t *testing.T, id, typ, payload string) *db.EventSendResult {
	t.Helper()
	res, err := b.store.EventSend(b.ctx, &db.EventSendParams{
		WorkflowName: workflowName,
		InstanceID:   id,
		Type:         typ,
		Payload:      json.RawMessage(payload),
		Now:          new(b.now),
	})
	require.NoError(t, err)
	return res
}

func (b *testBundle) steps(t *testing.T, id string, run int) []*db.Step {
	t.Helper()
	steps, err := b.store.StepList(b.ctx, &db.StepListParams{WorkflowName: workflowName, InstanceID: id, RunNumber: run})
	require.NoError(t, err)
	return steps
}

func (b *testBundle) events(t *testing.T, id string, run int) []*db.Event {
	t.Helper()
	events, err := b.store.EventList(b.ctx, &db.EventListParams{WorkflowName: workflowName, InstanceID: id, RunNumber: run})
	require.NoError(t, err)
	return events
}

func (b *testBundle) nextRunAt(t *testing.T, names ...string) *time.Time {
	t.Helper()
	if len(names) == 0 {
		names = []string{workflowName}
	}
	next, err := b.store.TaskNextRunAt(b.ctx, &db.TaskNextRunAtParams{WorkflowNames: names})
	require.NoError(t, err)
	return next
}

func ref(task *db.Task) db.TaskRef { return db.TaskRef{ID: task.ID, Version: task.Version} }

// requireTime checks that got is the instant want, in UTC.
func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Truef(t, want.Equal(got), "want %s, got %s", want, got)
	require.Equal(t, time.UTC, got.Location(), msgAndArgs...)
}

func requireTimePtr(t *testing.T, want time.Time, got *time.Time, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	requireTime(t, want, *got, msgAndArgs...)
}

// requireJSON checks JSON text byte for byte.
func requireJSON(t *testing.T, want string, got json.RawMessage, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, want, string(got), msgAndArgs...)
}

// instances are the instances of create results.
func instances(created []db.CreateResult) []*db.Instance {
	out := make([]*db.Instance, len(created))
	for i := range created {
		out[i] = created[i].Instance
	}
	return out
}

func ids(list []*db.Instance) []string {
	out := make([]string, len(list))
	for i, inst := range list {
		out[i] = inst.ID
	}
	return out
}

func taskIDs(list []*db.Task) []string {
	out := make([]string, len(list))
	for i, task := range list {
		out[i] = task.InstanceID
	}
	return out
}
