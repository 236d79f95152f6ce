package schedule_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// The id of the instance a firing starts cannot be worked out beforehand:
// an instance created first, in another namespace, with the id a schedule
// and due time alone give (what the ids once were) neither stops the
// firing nor is touched by it.
func TestFiringIDCannotBeTakenFirst(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, schedule.CreateRequest{ID: "s", Cron: "*/5 * * * *"})
		squatter := b.h.Client.Namespace("squatter")
		_, err := squatter.Create(b.ctx, "report", dftype.CreateRequest{ID: "s-20260101T090500Z"})
		require.NoError(t, err)

		b.h.Advance(5 * time.Minute)
		res := b.fireDue(t)
		require.Len(t, res.Started, 1, "the due time started its instance")
		require.NotEqual(t, "s-20260101T090500Z", res.Started[0].InstanceID)
		inst, err := b.h.Client.Get(b.ctx, "report", res.Started[0].InstanceID)
		require.NoError(t, err)
		require.JSONEq(t, `{"schedule":"s"}`, string(inst.Params))
		taken, err := squatter.Get(b.ctx, "report", "s-20260101T090500Z")
		require.NoError(t, err)
		require.JSONEq(t, `null`, string(taken.Params), "the squatter's instance is left alone")
	})
}

// takesIDs is a store whose ScheduleFire first creates, for the first
// times calls, an instance with the id the firing is about to use: an id
// taken by someone else between the draw and the commit.
type takesIDs struct {
	db.Store
	times int32
	calls atomic.Int32
	taken []string
}

func (s *takesIDs) ScheduleFire(ctx context.Context, p *db.ScheduleFireParams) (*db.ScheduleFireResult, error) {
	if s.calls.Add(1) <= s.times && len(p.Instances) > 0 {
		id := p.Instances[0].ID
		if _, err := s.InstanceCreate(ctx, &db.InstanceCreateParams{WorkflowName: p.WorkflowName, ID: id, Namespace: "squatter"}); err != nil {
			return nil, err
		}
		s.taken = append(s.taken, id)
	}
	return s.Store.ScheduleFire(ctx, p)
}

// A firing whose id is taken changes nothing and is tried again with new
// ids, with a warning; when every try finds its id taken, FireDue fails and
// the schedule stays due, so the next call fires it: a due time never
// passes without its instance unseen.
func TestFiringWhoseIDIsTakenIsNotLost(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, schedule.CreateRequest{ID: "s", Cron: "*/5 * * * *"})
		newSched := func(store db.Store, logs *bytes.Buffer) *schedule.Scheduler {
			s, err := schedule.New(&schedule.Config{
				Store: store, Registry: b.h.Registry, Clock: b.h.Clock,
				Logger: slog.New(slog.NewTextHandler(logs, nil)),
			})
			require.NoError(t, err)
			return s
		}

		// Taken once: the second try starts the instance.
		var logs bytes.Buffer
		store := &takesIDs{Store: b.h.Store, times: 1}
		b.h.Advance(5 * time.Minute)
		res, err := newSched(store, &logs).FireDue(b.ctx)
		require.NoError(t, err)
		require.Len(t, res.Started, 1)
		require.Len(t, store.taken, 1)
		require.NotEqual(t, store.taken[0], res.Started[0].InstanceID)
		require.Equal(t, schedule.InstanceIDPrefix("s", at(5*time.Minute)), prefixOf(t, res.Started[0].InstanceID))
		require.Contains(t, logs.String(), "an instance id of the firing was taken already")
		inst, err := b.h.Client.Get(b.ctx, "report", res.Started[0].InstanceID)
		require.NoError(t, err)
		require.Equal(t, workflow.DefaultNamespace, inst.Namespace)

		// Taken at every try: the firing fails, nothing advances, and the
		// next call fires the due time.
		store = &takesIDs{Store: b.h.Store, times: 100}
		b.h.Advance(5 * time.Minute)
		before, err := b.sched.Get(b.ctx, "s")
		require.NoError(t, err)
		res, err = newSched(store, &logs).FireDue(b.ctx)
		require.ErrorIs(t, err, db.ErrAlreadyExists)
		require.Empty(t, res.Started)
		after, err := b.sched.Get(b.ctx, "s")
		require.NoError(t, err)
		require.Equal(t, before.NextFireAt, after.NextFireAt, "the schedule is still due")
		require.Equal(t, before.LastInstanceID, after.LastInstanceID)

		res = b.fireDue(t)
		require.Len(t, res.Started, 1)
		require.Equal(t, at(10*time.Minute), res.Started[0].ScheduledFor)
	})
}
