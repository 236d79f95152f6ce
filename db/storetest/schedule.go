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
)

// createSchedule creates an enabled schedule of the suite's workflow, first
// due at the suite's now plus next.
func (b *testBundle) createSchedule(t *testing.T, id string, next time.Duration) *db.Schedule {
	t.Helper()
	s, err := b.store.ScheduleCreate(b.ctx, &db.ScheduleCreateParams{
		ID: id, WorkflowName: workflowName, Cron: "*/5 * * * *", TimeZone: "UTC",
		Params: json.RawMessage(`{"schedule":"` + id + `"}`), Enabled: true, MaxCatchup: 1,
		NextFireAt: new(b.at(next)), Now: new(b.now),
	})
	require.NoError(t, err)
	return s
}

func (b *testBundle) getSchedule(t *testing.T, id string) *db.Schedule {
	t.Helper()
	s, err := b.store.ScheduleGet(b.ctx, id)
	require.NoError(t, err)
	return s
}

// fire fires a schedule as read, starting one instance per due time.
func (b *testBundle) fire(s *db.Schedule, next time.Time, due ...time.Time) (*db.ScheduleFireResult, error) {
	p := &db.ScheduleFireParams{
		ID: s.ID, Version: s.Version, WorkflowName: s.WorkflowName, NextFireAt: next, Now: b.now,
	}
	for _, d := range due {
		p.Instances = append(p.Instances, db.InstanceCreateItem{
			ID:       fmt.Sprintf("%s-%d", s.ID, d.Unix()),
			Params:   s.Params,
			Metadata: json.RawMessage(`{"trigger":{"type":"cron","scheduledFor":"` + d.Format(time.RFC3339) + `"}}`),
		})
	}
	if len(due) > 0 {
		p.LastFiredAt = new(due[len(due)-1])
	}
	return b.store.ScheduleFire(b.ctx, p)
}

func scheduleIDs(list []*db.Schedule) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = s.ID
	}
	return out
}

