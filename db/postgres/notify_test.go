package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
)

// notifyTimeout bounds the wait for a notification that must arrive.
const notifyTimeout = 10 * time.Second

// markerName is the workflow of the instances a listener creates to prove
// that nothing else was notified before them.
const markerName = "marker"

// listener is a connection of its own that LISTENs on a store's wake
// channel, as a runner in another process would.
type listener struct {
	conn    *pgx.Conn
	store   *postgres.Store
	markers int
}

func listen(t *testing.T, store *postgres.Store) *listener {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), pgtest.DatabaseURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(t.Context(), "LISTEN "+pgx.Identifier{store.WakeChannel()}.Sanitize())
	require.NoError(t, err)
	return &listener{conn: conn, store: store}
}

// requireNext waits for the next notification and requires its payload.
func (l *listener) requireNext(t *testing.T, workflowName string, msgAndArgs ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), notifyTimeout)
	defer cancel()
	n, err := l.conn.WaitForNotification(ctx)
	require.NoError(t, err, msgAndArgs...)
	require.Equal(t, l.store.WakeChannel(), n.Channel)
	require.Equal(t, workflowName, n.Payload, msgAndArgs...)
}

// requireNone proves that nothing was notified since the last notification
// without waiting for a timeout: it commits a change that notifies and
// requires that its notification is the next one. Postgres delivers the
// notifications of committed transactions in commit order, so anything
// notified before would arrive first.
func (l *listener) requireNone(t *testing.T, msgAndArgs ...any) {
	t.Helper()
	l.markers++
	_, err := l.store.InstanceCreate(t.Context(), &db.InstanceCreateParams{
		WorkflowName: markerName, ID: fmt.Sprintf("m%d", l.markers),
	})
	require.NoError(t, err)
	l.requireNext(t, markerName, msgAndArgs...)
}

