package runner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// queueFleet is one store, one registry (billing on the payments queue,
// mail on the default one) and a client over them; runners are added by
// the test, each with its own queues, all on one fake clock.
type queueFleet struct {
	store  db.Store
	reg    *workflow.Registry
	client *client.Client
	clock  *clock.Mock
}

func newQueueFleet(t *testing.T, b testharness.Backend) *queueFleet {
	t.Helper()
	reg := workflow.NewRegistry()
	for _, name := range []string{"billing", "mail"} {
		var opts []workflow.Option
		if name == "billing" {
			opts = append(opts, workflow.WithQueue("payments"))
		}
		workflow.MustRegister(reg, name, func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return workflow.Do(step, "only", func(ctx context.Context) (string, error) { return ev.InstanceID, nil })
		}, opts...)
	}
	f := &queueFleet{store: b.NewStore(t), reg: reg, clock: clock.NewMock()}
	f.clock.Set(time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC))
	var err error
	f.client, err = client.New(&client.Config{Store: f.store, Registry: reg, Clock: f.clock})
	require.NoError(t, err)
	return f
}

// runner returns a runner of the fleet, not started (tests drive it with
// RunDue).
func (f *queueFleet) runner(t *testing.T, id string, adjust func(*runner.Config)) *runner.Runner {
	t.Helper()
	cfg := &runner.Config{Store: f.store, Registry: f.reg, Clock: f.clock, Logger: quietLogger, ID: id}
	if adjust != nil {
		adjust(cfg)
	}
	r, err := runner.New(cfg)
	require.NoError(t, err)
	return r
}

func (f *queueFleet) create(t *testing.T, name, id string, req dftype.CreateRequest) {
	t.Helper()
	req.ID = id
	info, err := f.client.Create(context.Background(), name, req)
	require.NoError(t, err)
	require.Equal(t, dftype.StatusQueued, info.Status)
}

// statuses returns the status of each instance, "name/id" → status.
func (f *queueFleet) statuses(t *testing.T, refs ...string) map[string]dftype.InstanceStatus {
	t.Helper()
	out := map[string]dftype.InstanceStatus{}
	for _, ref := range refs {
		name, id, _ := strings.Cut(ref, "/")
		info, err := f.client.Get(context.Background(), name, id)
		require.NoError(t, err)
		out[ref] = info.Status
	}
	return out
}

func TestRunnersServeOnlyTheirQueues(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		f := newQueueFleet(t, b)
		ctx := context.Background()
		f.create(t, "billing", "b1", dftype.CreateRequest{})                             // payments, the workflow's queue
		f.create(t, "billing", "b2", dftype.CreateRequest{Priority: 5})                  // payments
		f.create(t, "mail", "m1", dftype.CreateRequest{})                                // default
		f.create(t, "mail", "m2", dftype.CreateRequest{Queue: "payments"})               // the create's queue wins
		f.create(t, "billing", "b3", dftype.CreateRequest{Queue: workflow.DefaultQueue}) // default
		all := []string{"billing/b1", "billing/b2", "billing/b3", "mail/m1", "mail/m2"}

		other := f.runner(t, "other", func(c *runner.Config) { c.Queues = []string{"reports"} })
		n, err := other.RunDue(ctx, 100)
		require.NoError(t, err)
		require.Zero(t, n, "a runner of another queue claims nothing")

		// The default runner serves the default queue only.
		def := f.runner(t, "default", nil)
		n, err = def.RunDue(ctx, 100)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, map[string]dftype.InstanceStatus{
			"billing/b1": dftype.StatusQueued, "billing/b2": dftype.StatusQueued, "billing/b3": dftype.StatusComplete,
			"mail/m1": dftype.StatusComplete, "mail/m2": dftype.StatusQueued,
		}, f.statuses(t, all...))

		// A payments runner claims the rest, the higher priority first.
		pay := f.runner(t, "payments", func(c *runner.Config) { c.Queues = []string{"payments"} })
		n, err = pay.RunDueLimited(ctx, 1, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, dftype.StatusComplete, f.statuses(t, "billing/b2")["billing/b2"], "priority 5 is claimed first")
		n, err = pay.RunDue(ctx, 100)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for ref, st := range f.statuses(t, all...) {
			require.Equal(t, dftype.StatusComplete, st, ref)
		}

		// A runner of AllQueues serves every queue.
		f.create(t, "mail", "m3", dftype.CreateRequest{Queue: "reports"})
		f.create(t, "mail", "m4", dftype.CreateRequest{})
		every := f.runner(t, "every", func(c *runner.Config) { c.Queues = []string{runner.AllQueues} })
		n, err = every.RunDue(ctx, 100)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	})
}

