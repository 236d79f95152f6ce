package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// start is where the fake clock starts: 09:00:30 UTC, between two due times
// of a schedule of every five minutes.
var start = time.Date(2026, 1, 1, 9, 0, 30, 0, time.UTC)

type report struct {
	Schedule string `json:"schedule"`
}

type testBundle struct {
	h     *testharness.Harness
	sched *schedule.Scheduler
	ctx   context.Context
}

// setup returns a harness on the backend with a "report" workflow and a
// scheduler on its store and fake clock.
func setup(t *testing.T, b testharness.Backend) *testBundle {
	t.Helper()
	h := testharness.New(t, testharness.WithBackend(b), testharness.WithStart(start))
	workflow.MustRegister(h.Registry, "report", func(ctx context.Context, ev workflow.Event[report], step workflow.Step) (string, error) {
		return workflow.Do(step, "render", func(ctx context.Context) (string, error) {
			return "report of " + ev.Payload.Schedule, nil
		})
	})
	return &testBundle{h: h, sched: newScheduler(t, h), ctx: h.Context()}
}

func newScheduler(t *testing.T, h *testharness.Harness) *schedule.Scheduler {
	t.Helper()
	s, err := schedule.New(&schedule.Config{
		Store: h.Store, Registry: h.Registry, Clock: h.Clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	return s
}

func (b *testBundle) create(t *testing.T, req schedule.CreateRequest) *schedule.Info {
	t.Helper()
	req.WorkflowName = "report"
	if req.Params == nil {
		req.Params = json.RawMessage(`{"schedule":"` + req.ID + `"}`)
	}
	info, err := b.sched.Create(b.ctx, req)
	require.NoError(t, err)
	return info
}

func (b *testBundle) fireDue(t *testing.T) *schedule.FireResult {
	t.Helper()
	res, err := b.sched.FireDue(b.ctx)
	require.NoError(t, err)
	return res
}

// instanceIDs lists the ids of every instance of the report workflow
// without their random ends (schedule.InstanceIDPrefix), sorted.
func (b *testBundle) instanceIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	p := client.ListParams{WorkflowName: "report", PageSize: 1000}
	for {
		page, err := b.h.Client.List(b.ctx, p)
		require.NoError(t, err)
		for _, inst := range page.Instances {
			ids = append(ids, prefixOf(t, inst.ID))
		}
		if page.NextCursor == "" {
			break
		}
		p.Cursor = page.NextCursor
	}
	slices.Sort(ids)
	return ids
}

// randomEndRE is the random end of the id of an instance a schedule started.
var randomEndRE = regexp.MustCompile(`-[0-9a-f]{16}$`)

// prefixOf is id, the id of an instance a schedule started, without its
// random end: schedule.InstanceIDPrefix of its schedule and due time.
func prefixOf(t *testing.T, id string) string {
	t.Helper()
	loc := randomEndRE.FindStringIndex(id)
	require.NotNil(t, loc, "%s does not end in 16 random hex digits", id)
	return id[:loc[0]]
}

// at returns 09:00 UTC on the start day plus d.
func at(d time.Duration) time.Time { return time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).Add(d) }

// ids are the prefixes of the ids of the instances a schedule starts at
// times.
func ids(scheduleID string, times ...time.Time) []string {
	out := make([]string, len(times))
	for i, t := range times {
		out[i] = schedule.InstanceIDPrefix(scheduleID, t)
	}
	return out
}

