package httpapi_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
)

// withSchedules serves the schedule routes over a scheduler on the
// harness's store and clock.
func withSchedules(t *testing.T, sched **schedule.Scheduler) func(*httpapi.Config, *testharness.Harness) {
	return func(c *httpapi.Config, h *testharness.Harness) {
		s, err := schedule.New(&schedule.Config{
			Store: h.Store, Registry: h.Registry, Clock: h.Clock,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		require.NoError(t, err)
		c.Schedules = s
		if sched != nil {
			*sched = s
		}
	}
}

func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	var sched *schedule.Scheduler
	b := setup(t, "", withSchedules(t, &sched))
	now := b.h.Now().UTC() // 2026-01-01 09:00 UTC

	r := b.call(t, "POST", "/api/schedules", `{"id":"morning","workflowName":"greet","cron":"0 9 * * *","timeZone":"Europe/Berlin","params":{"name":"Ada"},"maxCatchup":2}`)
	var created schedule.Info
	r.requireOK(t, http.StatusCreated, &created)
	require.Equal(t, "/api/schedules/morning", r.header.Get("Location"))
	require.Equal(t, "morning", created.ID)
	require.Equal(t, "greet", created.WorkflowName)
	require.Equal(t, "0 9 * * *", created.Cron)
	require.Equal(t, "Europe/Berlin", created.TimeZone)
	require.JSONEq(t, `{"name":"Ada"}`, string(created.Params))
	require.True(t, created.Enabled)
	require.Equal(t, 2, created.MaxCatchup)
	// 09:00 in Berlin is 08:00 UTC, so today's has passed.
	require.Equal(t, time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC), *created.NextFireAt)
	require.Equal(t, now, created.CreatedAt)

	got, err := b.api.GetSchedule(b.ctx, "morning")
	require.NoError(t, err)
	require.Equal(t, &created, got)

	_, err = b.api.CreateSchedule(b.ctx, schedule.CreateRequest{ID: "hourly", WorkflowName: "steps", Cron: "@hourly", MaxCatchup: 100})
	require.NoError(t, err)
	_, err = b.api.CreateSchedule(b.ctx, schedule.CreateRequest{ID: "a-first", WorkflowName: "greet", Cron: "*/10 * * * *", Enabled: new(false)})
	require.NoError(t, err)

	page, err := b.api.ListSchedules(b.ctx, schedule.ListParams{PageSize: 2})
	require.NoError(t, err)
	require.Equal(t, []string{"a-first", "hourly"}, []string{page.Schedules[0].ID, page.Schedules[1].ID})
	require.Equal(t, "hourly", page.NextCursor)
	page, err = b.api.ListSchedules(b.ctx, schedule.ListParams{PageSize: 2, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, page.Schedules, 1)
	require.Equal(t, "morning", page.Schedules[0].ID)
	require.Empty(t, page.NextCursor)
	page, err = b.api.ListSchedules(b.ctx, schedule.ListParams{WorkflowName: "steps"})
	require.NoError(t, err)
	require.Len(t, page.Schedules, 1)
	require.Equal(t, "hourly", page.Schedules[0].ID)

	updated, err := b.api.UpdateSchedule(b.ctx, "morning", schedule.UpdateRequest{Cron: new("30 7 * * *"), TimeZone: new("UTC")})
	require.NoError(t, err)
	require.Equal(t, "30 7 * * *", updated.Cron)
	require.Equal(t, time.Date(2026, 1, 2, 7, 30, 0, 0, time.UTC), *updated.NextFireAt)
	require.JSONEq(t, `{"name":"Ada"}`, string(updated.Params), "left alone")

	off, err := b.api.DisableSchedule(b.ctx, "morning")
	require.NoError(t, err)
	require.False(t, off.Enabled)
	require.Nil(t, off.NextFireAt)
	on, err := b.api.EnableSchedule(b.ctx, "morning")
	require.NoError(t, err)
	require.True(t, on.Enabled)
	require.Equal(t, time.Date(2026, 1, 2, 7, 30, 0, 0, time.UTC), *on.NextFireAt)

	// The schedule fires, and GET shows what it started and when it fires next.
	b.h.Advance(22*time.Hour + 30*time.Minute)
	res, err := sched.FireDue(b.ctx)
	require.NoError(t, err)
	require.Len(t, res.Started, 23, "the morning schedule once, the hourly one for each of 22 hours")
	got, err = b.api.GetSchedule(b.ctx, "morning")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(got.LastInstanceID, "morning-20260102T073000Z-"), got.LastInstanceID)
	require.Equal(t, time.Date(2026, 1, 3, 7, 30, 0, 0, time.UTC), *got.NextFireAt)
	inst, err := b.api.Get(b.ctx, "greet", got.LastInstanceID)
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"Ada"}`, string(inst.Params))

	r = b.call(t, "DELETE", "/api/schedules/morning", "")
	require.Equal(t, http.StatusNoContent, r.status, string(r.body))
	require.Empty(t, r.body)
	err = b.api.DeleteSchedule(b.ctx, "morning")
	require.ErrorIs(t, err, schedule.ErrNotFound, "the typed client's errors match the sentinels")
	_, err = b.api.GetSchedule(b.ctx, "morning")
	var apiErr *apiclient.APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, apiclient.CodeScheduleNotFound, apiErr.Code)
	_, err = b.api.Get(b.ctx, "greet", got.LastInstanceID)
	require.NoError(t, err, "the instances a schedule started stay")
}

func TestScheduleErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withSchedules(t, nil))
	_, err := b.api.CreateSchedule(b.ctx, schedule.CreateRequest{ID: "taken", WorkflowName: "greet", Cron: "@daily"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		status       int
		code         apiclient.Code
		messageHas   []string
	}{
		{"taken", "POST", "/api/schedules", `{"id":"taken","workflowName":"greet","cron":"@daily"}`, 409, apiclient.CodeScheduleAlreadyExists, []string{`"taken"`}},
		{"missing", "GET", "/api/schedules/nope", ``, 404, apiclient.CodeScheduleNotFound, []string{`"nope"`}},
		{"missing patch", "PATCH", "/api/schedules/nope", `{"maxCatchup":2}`, 404, apiclient.CodeScheduleNotFound, nil},
		{"missing enable", "POST", "/api/schedules/nope/enable", ``, 404, apiclient.CodeScheduleNotFound, nil},
		{"missing delete", "DELETE", "/api/schedules/nope", ``, 404, apiclient.CodeScheduleNotFound, nil},
		{"invalid cron", "POST", "/api/schedules", `{"id":"x","workflowName":"greet","cron":"0 25 * * *"}`, 400, apiclient.CodeInvalidRequest, []string{`cron expression "0 25 * * *"`}},
		{"five fields", "POST", "/api/schedules", `{"id":"x","workflowName":"greet","cron":"0 * * *"}`, 400, apiclient.CodeInvalidRequest, []string{"needs 5"}},
		{"invalid zone", "POST", "/api/schedules", `{"id":"x","workflowName":"greet","cron":"@daily","timeZone":"Moon/Base"}`, 400, apiclient.CodeInvalidRequest, []string{`unknown time zone "Moon/Base"`}},
		{"invalid cron update", "PATCH", "/api/schedules/taken", `{"cron":"@every 1m"}`, 400, apiclient.CodeInvalidRequest, []string{"@every"}},
		{"invalid id", "POST", "/api/schedules", `{"id":"a b","workflowName":"greet","cron":"@daily"}`, 400, apiclient.CodeInvalidRequest, []string{"schedule id"}},
		{"unknown workflow", "POST", "/api/schedules", `{"id":"x","workflowName":"nope","cron":"@daily"}`, 404, apiclient.CodeWorkflowNotFound, []string{`"nope"`}},
		{"unknown field", "POST", "/api/schedules", `{"id":"x","workflowName":"greet","cron":"@daily","tz":"UTC"}`, 400, apiclient.CodeInvalidRequest, []string{`"tz"`}},
		{"wrong type", "PATCH", "/api/schedules/taken", `{"maxCatchup":"2"}`, 400, apiclient.CodeInvalidRequest, []string{`"maxCatchup"`}},
		{"catchup out of range", "PATCH", "/api/schedules/taken", `{"maxCatchup":0}`, 400, apiclient.CodeInvalidRequest, []string{"maxCatchup"}},
		{"empty body", "POST", "/api/schedules", ``, 400, apiclient.CodeInvalidRequest, []string{"empty"}},
		{"body on enable", "POST", "/api/schedules/taken/enable", `{"x":1}`, 400, apiclient.CodeInvalidRequest, nil},
		{"unknown query", "GET", "/api/schedules?status=on", ``, 400, apiclient.CodeInvalidRequest, []string{`"status"`}},
		{"page size", "GET", "/api/schedules?pageSize=0", ``, 400, apiclient.CodeInvalidRequest, []string{"pageSize"}},
		{"method", "PUT", "/api/schedules/taken", `{}`, 405, apiclient.CodeMethodNotAllowed, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.call(t, tc.method, tc.path, tc.body)
			r.requireError(t, tc.status, tc.code, tc.messageHas...)
		})
	}
}

func TestScheduleRoutesNeedScopes(t *testing.T) {
	t.Parallel()
	b := setup(t, "admin", withSchedules(t, nil), func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tokens = []httpapi.Token{mustParseToken(t, "reader:reader:read"), mustParseToken(t, "admin:admin:*")}
	})
	_, err := b.api.CreateSchedule(b.ctx, schedule.CreateRequest{ID: "s", WorkflowName: "greet", Cron: "@daily"})
	require.NoError(t, err)
	reader := []string{"Authorization: Bearer reader"}
	b.call(t, "GET", "/api/schedules", "", reader...).requireOK(t, 200, nil)
	b.call(t, "GET", "/api/schedules/s", "", reader...).requireOK(t, 200, nil)
	b.call(t, "POST", "/api/schedules", `{"id":"x","workflowName":"greet","cron":"@daily"}`, reader...).
		requireError(t, 403, apiclient.CodeForbidden, `"schedules"`)
	b.call(t, "POST", "/api/schedules/s/disable", "", reader...).requireError(t, 403, apiclient.CodeForbidden, `"schedules"`)
	b.call(t, "DELETE", "/api/schedules/s", "", reader...).requireError(t, 403, apiclient.CodeForbidden, `"schedules"`)
	b.call(t, "GET", "/api/schedules", "").requireError(t, 401, apiclient.CodeUnauthorized)
}

func TestScheduleRoutesOffWithoutScheduler(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.call(t, "GET", "/api/schedules", "").requireError(t, 404, apiclient.CodeNotFound)
	_, err := b.api.ListSchedules(b.ctx, schedule.ListParams{})
	require.ErrorIs(t, err, &apiclient.APIError{Code: apiclient.CodeNotFound})
}

// withClock makes the server read the harness's fake clock.
func withClock(c *httpapi.Config, h *testharness.Harness) { c.Clock = h.Clock }

func TestAPICreateRecordsProvenance(t *testing.T) {
	t.Parallel()
	b := setup(t, "", withClock)
	r := b.call(t, "POST", "/api/workflows/greet/instances", `{"id":"a","params":{"name":"Ada"}}`, "X-Request-Id: req-42")
	r.requireOK(t, http.StatusCreated, nil)
	require.Equal(t, "req-42", r.header.Get("X-Request-Id"))
	info, err := b.api.Get(b.ctx, "greet", "a")
	require.NoError(t, err)
	prov, err := dftype.ProvenanceOf(info.Metadata)
	require.NoError(t, err)
	require.Equal(t, &dftype.Provenance{
		Type: "api", Source: "POST /api/workflows/:name/instances", ReceivedAt: b.h.Now().UTC(), RequestID: "req-42",
	}, prov)

	created, err := b.api.CreateBatch(b.ctx, "greet", []dftype.CreateRequest{{ID: "b1"}, {ID: "b2"}})
	require.NoError(t, err)
	for _, inst := range created {
		var meta struct {
			Trigger map[string]any `json:"trigger"`
		}
		require.NoError(t, json.Unmarshal(inst.Metadata, &meta))
		require.Equal(t, "api", meta.Trigger["type"])
		require.Equal(t, "POST /api/workflows/:name/instances/batch", meta.Trigger["source"])
		require.Len(t, meta.Trigger["requestId"], 32, "generated")
	}
}

// TestScheduleScopes sends every schedule route with a token of each scope:
// reading needs read, and every change needs the schedules scope (which "*"
// grants); manage, create and the others do not allow a change, since a
// schedule starts any workflow with any params.
func TestScheduleScopes(t *testing.T) {
	t.Parallel()
	var sched *schedule.Scheduler
	tokens := map[string]string{
		"read": "read", "create": "create", "manage": "manage", "events": "events", "flows": "flows", "tick": "tick",
		"schedules": "schedules", "star": "*", "manage-create": "manage,create",
	}
	b := setup(t, "", withSchedules(t, &sched), func(c *httpapi.Config, _ *testharness.Harness) {
		for name, scopes := range tokens {
			c.Tokens = append(c.Tokens, mustParseToken(t, name+":secret-"+name+":"+scopes))
		}
	})
	for name := range tokens {
		_, err := sched.Create(b.ctx, schedule.CreateRequest{ID: "s-" + name, WorkflowName: "greet", Cron: "@daily"})
		require.NoError(t, err)
	}
	canChange := map[string]bool{"schedules": true, "star": true}
	canRead := map[string]bool{"read": true, "star": true}
	for name := range tokens {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			auth := "Authorization: Bearer secret-" + name
			id := "s-" + name
			for _, rt := range []struct {
				method, path, body string
				change             bool
				ok                 int
			}{
				{"GET", "/api/schedules", "", false, 200},
				{"GET", "/api/schedules/" + id, "", false, 200},
				{"POST", "/api/schedules", `{"id":"new-` + name + `","workflowName":"greet","cron":"@hourly","params":{"name":"x"}}`, true, 201},
				{"PATCH", "/api/schedules/" + id, `{"params":{"name":"y"}}`, true, 200},
				{"POST", "/api/schedules/" + id + "/disable", "", true, 200},
				{"POST", "/api/schedules/" + id + "/enable", "", true, 200},
				{"DELETE", "/api/schedules/" + id, "", true, 204},
			} {
				r := b.call(t, rt.method, rt.path, rt.body, auth)
				allowed := canRead[name]
				want := "read"
				if rt.change {
					allowed, want = canChange[name], "schedules"
				}
				if !allowed {
					r.requireError(t, http.StatusForbidden, apiclient.CodeForbidden, `lacks the "`+want+`" scope`)
					continue
				}
				require.Equal(t, rt.ok, r.status, "%s %s: %s", rt.method, rt.path, r.body)
			}
			_, err := sched.Get(b.ctx, "new-"+name)
			if canChange[name] {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, schedule.ErrNotFound, "a token without the schedules scope created a schedule")
			}
		})
	}
}