func TestWakeNotifications(t *testing.T) {
	t.Parallel()

	const name = "billing"
	// now is the suite's time for every call that takes one: far from the
	// database clock, which TaskRelease compares with.
	now := time.Date(2041, 3, 4, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { return new(now.Add(d)) }
	change := func(id string) *db.InstanceChangeParams {
		return &db.InstanceChangeParams{WorkflowName: name, ID: id, Now: at(0)}
	}
	claim := func(t *testing.T, store db.Store, when time.Time) *db.Task {
		t.Helper()
		tasks, err := store.TaskClaim(t.Context(), &db.TaskClaimParams{
			Owner: "r", WorkflowNames: []string{name}, Max: 1, Now: when, LockedUntil: when.Add(time.Minute),
		})
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		return tasks[0].Task
	}
	suspend := func(task *db.Task, next time.Time, types ...string) *db.CheckpointParams {
		p := &db.CheckpointParams{
			Task: db.TaskRef{ID: task.ID, Version: task.Version}, WorkflowName: name,
			InstanceID: task.InstanceID, RunNumber: task.RunNumber, Now: now,
			Outcome: db.OutcomeSuspend, NextRunAt: next, NextKind: db.TaskKindWake, WaitEventTypes: types,
		}
		for _, typ := range types {
			p.Steps = append(p.Steps, db.StepWrite{
				Key: "wait " + typ, Type: db.StepTypeWaitForEvent, Status: db.StepStatusWaiting, WaitEventType: typ, WakeAt: &next,
			})
		}
		return p
	}

	t.Run("ChannelIsPerStore", func(t *testing.T) {
		t.Parallel()
		pool := pgtest.NewPool(t)
		require.Equal(t, "duraflow_wake", postgres.WakeChannel)
		require.Equal(t, postgres.WakeChannel, postgres.New(pool).WakeChannel())
		require.Equal(t, postgres.WakeChannel, postgres.New(pool, postgres.WithWakeChannel("")).WakeChannel())
		require.Equal(t, "app_1", postgres.New(pool, postgres.WithWakeChannel("app_1")).WakeChannel())

		one, two := pgtest.NewStore(t), pgtest.NewStore(t)
		require.NotEqual(t, one.WakeChannel(), two.WakeChannel(), "tests do not hear each other")
		l := listen(t, one)
		_, err := two.InstanceCreate(t.Context(), &db.InstanceCreateParams{WorkflowName: name, ID: "a"})
		require.NoError(t, err)
		l.requireNone(t, "another store's channel")
	})

	t.Run("Create", func(t *testing.T) {
		t.Parallel()
		store := pgtest.NewStore(t)
		l := listen(t, store)
		ctx := t.Context()

		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: "a", Now: at(0)})
		require.NoError(t, err)
		l.requireNext(t, name, "a committed create")
		_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: "shipping", ID: "a", Now: at(0)})
		require.NoError(t, err)
		l.requireNext(t, "shipping", "the payload is the workflow name")

		_, err = store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: "a", Now: at(0)})
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		l.requireNone(t, "a rolled-back create")

		created, err := store.InstanceCreateMany(ctx, &db.InstanceCreateManyParams{
			WorkflowName: name,
			Instances:    []db.InstanceCreateItem{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}},
			Now:          at(0),
		})
		require.NoError(t, err)
		require.Len(t, created, 3)
		l.requireNext(t, name)
		l.requireNone(t, "a batch notifies once")

		created, err = store.InstanceCreateMany(ctx, &db.InstanceCreateManyParams{
			WorkflowName: name, Instances: []db.InstanceCreateItem{{ID: "a"}}, Now: at(0),
		})
		require.NoError(t, err)
		require.Empty(t, created)
		l.requireNone(t, "a batch that created nothing")
	})

	t.Run("ResumeAndRestart", func(t *testing.T) {
		t.Parallel()
		store := pgtest.NewStore(t)
		ctx := t.Context()
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: "a", Now: at(0)})
		require.NoError(t, err)
		l := listen(t, store)

		_, err = store.InstancePause(ctx, change("a"))
		require.NoError(t, err)
		l.requireNone(t, "pause")
		_, err = store.InstanceResume(ctx, change("a"))
		require.NoError(t, err)
		l.requireNext(t, name, "resume of a paused instance")
		_, err = store.InstanceResume(ctx, change("a"))
		require.NoError(t, err)
		l.requireNone(t, "resume of a queued instance")

		_, err = store.InstanceRestart(ctx, change("a"))
		require.NoError(t, err)
		l.requireNext(t, name, "restart")
		_, err = store.InstanceTerminate(ctx, change("a"))
		require.NoError(t, err)
		_, err = store.InstanceRestart(ctx, change("missing"))
		require.ErrorIs(t, err, db.ErrNotFound)
		l.requireNone(t, "terminate and a failed restart")
	})

	t.Run("EventAndCheckpoint", func(t *testing.T) {
		t.Parallel()
		store := pgtest.NewStore(t)
		ctx := t.Context()
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: "a", Now: at(0)})
		require.NoError(t, err)
		l := listen(t, store)
		send := func(typ string) *db.EventSendResult {
			res, err := store.EventSend(ctx, &db.EventSendParams{WorkflowName: name, InstanceID: "a", Type: typ, Now: at(0)})
			require.NoError(t, err)
			return res
		}

		task := claim(t, store, now)
		res, err := store.Checkpoint(ctx, suspend(task, now.Add(time.Hour), "approve"))
		require.NoError(t, err)
		require.False(t, res.Due)
		l.requireNone(t, "a suspend that is not due")

		require.False(t, send("reject").Woken)
		l.requireNone(t, "an event that wakes nothing")
		require.True(t, send("approve").Woken)
		l.requireNext(t, name, "an event that wakes the instance")

		// The event arrives before the runner suspends: the suspend is due.
		task = claim(t, store, now)
		send("approve")
		l.requireNone(t, "an event for a running instance")
		res, err = store.Checkpoint(ctx, suspend(task, now.Add(time.Hour), "approve"))
		require.NoError(t, err)
		require.True(t, res.Due)
		l.requireNext(t, name, "a due suspend")

		_, err = store.Checkpoint(ctx, suspend(task, now))
		require.ErrorIs(t, err, db.ErrLeaseLost)
		_, err = store.InstanceTerminate(ctx, change("a"))
		require.NoError(t, err)
		_, err = store.EventSend(ctx, &db.EventSendParams{WorkflowName: name, InstanceID: "a", Type: "approve", Now: at(0)})
		require.ErrorIs(t, err, db.ErrTerminal)
		l.requireNone(t, "a fenced checkpoint and an event to a terminal instance")
	})

	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		store := pgtest.NewStore(t)
		ctx := t.Context()
		_, err := store.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: name, ID: "a", Now: at(0)})
		require.NoError(t, err)
		l := listen(t, store)

		// TaskRelease carries no "now": it compares with the database clock.
		past := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
		future := time.Date(2101, 1, 1, 0, 0, 0, 0, time.UTC)
		task := claim(t, store, now)
		require.NoError(t, store.TaskRelease(ctx, &db.TaskReleaseParams{Task: db.TaskRef{ID: task.ID, Version: task.Version}, RunAt: future}))
		l.requireNone(t, "a release until later")

		task = claim(t, store, future)
		require.NoError(t, store.TaskRelease(ctx, &db.TaskReleaseParams{Task: db.TaskRef{ID: task.ID, Version: task.Version}, RunAt: past}))
		l.requireNext(t, name, "a release due now")

		err = store.TaskRelease(ctx, &db.TaskReleaseParams{Task: db.TaskRef{ID: task.ID, Version: task.Version}, RunAt: past})
		require.ErrorIs(t, err, db.ErrLeaseLost)
		l.requireNone(t, "a fenced release")
	})
}