func TestFireOncePerDueTimeWithRacingSchedulers(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, schedule.CreateRequest{ID: "every5", Cron: "*/5 * * * *"})
		b.create(t, schedule.CreateRequest{ID: "hourly", Cron: "0 * * * *"})
		schedulers := []*schedule.Scheduler{b.sched, newScheduler(t, b.h), newScheduler(t, b.h)}

		var (
			mu      sync.Mutex
			started []string
			want    []string
		)
		// Two hours in steps of one minute; at every step the three
		// schedulers fire at once, several times over.
		for minute := 1; minute <= 120; minute++ {
			b.h.Advance(time.Minute)
			if minute%5 == 0 {
				want = append(want, schedule.InstanceIDPrefix("every5", at(time.Duration(minute)*time.Minute)))
			}
			if minute%60 == 0 {
				want = append(want, schedule.InstanceIDPrefix("hourly", at(time.Duration(minute)*time.Minute)))
			}
			var wg sync.WaitGroup
			for _, s := range schedulers {
				for range 2 {
					wg.Go(func() {
						res, err := s.FireDue(b.ctx)
						if err != nil {
							t.Errorf("FireDue: %v", err)
							return
						}
						mu.Lock()
						defer mu.Unlock()
						for _, st := range res.Started {
							want := schedule.InstanceIDPrefix(st.ScheduleID, st.ScheduledFor)
							if !strings.HasPrefix(st.InstanceID, want+"-") || !randomEndRE.MatchString(st.InstanceID) {
								t.Errorf("started %s for %s, want %s and a random end", st.InstanceID, st.ScheduledFor, want)
							}
							started = append(started, want)
						}
					})
				}
			}
			wg.Wait()
		}
		slices.Sort(started)
		slices.Sort(want)
		require.Len(t, want, 24+2)
		require.Equal(t, want, started, "every due time started exactly once, across all schedulers")
		require.Equal(t, want, b.instanceIDs(t))

		info, err := b.sched.Get(b.ctx, "every5")
		require.NoError(t, err)
		require.Equal(t, at(2*time.Hour+5*time.Minute), *info.NextFireAt)
		require.Equal(t, at(2*time.Hour), *info.LastFiredAt)
		require.Equal(t, schedule.InstanceIDPrefix("every5", at(2*time.Hour)), prefixOf(t, info.LastInstanceID))
	})
}

func TestFiredInstancesRecordProvenanceAndRun(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	b.create(t, schedule.CreateRequest{ID: "nightly", Cron: "0 2 * * *", TimeZone: "Europe/Berlin"})

	b.h.Advance(16 * time.Hour) // 01:00 UTC on 2 January is 02:00 in Berlin
	b.h.Advance(30 * time.Second)
	res := b.fireDue(t)
	due := time.Date(2026, 1, 2, 1, 0, 0, 0, time.UTC)
	require.Len(t, res.Started, 1)
	id := res.Started[0].InstanceID
	require.Equal(t, "nightly-20260102T010000Z", prefixOf(t, id))
	require.Equal(t, []schedule.Started{{ScheduleID: "nightly", WorkflowName: "report", InstanceID: id, ScheduledFor: due}}, res.Started)
	require.Equal(t, 1, res.Fired)

	inst, err := b.h.Client.Get(b.ctx, "report", id)
	require.NoError(t, err)
	require.JSONEq(t, `{"schedule":"nightly"}`, string(inst.Params))
	prov, err := dftype.ProvenanceOf(inst.Metadata)
	require.NoError(t, err)
	require.Equal(t, &dftype.Provenance{
		Type: "cron", Source: "schedule nightly", ScheduledFor: &due, ReceivedAt: b.h.Now().UTC(),
	}, prov)
	require.JSONEq(t, fmt.Sprintf(`{"trigger":{"type":"cron","source":"schedule nightly","scheduledFor":"2026-01-02T01:00:00Z","receivedAt":%q}}`,
		b.h.Now().UTC().Format(time.RFC3339Nano)), string(inst.Metadata))

	b.h.RunUntilIdle()
	var out string
	b.h.RequireOutput("report", id, &out)
	require.Equal(t, "report of nightly", out)
	require.Empty(t, b.fireDue(t).Started, "nothing more is due")
}

