package duraflow_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/internal/outagetest"
	"github.com/duraflow/duraflow/runner"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// outageStart is where the fake clocks of the outage tests start: 09:00:30,
// between two due times of a schedule of every five minutes.
var outageStart = time.Date(2031, 3, 4, 9, 0, 30, 0, time.UTC)

// TestHostSurvivesADatabaseOutage takes a running host's database away,
// makes work due meanwhile (a sleep ends, a hook delivery is due again, a
// schedule's due time comes, the lifecycle prune's interval passes) and
// gives the database back: every part of the host goes on by itself, within
// moments and without a poll (the clock does not move again), and each
// logs its outage once and its end once. On Postgres the server is
// stopped and started again, its connections cut; on SQLite another
// connection holds the file's write lock.
func TestHostSurvivesADatabaseOutage(t *testing.T) {
	t.Parallel()
	outagetest.ForEachBackend(t, func(t *testing.T, d *outagetest.DB) {
		ctx := context.Background()
		clk := clock.NewMock()
		clk.Set(outageStart)
		log := outagetest.NewLog()

		reg := workflow.NewRegistry()
		woke := make(chan struct{}, 1)
		workflow.MustRegister(reg, "sleeper", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			if err := step.Sleep("nap", 10*time.Minute); err != nil {
				return "", err
			}
			return workflow.Do(step, "after", func(ctx context.Context) (string, error) {
				woke <- struct{}{}
				return "rested", nil
			})
		})
		workflow.MustRegister(reg, "report", func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (string, error) {
			return "done", nil
		})
		// The hook refuses every first attempt, which is retried 5 minutes
		// later, in the outage.
		retried := make(chan hook.Enqueued, 10)
		h, err := duraflow.New(d.Store, &duraflow.Config{
			Registry: reg, Clock: clk, Logger: log.Logger(),
			Runner:    &runner.Config{PollInterval: time.Hour},
			Scheduler: &schedule.Config{PollInterval: time.Minute},
			Hooks: &hook.Config{RetryDelay: 5 * time.Minute, OnWorkflowEnqueued: func(ctx context.Context, e hook.Enqueued) error {
				if e.Attempt == 1 {
					return errFirstAttempt
				}
				retried <- e
				return nil
			}},
			LifecycleRetention: 5 * time.Minute, LifecyclePruneInterval: 10 * time.Minute,
		})
		require.NoError(t, err)
		require.NoError(t, h.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, h.Stop(stopCtx))
		})
		if l := h.Listening(); l != nil {
			<-l
		}
		_, err = h.Scheduler().Create(ctx, schedule.CreateRequest{ID: "every-5", WorkflowName: "report", Cron: "*/5 * * * *"})
		require.NoError(t, err)
		_, err = h.Client().Create(ctx, "sleeper", dftype.CreateRequest{ID: "s"})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := h.Client().Get(ctx, "sleeper", "s")
			return err == nil && info.Status == dftype.StatusWaiting
		}, outagetest.WaitTimeout, time.Millisecond, "the sleeper sleeps")
		log.Wait(t, "hook failed; retrying", "instance", "s")

		d.Down(t)
		_, err = h.Client().Create(ctx, "sleeper", dftype.CreateRequest{ID: "in-the-outage"})
		require.ErrorIs(t, err, db.ErrUnavailable, "a create in the outage fails as unavailable")
		// 09:10:30: the sleep ends, the hook's retry is due, the schedule's
		// 09:05 and the prune's interval have come.
		clk.Add(10 * time.Minute)
		whiles := []string{"claiming tasks", "delivering hooks", "firing schedules", "pruning lifecycle events", "registering and heartbeating the worker"}
		if d.ReadsFail {
			whiles = append(whiles, "listening for wake-ups")
		}
		for _, while := range whiles {
			log.Wait(t, "database unavailable; retrying with backoff", "while", while)
		}

		d.Up(t)
		// The worker heartbeats on the clock: its next beat is the first
		// after the outage.
		clk.Add(runner.DefaultWorkerHeartbeatInterval)
		select {
		case <-woke:
		case <-time.After(outagetest.WaitTimeout):
			t.Fatalf("the sleeper did not wake after the database came back; the log:\n%s", log)
		}
		select {
		case e := <-retried:
			require.Equal(t, "s", e.InstanceID)
		case <-time.After(outagetest.WaitTimeout):
			t.Fatalf("the hook was not delivered after the database came back; the log:\n%s", log)
		}
		log.Wait(t, "schedule: started an instance", "schedule", "every-5")
		pruned := log.Wait(t, "pruned lifecycle events")
		require.NotEqual(t, "0", pruned.Attrs["deleted"])
		for _, while := range whiles {
			log.Wait(t, "database available again", "while", while)
		}
		require.Eventually(t, func() bool {
			info, err := h.Client().Get(ctx, "sleeper", "s")
			return err == nil && info.Status == dftype.StatusComplete
		}, outagetest.WaitTimeout, time.Millisecond)
		require.NoError(t, h.Ready(ctx))
		for _, while := range whiles {
			require.Equal(t, 1, log.Count("database unavailable; retrying with backoff", "while", while), "%s: one warning for the outage", while)
			require.Equal(t, 1, log.Count("database available again", "while", while), while)
		}
		for _, msg := range []string{"claiming tasks failed", "delivering hooks failed", "schedule: firing due schedules failed", "pruning lifecycle events", "worker heartbeat failed"} {
			require.Zero(t, log.Count(msg), "%s: no warning per failed round", msg)
		}
	})
}