func testSchedule(t *testing.T, newStore func(t *testing.T) db.Store) {
	t.Run("CreateAndGet", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		params := "{\"z\": 1,  \"a\" : [1, 2.50]}"
		s, err := b.store.ScheduleCreate(b.ctx, &db.ScheduleCreateParams{
			ID: "nightly", WorkflowName: workflowName, Cron: "0 2 * * *", TimeZone: "Europe/Berlin",
			Params: json.RawMessage(params), Enabled: true, MaxCatchup: 3,
			NextFireAt: new(b.at(time.Hour)), Now: new(b.now),
		})
		require.NoError(t, err)
		require.Equal(t, "nightly", s.ID)
		require.Equal(t, workflowName, s.WorkflowName)
		require.Equal(t, "0 2 * * *", s.Cron)
		require.Equal(t, "Europe/Berlin", s.TimeZone)
		requireJSON(t, params, s.Params)
		require.True(t, s.Enabled)
		require.Equal(t, 3, s.MaxCatchup)
		requireTimePtr(t, b.at(time.Hour), s.NextFireAt)
		require.Nil(t, s.LastFiredAt)
		require.Empty(t, s.LastInstanceID)
		requireTime(t, b.now, s.CreatedAt)
		requireTime(t, b.now, s.UpdatedAt)
		require.GreaterOrEqual(t, s.Version, int64(0))
		require.Equal(t, s, b.getSchedule(t, "nightly"))

		_, err = b.store.ScheduleCreate(b.ctx, &db.ScheduleCreateParams{
			ID: "nightly", WorkflowName: otherName, Cron: "* * * * *", TimeZone: "UTC", MaxCatchup: 1, Now: new(b.now),
		})
		require.ErrorIs(t, err, db.ErrAlreadyExists)

		_, err = b.store.ScheduleGet(b.ctx, "missing")
		require.ErrorIs(t, err, db.ErrNotFound)

		// A disabled schedule has no next fire time, and no params is NULL.
		off, err := b.store.ScheduleCreate(b.ctx, &db.ScheduleCreateParams{
			ID: "off", WorkflowName: workflowName, Cron: "* * * * *", TimeZone: "UTC", MaxCatchup: 1,
		})
		require.NoError(t, err)
		require.False(t, off.Enabled)
		require.Nil(t, off.NextFireAt)
		require.Nil(t, off.Params)
		require.False(t, off.CreatedAt.IsZero(), "database clock used")
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		for _, id := range []string{"c", "a", "e", "b", "d"} {
			b.createSchedule(t, id, time.Hour)
		}
		_, err := b.store.ScheduleCreate(b.ctx, &db.ScheduleCreateParams{
			ID: "other", WorkflowName: otherName, Cron: "* * * * *", TimeZone: "UTC", MaxCatchup: 1, Now: new(b.now),
		})
		require.NoError(t, err)

		all, err := b.store.ScheduleList(b.ctx, &db.ScheduleListParams{})
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "c", "d", "e", "other"}, scheduleIDs(all))

		page, err := b.store.ScheduleList(b.ctx, &db.ScheduleListParams{WorkflowName: workflowName, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, scheduleIDs(page))
		page, err = b.store.ScheduleList(b.ctx, &db.ScheduleListParams{WorkflowName: workflowName, Limit: 2, AfterID: "b"})
		require.NoError(t, err)
		require.Equal(t, []string{"c", "d"}, scheduleIDs(page))
		page, err = b.store.ScheduleList(b.ctx, &db.ScheduleListParams{WorkflowName: workflowName, Limit: 2, AfterID: "d"})
		require.NoError(t, err)
		require.Equal(t, []string{"e"}, scheduleIDs(page))
		page, err = b.store.ScheduleList(b.ctx, &db.ScheduleListParams{WorkflowName: otherName})
		require.NoError(t, err)
		require.Equal(t, []string{"other"}, scheduleIDs(page))
		page, err = b.store.ScheduleList(b.ctx, &db.ScheduleListParams{WorkflowName: "nobody"})
		require.NoError(t, err)
		require.Empty(t, page)
	})

	t.Run("UpdateIsFencedByVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", time.Hour)
		later := b.at(time.Minute)
		p := &db.ScheduleUpdateParams{
			ID: "s", Version: s.Version, WorkflowName: otherName, Cron: "0 * * * *", TimeZone: "America/New_York",
			Params: json.RawMessage(`[1, 2]`), Enabled: false, MaxCatchup: 5, Now: &later,
		}
		u, err := b.store.ScheduleUpdate(b.ctx, p)
		require.NoError(t, err)
		require.Equal(t, otherName, u.WorkflowName)
		require.Equal(t, "0 * * * *", u.Cron)
		require.Equal(t, "America/New_York", u.TimeZone)
		requireJSON(t, `[1, 2]`, u.Params)
		require.False(t, u.Enabled)
		require.Nil(t, u.NextFireAt)
		require.Equal(t, 5, u.MaxCatchup)
		requireTime(t, b.now, u.CreatedAt)
		requireTime(t, later, u.UpdatedAt)
		require.Equal(t, s.Version+1, u.Version)
		require.Equal(t, u, b.getSchedule(t, "s"))

		// The version read before is stale now.
		p.Enabled, p.NextFireAt = true, new(b.at(2*time.Hour))
		_, err = b.store.ScheduleUpdate(b.ctx, p)
		require.ErrorIs(t, err, db.ErrScheduleChanged)
		require.Equal(t, u, b.getSchedule(t, "s"), "a stale update changes nothing")

		p.Version = u.Version
		u, err = b.store.ScheduleUpdate(b.ctx, p)
		require.NoError(t, err)
		require.True(t, u.Enabled)
		requireTimePtr(t, b.at(2*time.Hour), u.NextFireAt)

		p.ID = "missing"
		_, err = b.store.ScheduleUpdate(b.ctx, p)
		require.ErrorIs(t, err, db.ErrNotFound)
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", 0)
		_, err := b.fire(s, b.at(5*time.Minute), b.now)
		require.NoError(t, err)

		require.NoError(t, b.store.ScheduleDelete(b.ctx, "s"))
		_, err = b.store.ScheduleGet(b.ctx, "s")
		require.ErrorIs(t, err, db.ErrNotFound)
		require.ErrorIs(t, b.store.ScheduleDelete(b.ctx, "s"), db.ErrNotFound)
		b.get(t, fmt.Sprintf("s-%d", b.now.Unix())) // the instance it started stays
	})

	t.Run("ListDue", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		b.createSchedule(t, "later", time.Minute)
		b.createSchedule(t, "b", -time.Minute)
		b.createSchedule(t, "a", -time.Minute)
		b.createSchedule(t, "now", 0)
		b.createSchedule(t, "oldest", -time.Hour)
		off := b.createSchedule(t, "off", -2*time.Hour)
		_, err := b.store.ScheduleUpdate(b.ctx, &db.ScheduleUpdateParams{
			ID: off.ID, Version: off.Version, WorkflowName: off.WorkflowName, Cron: off.Cron, TimeZone: off.TimeZone,
			MaxCatchup: 1, Enabled: false, Now: new(b.now),
		})
		require.NoError(t, err)

		due, err := b.store.ScheduleListDue(b.ctx, &db.ScheduleListDueParams{Now: b.now, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []string{"oldest", "a", "b", "now"}, scheduleIDs(due), "enabled and due, the longest due first")

		due, err = b.store.ScheduleListDue(b.ctx, &db.ScheduleListDueParams{Now: b.now, Limit: 2})
		require.NoError(t, err)
		require.Equal(t, []string{"oldest", "a"}, scheduleIDs(due))

		due, err = b.store.ScheduleListDue(b.ctx, &db.ScheduleListDueParams{Now: b.at(time.Minute), Limit: 10})
		require.NoError(t, err)
		require.Len(t, due, 5, "the fake now moves the query's notion of time")
	})

	t.Run("FireCreatesInstancesAndAdvances", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", -10*time.Minute)
		first, second := b.at(-10*time.Minute), b.at(-5*time.Minute)
		res, err := b.fire(s, b.at(5*time.Minute), first, second)
		require.NoError(t, err)

		want := []string{fmt.Sprintf("s-%d", first.Unix()), fmt.Sprintf("s-%d", second.Unix())}
		require.Equal(t, want, ids(res.Created))
		for _, inst := range res.Created {
			require.Equal(t, dftype.StatusQueued, inst.Status)
			requireJSON(t, `{"schedule":"s"}`, inst.Params)
			require.Contains(t, string(inst.Metadata), `"type":"cron"`)
			requireTime(t, b.now, inst.CreatedAt)
			task := b.task(t, inst.ID)
			require.Equal(t, db.TaskKindRun, task.Kind)
			requireTime(t, b.now, task.RunAt)
		}
		require.Equal(t, res.Created[1], b.get(t, want[1]))

		after := res.Schedule
		requireTimePtr(t, b.at(5*time.Minute), after.NextFireAt)
		requireTimePtr(t, second, after.LastFiredAt)
		require.Equal(t, want[1], after.LastInstanceID)
		require.Equal(t, s.Version+1, after.Version)
		requireTime(t, b.now, after.UpdatedAt)
		require.Equal(t, after, b.getSchedule(t, "s"))
		require.Equal(t, want, taskIDs(b.claimAt(t, b.now, 10)), "the tasks are due now")

		due, err := b.store.ScheduleListDue(b.ctx, &db.ScheduleListDueParams{Now: b.now, Limit: 10})
		require.NoError(t, err)
		require.Empty(t, due)
	})

	t.Run("FireIsFencedByVersion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", 0)
		_, err := b.fire(s, b.at(5*time.Minute), b.now)
		require.NoError(t, err)

		// A second scheduler that read the same version fires nothing.
		_, err = b.fire(s, b.at(5*time.Minute), b.now, b.at(time.Second))
		require.ErrorIs(t, err, db.ErrScheduleChanged)
		_, err = b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: fmt.Sprintf("s-%d", b.at(time.Second).Unix())})
		require.ErrorIs(t, err, db.ErrNotFound, "a fenced-out firing creates nothing")
		requireTimePtr(t, b.at(5*time.Minute), b.getSchedule(t, "s").NextFireAt)

		// Disabled and deleted schedules do not fire either.
		cur := b.getSchedule(t, "s")
		off, err := b.store.ScheduleUpdate(b.ctx, &db.ScheduleUpdateParams{
			ID: cur.ID, Version: cur.Version, WorkflowName: cur.WorkflowName, Cron: cur.Cron, TimeZone: cur.TimeZone,
			MaxCatchup: 1, Enabled: false, Now: new(b.now),
		})
		require.NoError(t, err)
		_, err = b.fire(off, b.at(10*time.Minute), b.at(5*time.Minute))
		require.ErrorIs(t, err, db.ErrScheduleChanged)
		require.NoError(t, b.store.ScheduleDelete(b.ctx, "s"))
		_, err = b.fire(off, b.at(10*time.Minute), b.at(5*time.Minute))
		require.ErrorIs(t, err, db.ErrScheduleChanged)
	})

	t.Run("FireOfADeletedScheduleDoesNotMatchItsSuccessor", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		old := b.createSchedule(t, "s", 0)
		require.NoError(t, b.store.ScheduleDelete(b.ctx, "s"))
		b.createSchedule(t, "s", time.Hour)
		_, err := b.fire(old, b.at(5*time.Minute), b.now)
		require.ErrorIs(t, err, db.ErrScheduleChanged, "versions start at random values")
		requireTimePtr(t, b.at(time.Hour), b.getSchedule(t, "s").NextFireAt)
	})

	// A firing whose id is taken creates nothing and does not advance: the
	// due time never vanishes unseen, and the scheduler fires it again with
	// other ids.
	t.Run("FireOfATakenIDChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", 0)
		existing := fmt.Sprintf("s-%d", b.at(5*time.Minute).Unix())
		b.create(t, existing)
		_, err := b.fire(s, b.at(10*time.Minute), b.now, b.at(5*time.Minute))
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		requireJSON(t, `{"id":"`+existing+`"}`, b.get(t, existing).Params, "the existing instance is left alone")
		_, err = b.store.InstanceGet(b.ctx, db.InstanceRef{WorkflowName: workflowName, ID: fmt.Sprintf("s-%d", b.now.Unix())})
		require.ErrorIs(t, err, db.ErrNotFound, "the free id of the same firing was not created either")
		after := b.getSchedule(t, "s")
		require.Equal(t, s.Version, after.Version, "the schedule did not advance")
		requireTimePtr(t, b.now, after.NextFireAt)
		require.Nil(t, after.LastFiredAt)

		// A firing with no due times only advances.
		res, err := b.fire(after, b.at(15*time.Minute))
		require.NoError(t, err)
		require.Empty(t, res.Created)
		requireTimePtr(t, b.at(15*time.Minute), res.Schedule.NextFireAt)
		require.Nil(t, res.Schedule.LastFiredAt, "kept")
		require.Empty(t, res.Schedule.LastInstanceID, "kept")
	})

	t.Run("FireRecordsHooks", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", 0)
		_, err := b.store.ScheduleFire(b.ctx, &db.ScheduleFireParams{
			ID: s.ID, Version: s.Version, WorkflowName: workflowName, NextFireAt: b.at(5 * time.Minute), Now: b.now,
			Instances:   []db.InstanceCreateItem{{ID: "s-1"}, {ID: "s-2"}},
			LastFiredAt: new(b.now), RecordHooks: true,
		})
		require.NoError(t, err)
		require.Equal(t, []string{"create s-1 0s", "create s-2 0s"}, b.recorded(t))
	})

	t.Run("ConcurrentFiringsFireOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t, newStore)
		s := b.createSchedule(t, "s", 0)
		const schedulers = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			won     int
			created []string
			errs    = make(chan error, schedulers)
		)
		for range schedulers {
			wg.Go(func() {
				res, err := b.fire(s, b.at(5*time.Minute), b.now)
				if errors.Is(err, db.ErrScheduleChanged) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				defer mu.Unlock()
				won++
				created = append(created, ids(res.Created)...)
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, 1, won, "exactly one firing commits")
		require.Equal(t, []string{fmt.Sprintf("s-%d", b.now.Unix())}, created)
		require.Equal(t, s.Version+1, b.getSchedule(t, "s").Version)
	})
}