func TestCatchUpIsCappedAfterAnOutage(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, schedule.CreateRequest{ID: "three", Cron: "*/5 * * * *", MaxCatchup: 3})
		b.create(t, schedule.CreateRequest{ID: "one", Cron: "*/5 * * * *"})

		// Ten hours pass with no scheduler running: 120 due times each.
		b.h.Advance(10 * time.Hour)
		res := b.fireDue(t)
		require.Equal(t, 2, res.Fired)
		last := at(10 * time.Hour)
		want := append(ids("one", last), ids("three", last.Add(-10*time.Minute), last.Add(-5*time.Minute), last)...)
		slices.Sort(want)
		require.Equal(t, want, b.instanceIDs(t), "the most recent maxCatchup due times only")

		for _, id := range []string{"one", "three"} {
			info, err := b.sched.Get(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, last.Add(5*time.Minute), *info.NextFireAt, "the next fire time is in the future again")
			require.Equal(t, last, *info.LastFiredAt)
		}

		// Back to normal: one due time, one instance.
		b.h.Advance(5 * time.Minute)
		res = b.fireDue(t)
		require.ElementsMatch(t, append(ids("one", last.Add(5*time.Minute)), ids("three", last.Add(5*time.Minute))...),
			startedIDs(t, res))
		require.Len(t, b.instanceIDs(t), 6)
	})
}

// startedIDs are the prefixes of the ids of the instances res started.
func startedIDs(t *testing.T, res *schedule.FireResult) []string {
	out := make([]string, len(res.Started))
	for i, s := range res.Started {
		out[i] = prefixOf(t, s.InstanceID)
	}
	return out
}

func TestEnableDisable(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	b.create(t, schedule.CreateRequest{ID: "s", Cron: "*/5 * * * *", MaxCatchup: 10})

	off, err := b.sched.Disable(b.ctx, "s")
	require.NoError(t, err)
	require.False(t, off.Enabled)
	require.Nil(t, off.NextFireAt)
	b.h.Advance(time.Hour)
	require.Empty(t, b.fireDue(t).Started, "a disabled schedule does not fire")

	again, err := b.sched.Disable(b.ctx, "s")
	require.NoError(t, err)
	require.False(t, again.Enabled)

	on, err := b.sched.Enable(b.ctx, "s")
	require.NoError(t, err)
	require.True(t, on.Enabled)
	require.Equal(t, at(time.Hour+5*time.Minute), *on.NextFireAt, "the first due time after now")
	require.Empty(t, b.fireDue(t).Started, "times that passed while disabled do not fire")
	b.h.Advance(5 * time.Minute)
	require.Equal(t, ids("s", at(time.Hour+5*time.Minute)), startedIDs(t, b.fireDue(t)))

	// Enabling an enabled schedule keeps its next fire time.
	same, err := b.sched.Enable(b.ctx, "s")
	require.NoError(t, err)
	require.Equal(t, at(time.Hour+10*time.Minute), *same.NextFireAt)

	// Created disabled.
	info := b.create(t, schedule.CreateRequest{ID: "paused", Cron: "* * * * *", Enabled: new(false)})
	require.False(t, info.Enabled)
	require.Nil(t, info.NextFireAt)
}

func TestStartedSchedulerFiresInTheBackground(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	b.create(t, schedule.CreateRequest{ID: "s", Cron: "*/5 * * * *"})
	s, err := schedule.New(&schedule.Config{
		Store: b.h.Store, Registry: b.h.Registry, Clock: b.h.Clock, PollInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	require.NoError(t, s.Start(b.ctx))
	require.Error(t, s.Start(b.ctx), "started twice")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})

	want := schedule.InstanceIDPrefix("s", at(5*time.Minute))
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		// Each step moves the fake clock past a poll, which wakes the loop.
		b.h.Advance(time.Second)
		if len(b.instanceIDs(t)) > 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			require.FailNow(t, "the started scheduler did not fire within 10 s")
		}
	}
	require.Equal(t, []string{want}, b.instanceIDs(t))
}