var errFirstAttempt = errorString("the first attempt is refused")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestHostStartsWhileTheDatabaseIsDown starts a host whose database is down:
// Start succeeds, Ready says what is missing, and once the database is back
// the stored flows load and the host runs them. A locked SQLite file still
// serves the reads of loading, so only Postgres can refuse it.
func TestHostStartsWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	d := outagetest.Postgres(t)
	ctx := context.Background()
	applier, err := flow.New(&flow.Config{Store: d.Store, Registry: workflow.NewRegistry()})
	require.NoError(t, err)
	_, err = applier.Apply(ctx, json.RawMessage(`{"id": "quick", "version": "1.0.0", "initialStepId": "set",
		"steps": {"set": {"id": "set", "type": "set", "config": {"values": {"ran": {"value": "yes"}}}}}, "output": "ran"}`))
	require.NoError(t, err)

	d.Down(t)
	log := outagetest.NewLog()
	h, err := duraflow.New(d.Store, &duraflow.Config{
		Registry: workflow.NewRegistry(), Logger: log.Logger(), Flows: &flow.Config{},
		Runner: &runner.Config{PollInterval: time.Hour},
	})
	require.NoError(t, err)
	require.NoError(t, h.Start(ctx), "a host starts while its database is down")
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, h.Stop(stopCtx))
	})
	require.ErrorIs(t, h.Ready(ctx), db.ErrUnavailable, "not ready while the database is down")
	log.Wait(t, "database unavailable; retrying with backoff", "while", "loading flows")
	require.False(t, h.Flows().IsFlow("quick"))

	d.Up(t)
	select {
	case <-h.Flows().Loaded():
	case <-time.After(outagetest.WaitTimeout):
		t.Fatalf("the flows were not loaded after the database came back; the log:\n%s", log)
	}
	require.NoError(t, h.Ready(ctx))
	_, err = h.Client().Create(ctx, "quick", dftype.CreateRequest{ID: "q"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := h.Client().Get(ctx, "quick", "q")
		return err == nil && info.Status == dftype.StatusComplete && string(info.Output) == `"yes"`
	}, outagetest.WaitTimeout, time.Millisecond)
}

// TestSubscriberOutlivesAnOutage keeps a lifecycle subscription while the
// database is down: it reads again with backoff instead of ending, and
// delivers the events committed once the database is back. Only Postgres
// refuses reads.
func TestSubscriberOutlivesAnOutage(t *testing.T) {
	t.Parallel()
	d := outagetest.Postgres(t)
	log := outagetest.NewLog()
	reg := workflow.NewRegistry()
	greet := register(reg)
	h := startHost(t, d.Store, &duraflow.Config{Registry: reg, Logger: log.Logger()})
	ctx, cancel := context.WithTimeout(t.Context(), outagetest.WaitTimeout)
	defer cancel()
	_, err := greet.Create(ctx, workflow.CreateOptions[greetParams]{ID: "before"})
	require.NoError(t, err)
	after, err := d.Store.(db.LifecycleStore).LifecycleLastID(ctx)
	require.NoError(t, err)
	require.Positive(t, after)
	got := make(chan db.LifecycleEvent, 10)
	subscribed := make(chan error, 1)
	go func() {
		filter := duraflow.LifecycleFilter{Types: []db.LifecycleEventType{db.LifecycleCreated}, AfterID: after}
		subscribed <- h.SubscribeLifecycle(ctx, filter, func(e db.LifecycleEvent) error {
			got <- e
			return nil
		})
	}()

	d.Down(t)
	log.Wait(t, "database unavailable; retrying with backoff", "while", "reading lifecycle events for a subscriber")
	d.Up(t)
	_, err = greet.Create(ctx, workflow.CreateOptions[greetParams]{ID: "after"})
	require.NoError(t, err)
	select {
	case e := <-got:
		require.Equal(t, "after", e.InstanceID)
	case err := <-subscribed:
		t.Fatalf("the subscription ended: %v", err)
	case <-ctx.Done():
		t.Fatalf("no event after the database came back; the log:\n%s", log)
	}
	log.Wait(t, "database available again", "while", "reading lifecycle events for a subscriber")
}