func TestRunnerServesOnlyItsWorkflows(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		f := newQueueFleet(t, b)
		ctx := context.Background()
		f.create(t, "mail", "m1", dftype.CreateRequest{})
		f.create(t, "billing", "b1", dftype.CreateRequest{Queue: workflow.DefaultQueue})

		billingOnly := f.runner(t, "billing-only", func(c *runner.Config) { c.Workflows = []string{"billing"} })
		n, err := billingOnly.RunDue(ctx, 100)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, map[string]dftype.InstanceStatus{
			"billing/b1": dftype.StatusComplete, "mail/m1": dftype.StatusQueued,
		}, f.statuses(t, "billing/b1", "mail/m1"))

		// A name the registry does not hold serves nothing.
		ghost := f.runner(t, "ghost", func(c *runner.Config) { c.Workflows = []string{"unknown"} })
		n, err = ghost.RunDue(ctx, 100)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestRunnerQueuesAndWorkflowsAreValidated(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	store := testharness.SQLite.NewStore(t)
	for _, tc := range []struct {
		cfg  *runner.Config
		want error
	}{
		{&runner.Config{Store: store, Registry: reg, Queues: []string{"bad queue"}}, workflow.ErrInvalidRequest},
		{&runner.Config{Store: store, Registry: reg, Queues: []string{""}}, workflow.ErrInvalidRequest},
		{&runner.Config{Store: store, Registry: reg, Workflows: []string{"-bad"}}, workflow.ErrInvalidWorkflowName},
		{&runner.Config{Store: store, Registry: reg, Queues: []string{runner.AllQueues, "a"}}, workflow.ErrInvalidRequest},
	} {
		_, err := runner.New(tc.cfg)
		require.ErrorIs(t, err, tc.want)
	}
	_, err := runner.New(&runner.Config{Store: store, Registry: reg, Queues: []string{runner.AllQueues}})
	require.NoError(t, err, "AllQueues alone serves every queue")
}

func TestEagerStartAndResumeOnlyOnServedQueues(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		reg := workflow.NewRegistry()
		registerSteps(reg, "served", 1)
		registerSteps(reg, "elsewhere", 1)
		workflow.MustRegister(reg, "waits", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (json.RawMessage, error) {
			return workflow.WaitForEvent[json.RawMessage](step, "wait", workflow.WaitOptions{Type: "go", Timeout: time.Hour})
		}, workflow.WithQueue("side"))
		h := newEagerHost(t, b.NewStore(t), reg, true, func(c *runner.Config) {
			c.Queues = []string{workflow.DefaultQueue}
			c.Workflows = []string{"served", "waits"}
		})
		ctx := context.Background()

		info, err := h.client.Create(ctx, "served", dftype.CreateRequest{ID: "s1"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusRunning, info.Status, "a served queue and workflow start eagerly")

		info, err = h.client.Create(ctx, "served", dftype.CreateRequest{ID: "s2", Queue: "side"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, info.Status, "another queue is not started eagerly")

		info, err = h.client.Create(ctx, "elsewhere", dftype.CreateRequest{ID: "e1"})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusQueued, info.Status, "a workflow outside Config.Workflows is not started eagerly")

		batch, err := h.client.CreateBatch(ctx, "served", []dftype.CreateRequest{{ID: "s3", Queue: "side"}, {ID: "s4", Queue: "side"}})
		require.NoError(t, err)
		for _, i := range batch {
			require.Equal(t, dftype.StatusQueued, i.Status)
		}
		h.waitStatus(t, "served", "s1", dftype.StatusComplete)
		require.EqualValues(t, 1, h.runner.EagerStarts())

		// An event for a run on a queue the runner does not serve wakes it
		// for a claim; the runner does not take it.
		side := newQueueRunner(t, h, "side-runner", []string{"side"})
		_, err = h.client.Create(ctx, "waits", dftype.CreateRequest{ID: "w1"})
		require.NoError(t, err)
		n, err := side.RunDue(ctx, 10)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 1)
		h.waitStatusOn(t, "waits", "w1", dftype.StatusWaiting)
		require.NoError(t, h.client.SendEvent(ctx, "waits", "w1", "go", json.RawMessage(`"hi"`)))
		task, err := h.store.TaskGet(ctx, db.InstanceRef{WorkflowName: "waits", ID: "w1"})
		require.NoError(t, err)
		require.Equal(t, db.TaskStatusPending, task.Status, "the send leased nothing to a runner of another queue")
		_, err = side.RunDue(ctx, 10)
		require.NoError(t, err)
		done := h.waitStatusOn(t, "waits", "w1", dftype.StatusComplete)
		require.JSONEq(t, `"hi"`, string(done.Output))
	})
}

// newQueueRunner is a runner on the host's store and registry that serves
// queues, driven by RunDue.
func newQueueRunner(t *testing.T, h *eagerHost, id string, queues []string) *runner.Runner {
	t.Helper()
	r, err := runner.New(&runner.Config{Store: h.store, Registry: h.reg, Logger: quietLogger, ID: id, Queues: queues})
	require.NoError(t, err)
	return r
}

func (h *eagerHost) waitStatusOn(t *testing.T, name, id string, want dftype.InstanceStatus) *dftype.InstanceInfo {
	t.Helper()
	return h.waitStatus(t, name, id, want)
}