func TestManagement(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		created := b.create(t, schedule.CreateRequest{ID: "s", Cron: " 0 9 * * MON-FRI ", TimeZone: "America/New_York"})
		require.Equal(t, "s", created.ID)
		require.Equal(t, "report", created.WorkflowName)
		require.Equal(t, "0 9 * * MON-FRI", created.Cron)
		require.Equal(t, "America/New_York", created.TimeZone)
		require.JSONEq(t, `{"schedule":"s"}`, string(created.Params))
		require.True(t, created.Enabled)
		require.Equal(t, 1, created.MaxCatchup)
		// 1 January 2026 is a Thursday; 09:00 in New York is 14:00 UTC.
		require.Equal(t, time.Date(2026, 1, 1, 14, 0, 0, 0, time.UTC), *created.NextFireAt)
		require.Nil(t, created.LastFiredAt)

		got, err := b.sched.Get(b.ctx, "s")
		require.NoError(t, err)
		require.Equal(t, created, got)

		t.Run("Update", func(t *testing.T) {
			b.h.Advance(time.Minute)
			u, err := b.sched.Update(b.ctx, "s", schedule.UpdateRequest{MaxCatchup: new(4), Params: json.RawMessage(`{"x":1}`)})
			require.NoError(t, err)
			require.Equal(t, 4, u.MaxCatchup)
			require.JSONEq(t, `{"x":1}`, string(u.Params))
			require.Equal(t, created.NextFireAt, u.NextFireAt, "same rule, same next fire time")
			require.Equal(t, b.h.Now().UTC(), u.UpdatedAt)

			u, err = b.sched.Update(b.ctx, "s", schedule.UpdateRequest{Cron: new("30 10 * * *"), TimeZone: new("Asia/Tokyo")})
			require.NoError(t, err)
			require.Equal(t, "30 10 * * *", u.Cron)
			require.Equal(t, "Asia/Tokyo", u.TimeZone)
			require.Equal(t, time.Date(2026, 1, 2, 1, 30, 0, 0, time.UTC), *u.NextFireAt, "recomputed under the new rule")
			require.Equal(t, 4, u.MaxCatchup, "left alone")

			_, err = b.sched.Update(b.ctx, "s", schedule.UpdateRequest{Cron: new("nope")})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
			_, err = b.sched.Update(b.ctx, "s", schedule.UpdateRequest{WorkflowName: new("missing")})
			require.ErrorIs(t, err, workflow.ErrWorkflowNotFound)
			_, err = b.sched.Update(b.ctx, "nope", schedule.UpdateRequest{})
			require.ErrorIs(t, err, schedule.ErrNotFound)
		})

		t.Run("List", func(t *testing.T) {
			for _, id := range []string{"b", "a", "c"} {
				b.create(t, schedule.CreateRequest{ID: id, Cron: "@daily"})
			}
			page, err := b.sched.List(b.ctx, schedule.ListParams{PageSize: 2})
			require.NoError(t, err)
			require.Equal(t, []string{"a", "b"}, scheduleIDs(page))
			require.Equal(t, "b", page.NextCursor)
			page, err = b.sched.List(b.ctx, schedule.ListParams{PageSize: 2, Cursor: page.NextCursor})
			require.NoError(t, err)
			require.Equal(t, []string{"c", "s"}, scheduleIDs(page))
			require.Empty(t, page.NextCursor)
			page, err = b.sched.List(b.ctx, schedule.ListParams{WorkflowName: "report"})
			require.NoError(t, err)
			require.Len(t, page.Schedules, 4)
			_, err = b.sched.List(b.ctx, schedule.ListParams{PageSize: 1001})
			require.ErrorIs(t, err, workflow.ErrInvalidRequest)
		})

		t.Run("Delete", func(t *testing.T) {
			require.NoError(t, b.sched.Delete(b.ctx, "a"))
			_, err := b.sched.Get(b.ctx, "a")
			require.ErrorIs(t, err, schedule.ErrNotFound)
			require.ErrorIs(t, b.sched.Delete(b.ctx, "a"), schedule.ErrNotFound)
		})
	})
}

func scheduleIDs(res *schedule.ListResult) []string {
	out := make([]string, len(res.Schedules))
	for i, s := range res.Schedules {
		out[i] = s.ID
	}
	return out
}

