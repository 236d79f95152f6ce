package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
)

// testWorker checks the worker registry: registration (again under the
// same id without a duplicate), heartbeats, drains, lists, deregistration,
// and the reaper, which marks a silent worker offline and releases its
// tasks so that its fenced writes fail.
func testWorker(t *testing.T, newStore func(t *testing.T) db.Store) {
	registerAs := func(t *testing.T, b *testBundle, id string, now time.Time, releaseHeld bool, queues ...string) *db.Worker {
		t.Helper()
		w, err := b.store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{
			ID: id, Hostname: "host-a", PID: 4242, Version: "v1.2.3",
			Labels: map[string]string{"zone": "eu-1"}, Queues: queues, Workflows: []string{workflowName},
			MaxConcurrency: 8, Now: now, ReleaseHeld: releaseHeld,
		})
		require.NoError(t, err)
		return w
	}
	register := func(t *testing.T, b *testBundle, id string, now time.Time, queues ...string) *db.Worker {
		t.Helper()
		return registerAs(t, b, id, now, true, queues...)
	}
	claimAs := func(t *testing.T, b *testBundle, who string, now time.Time) []*db.Task {
		t.Helper()
		claims, err := b.store.TaskClaim(b.ctx, &db.TaskClaimParams{
			Owner: who, WorkflowNames: []string{workflowName}, Max: 100, Now: now, LockedUntil: now.Add(lease),
		})
		require.NoError(t, err)
		return taskList(claims)
	}

	t.Run("RegisterGetAndAgainWithoutDuplicate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		w := register(t, b, "host-a-4242", b.now, "default", "billing")
		require.Equal(t, "host-a-4242", w.ID)
		require.Equal(t, "host-a", w.Hostname)
		require.Equal(t, 4242, w.PID)
		require.Equal(t, "v1.2.3", w.Version)
		require.Equal(t, map[string]string{"zone": "eu-1"}, w.Labels)
		require.Equal(t, []string{"default", "billing"}, w.Queues)
		require.Equal(t, []string{workflowName}, w.Workflows)
		require.Equal(t, 8, w.MaxConcurrency)
		require.Equal(t, db.WorkerStatusOnline, w.Status)
		requireTime(t, b.now, w.RegisteredAt)
		requireTime(t, b.now, w.LastHeartbeatAt)
		require.Nil(t, w.DrainRequestedAt)
		require.Nil(t, w.DeregisteredAt)

		got, err := b.store.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, w, got)

		_, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: w.ID, ActiveCount: 3, CompletedTotal: 10, FailedTotal: 2, Now: b.at(time.Second)})
		require.NoError(t, err)
		_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: w.ID, Now: b.at(time.Second)})
		require.NoError(t, err)
		_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: w.ID, Now: b.at(2 * time.Second)})
		require.NoError(t, err)

		// A restart of the same host and pid registers the same id again:
		// one row, online, its times, totals and drain request afresh.
		again := register(t, b, "host-a-4242", b.at(time.Minute), "default")
		require.Equal(t, db.WorkerStatusOnline, again.Status)
		requireTime(t, b.at(time.Minute), again.RegisteredAt)
		require.Zero(t, again.CompletedTotal)
		require.Zero(t, again.ActiveCount)
		require.Nil(t, again.DrainRequestedAt)
		require.Nil(t, again.DeregisteredAt)
		require.Equal(t, []string{"default"}, again.Queues)
		all, err := b.store.WorkerList(b.ctx, &db.WorkerListParams{})
		require.NoError(t, err)
		require.Len(t, all, 1, "no duplicate")

		_, err = b.store.WorkerGet(b.ctx, "nobody")
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("HeartbeatRecordsCountsAndReportsDrain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		w := register(t, b, "w1", b.now)
		res, err := b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: w.ID, ActiveCount: 5, CompletedTotal: 40, FailedTotal: 3, Now: b.at(5 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, db.WorkerHeartbeatResult{}, res)
		got, err := b.store.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, 5, got.ActiveCount)
		require.Equal(t, int64(40), got.CompletedTotal)
		require.Equal(t, int64(3), got.FailedTotal)
		requireTime(t, b.at(5*time.Second), got.LastHeartbeatAt)

		drained, err := b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: w.ID, Now: b.at(6 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusDraining, drained.Status)
		requireTimePtr(t, b.at(6*time.Second), drained.DrainRequestedAt)
		// A second request keeps the first one's time.
		drained, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: w.ID, Now: b.at(7 * time.Second)})
		require.NoError(t, err)
		requireTimePtr(t, b.at(6*time.Second), drained.DrainRequestedAt)

		res, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: w.ID, ActiveCount: 1, Now: b.at(10 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, db.WorkerHeartbeatResult{DrainRequested: true}, res)

		gone, err := b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: w.ID, Now: b.at(11 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusOffline, gone.Status)
		requireTimePtr(t, b.at(11*time.Second), gone.DeregisteredAt)
		require.Zero(t, gone.ActiveCount)

		res, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: w.ID, ActiveCount: 1, Now: b.at(12 * time.Second)})
		require.NoError(t, err)
		require.Equal(t, db.WorkerHeartbeatResult{Offline: true}, res)
		after, err := b.store.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Equal(t, gone, after, "a heartbeat of an offline worker writes nothing")

		_, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "nobody", Now: b.now})
		require.ErrorIs(t, err, db.ErrNotFound)
		_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "nobody", Now: b.now})
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("DrainRefusals", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		_, err := b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "nobody", Now: b.now})
		require.ErrorIs(t, err, db.ErrNotFound)

		w := register(t, b, "w1", b.now)
		_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: w.ID, Now: b.now})
		require.NoError(t, err)
		_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: w.ID, Now: b.at(time.Second)})
		require.ErrorIs(t, err, db.ErrWorkerOffline)
		got, err := b.store.WorkerGet(b.ctx, w.ID)
		require.NoError(t, err)
		require.Nil(t, got.DrainRequestedAt, "a refused drain writes nothing")
		require.Equal(t, db.WorkerStatusOffline, got.Status)

		// Reaped (not deregistered) is offline too.
		register(t, b, "w2", b.now)
		_, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(time.Hour), OfflineAfter: time.Minute})
		require.NoError(t, err)
		_, err = b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "w2", Now: b.at(time.Hour)})
		require.ErrorIs(t, err, db.ErrWorkerOffline)
	})

	t.Run("ListFiltersAndPages", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		register(t, b, "w1", b.now, "default")
		register(t, b, "w2", b.now, "default", "emails")
		register(t, b, "w3", b.now, "emails")
		register(t, b, "w4", b.now, "default")
		_, err := b.store.WorkerDrain(b.ctx, &db.WorkerDrainParams{ID: "w4", Now: b.now})
		require.NoError(t, err)
		_, err = b.store.WorkerDeregister(b.ctx, &db.WorkerDeregisterParams{ID: "w3", Now: b.now})
		require.NoError(t, err)

		ids := func(p db.WorkerListParams) []string {
			t.Helper()
			ws, err := b.store.WorkerList(b.ctx, &p)
			require.NoError(t, err)
			out := []string{}
			for _, w := range ws {
				out = append(out, w.ID)
			}
			return out
		}
		require.Equal(t, []string{"w1", "w2", "w3", "w4"}, ids(db.WorkerListParams{}))
		require.Equal(t, []string{"w2", "w3"}, ids(db.WorkerListParams{Queue: "emails"}))
		require.Equal(t, []string{"w1", "w2"}, ids(db.WorkerListParams{Status: db.WorkerStatusOnline}))
		require.Equal(t, []string{"w2"}, ids(db.WorkerListParams{Status: db.WorkerStatusOnline, Queue: "emails"}))
		require.Equal(t, []string{"w4"}, ids(db.WorkerListParams{Status: db.WorkerStatusDraining}))
		require.Equal(t, []string{"w3"}, ids(db.WorkerListParams{Status: db.WorkerStatusOffline}))
		require.Empty(t, ids(db.WorkerListParams{Queue: "nowhere"}))
		require.Equal(t, []string{"w1", "w2"}, ids(db.WorkerListParams{Limit: 2}))
		require.Equal(t, []string{"w3", "w4"}, ids(db.WorkerListParams{Limit: 2, AfterID: "w2"}))
		require.Empty(t, ids(db.WorkerListParams{Limit: 2, AfterID: "w4"}))
	})

	t.Run("ReapReleasesTasksAndFencesTheOldHolder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		register(t, b, "dead", b.now)
		register(t, b, "alive", b.now)
		b.create(t, "a")
		b.create(t, "b")
		held := claimAs(t, b, "dead", b.now)
		require.Len(t, held, 2)
		b.create(t, "c")
		other := claimAs(t, b, "alive", b.now)
		require.Len(t, other, 1)

		// Before the threshold nothing is reaped.
		res, err := b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(10 * time.Second), OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Empty(t, res.WorkerIDs)
		require.Zero(t, res.ReleasedTasks)

		// "alive" heartbeats, "dead" does not.
		_, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "alive", ActiveCount: 1, Now: b.at(10 * time.Second)})
		require.NoError(t, err)
		reapAt := b.at(20 * time.Second) // well within the tasks' 30s leases
		res, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: reapAt, OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Equal(t, []string{"dead"}, res.WorkerIDs)
		require.Equal(t, 2, res.ReleasedTasks)

		w, err := b.store.WorkerGet(b.ctx, "dead")
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusOffline, w.Status)
		require.Nil(t, w.DeregisteredAt, "reaped, not deregistered")
		alive, err := b.store.WorkerGet(b.ctx, "alive")
		require.NoError(t, err)
		require.Equal(t, db.WorkerStatusOnline, alive.Status)

		for _, old := range held {
			task := b.task(t, old.InstanceID)
			require.Equal(t, db.TaskStatusPending, task.Status)
			require.Greater(t, task.Version, old.Version, "the version moved on")
			require.Equal(t, old.LeaseLosses+1, task.LeaseLosses, "a reaped lease counts as a lost one")
			require.Empty(t, task.LockOwner)
			require.False(t, task.RunAt.After(reapAt), "due at once")
			require.NotEmpty(t, task.LastError)

			// The old holder comes back: every fenced write fails.
			require.ErrorIs(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(old), LockedUntil: reapAt.Add(lease)}), db.ErrLeaseLost)
			_, err := b.store.Checkpoint(b.ctx, b.checkpoint(old))
			require.ErrorIs(t, err, db.ErrLeaseLost)
			require.ErrorIs(t, b.store.TaskRelease(b.ctx, &db.TaskReleaseParams{Task: ref(old), RunAt: reapAt}), db.ErrLeaseLost)
		}
		require.Equal(t, other[0].Version, b.task(t, "c").Version, "a live worker's task is left alone")

		// Another runner claims the released tasks at once, before their
		// leases would have expired.
		taken := claimAs(t, b, "alive", reapAt)
		require.ElementsMatch(t, []string{"a", "b"}, taskIDs(taken))
		for _, task := range taken {
			// Still fenced: the old holder's version is older than the new one.
			old := held[0]
			if old.InstanceID != task.InstanceID {
				old = held[1]
			}
			_, err := b.store.Checkpoint(b.ctx, b.checkpoint(old))
			require.ErrorIs(t, err, db.ErrLeaseLost)
		}

		// Reaping again finds nothing new.
		res, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(21 * time.Second), OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Empty(t, res.WorkerIDs)

		// The offline worker learns it at its heartbeat, writes nothing, and
		// comes back by registering again.
		hb, err := b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "dead", ActiveCount: 2, Now: b.at(22 * time.Second)})
		require.NoError(t, err)
		require.True(t, hb.Offline)
		// It claimed one more meanwhile: registering again without
		// ReleaseHeld keeps that good lease.
		b.create(t, "d")
		late := claimAs(t, b, "dead", b.at(22*time.Second))
		require.Equal(t, []string{"d"}, taskIDs(late))
		back := registerAs(t, b, "dead", b.at(23*time.Second), false)
		require.Equal(t, db.WorkerStatusOnline, back.Status)
		require.NoError(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(late[0]), LockedUntil: b.at(time.Minute)}))
	})

	t.Run("ReapKeepsToTheWorkersOwnThreshold", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		// "patient" starts no step once 40 s passed since its last
		// heartbeat; "plain" recorded no threshold (an older version).
		patient, err := b.store.WorkerRegister(b.ctx, &db.WorkerRegisterParams{
			ID: "patient", Hostname: "h", PID: 1, MaxConcurrency: 1, Now: b.now, OfflineAfter: 40 * time.Second,
		})
		require.NoError(t, err)
		require.Equal(t, 40*time.Second, patient.OfflineAfter)
		plain := registerAs(t, b, "plain", b.now, true)
		require.Zero(t, plain.OfflineAfter)

		// A reaper with a threshold of 15 s marks the worker that recorded
		// none offline, but not the one that counts on 40 s: its tasks'
		// holder may still start steps.
		res, err := b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(20 * time.Second), OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Equal(t, []string{"plain"}, res.WorkerIDs)
		res, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(40 * time.Second), OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Empty(t, res.WorkerIDs, "at exactly its threshold the worker may still be running")

		// A heartbeat whose answer comes late, written after a newer one,
		// does not move the heartbeat back.
		_, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "patient", Now: b.at(30 * time.Second)})
		require.NoError(t, err)
		_, err = b.store.WorkerHeartbeat(b.ctx, &db.WorkerHeartbeatParams{ID: "patient", Now: b.at(10 * time.Second)})
		require.NoError(t, err)
		got, err := b.store.WorkerGet(b.ctx, "patient")
		require.NoError(t, err)
		requireTime(t, b.at(30*time.Second), got.LastHeartbeatAt)
		res, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(69 * time.Second), OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Empty(t, res.WorkerIDs)
		res, err = b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(71 * time.Second), OfflineAfter: 15 * time.Second})
		require.NoError(t, err)
		require.Equal(t, []string{"patient"}, res.WorkerIDs)
	})

	t.Run("RegisterAgainReleasesTheEarlierLifesTasks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		register(t, b, "w1", b.now)
		b.create(t, "a")
		held := claimAs(t, b, "w1", b.now)
		require.Len(t, held, 1)

		// The process died and restarted under the same id before its lease
		// expired: its task is free at once, and the dead life is fenced out.
		register(t, b, "w1", b.at(time.Second))
		task := b.task(t, "a")
		require.Equal(t, db.TaskStatusPending, task.Status)
		require.Greater(t, task.Version, held[0].Version)
		require.ErrorIs(t, b.store.TaskHeartbeat(b.ctx, &db.TaskHeartbeatParams{Task: ref(held[0]), LockedUntil: b.at(lease)}), db.ErrLeaseLost)
		require.Equal(t, []string{"a"}, taskIDs(claimAs(t, b, "w1", b.at(time.Second))))
	})

	t.Run("RacingReapersReleaseOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		register(t, b, "dead", b.now)
		for _, id := range []string{"a", "b", "c"} {
			b.create(t, id)
		}
		held := claimAs(t, b, "dead", b.now)
		require.Len(t, held, 3)

		const reapers = 6
		results := make(chan db.WorkerReapResult, reapers)
		errs := make(chan error, reapers)
		for range reapers {
			go func() {
				res, err := b.store.WorkerReap(b.ctx, &db.WorkerReapParams{Now: b.at(time.Minute), OfflineAfter: 15 * time.Second})
				errs <- err
				results <- res
			}()
		}
		marked, released := 0, 0
		for range reapers {
			require.NoError(t, <-errs)
			res := <-results
			marked += len(res.WorkerIDs)
			released += res.ReleasedTasks
		}
		require.Equal(t, 1, marked, "one reaper marks the worker offline")
		require.Equal(t, 3, released, "its tasks are released once")
		for _, old := range held {
			task := b.task(t, old.InstanceID)
			require.Equal(t, old.Version+1, task.Version, "one new version")
			require.Equal(t, old.LeaseLosses+1, task.LeaseLosses, "one lease loss")
		}
	})
}