func TestCreateRejects(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	b.create(t, schedule.CreateRequest{ID: "taken", Cron: "* * * * *"})
	cases := []struct {
		name string
		req  schedule.CreateRequest
		err  error
		msg  string
	}{
		{"Taken", schedule.CreateRequest{ID: "taken", WorkflowName: "report", Cron: "* * * * *"}, schedule.ErrAlreadyExists, `"taken"`},
		{"BadID", schedule.CreateRequest{ID: "no spaces", WorkflowName: "report", Cron: "* * * * *"}, workflow.ErrInvalidRequest, "schedule id"},
		{"NoID", schedule.CreateRequest{WorkflowName: "report", Cron: "* * * * *"}, workflow.ErrInvalidRequest, "schedule id"},
		{"UnknownWorkflow", schedule.CreateRequest{ID: "x", WorkflowName: "missing", Cron: "* * * * *"}, workflow.ErrWorkflowNotFound, `"missing"`},
		{"BadWorkflowName", schedule.CreateRequest{ID: "x", WorkflowName: "", Cron: "* * * * *"}, workflow.ErrInvalidWorkflowName, ""},
		{"BadCron", schedule.CreateRequest{ID: "x", WorkflowName: "report", Cron: "61 * * * *"}, workflow.ErrInvalidRequest, "61 * * * *"},
		{"NoCron", schedule.CreateRequest{ID: "x", WorkflowName: "report"}, workflow.ErrInvalidRequest, "empty cron expression"},
		{"BadZone", schedule.CreateRequest{ID: "x", WorkflowName: "report", Cron: "* * * * *", TimeZone: "Europe/Atlantis"}, workflow.ErrInvalidRequest, "unknown time zone"},
		{"BadParams", schedule.CreateRequest{ID: "x", WorkflowName: "report", Cron: "* * * * *", Params: json.RawMessage(`{`)}, workflow.ErrInvalidRequest, "params is not valid JSON"},
		{"CatchupTooBig", schedule.CreateRequest{ID: "x", WorkflowName: "report", Cron: "* * * * *", MaxCatchup: 1001}, workflow.ErrInvalidRequest, "maxCatchup"},
		{"CatchupNegative", schedule.CreateRequest{ID: "x", WorkflowName: "report", Cron: "* * * * *", MaxCatchup: -1}, workflow.ErrInvalidRequest, "maxCatchup"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.sched.Create(b.ctx, tc.req)
			require.ErrorIs(t, err, tc.err)
			require.ErrorContains(t, err, tc.msg)
		})
	}
	_, err := b.sched.Get(b.ctx, "x")
	require.ErrorIs(t, err, schedule.ErrNotFound, "nothing was stored")
}

func TestResolveFuncRegistersUnknownWorkflows(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	var asked []string
	s, err := schedule.New(&schedule.Config{
		Store: b.h.Store, Registry: b.h.Registry, Clock: b.h.Clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ResolveFunc: func(_ context.Context, name string) error {
			asked = append(asked, name)
			if name == "late" {
				_, err := workflow.Register(b.h.Registry, "late", func(context.Context, workflow.Event[report], workflow.Step) (string, error) { return "", nil })
				return err
			}
			return nil
		},
	})
	require.NoError(t, err)
	_, err = s.Create(b.ctx, schedule.CreateRequest{ID: "a", WorkflowName: "report", Cron: "@daily"})
	require.NoError(t, err)
	_, err = s.Create(b.ctx, schedule.CreateRequest{ID: "b", WorkflowName: "late", Cron: "@daily"})
	require.NoError(t, err)
	_, err = s.Create(b.ctx, schedule.CreateRequest{ID: "c", WorkflowName: "never", Cron: "@daily"})
	require.ErrorIs(t, err, workflow.ErrWorkflowNotFound)
	require.Equal(t, []string{"late", "never"}, asked, "asked only for names the registry does not know")
}

func TestConfig(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	_, err := schedule.New(nil)
	require.Error(t, err)
	_, err = schedule.New(&schedule.Config{Registry: h.Registry})
	require.ErrorContains(t, err, "Store is required")
	_, err = schedule.New(&schedule.Config{Store: h.Store})
	require.ErrorContains(t, err, "Registry is required")
	_, err = schedule.New(&schedule.Config{Store: h.Store, Registry: h.Registry, PollInterval: -time.Second})
	require.ErrorContains(t, err, "PollInterval")
}
