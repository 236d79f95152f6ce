package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestLoweredLimitsAreEnforced: every limit of Config.Limits, lowered, is
// refused with the code of the engine's own check, and nothing is written.
func TestLoweredLimitsAreEnforced(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", func(c *httpapi.Config, _ *testharness.Harness) {
			c.Limits = httpapi.Limits{MaxPayloadBytes: 100, MaxBatchSize: 2, MaxIDLength: 5, MaxEventTypeLength: 8, MaxWorkflowNameLength: 7, MaxPageSize: 2}
		})
		big := `{"s":"` + strings.Repeat("x", 100) + `"}`

		// Instance ids, in bodies and paths.
		b.call(t, "POST", "/api/workflows/greet/instances", `{"id":"abcdef"}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidInstanceID, "6 characters, the limit is 5")
		b.call(t, "POST", "/api/workflows/greet/instances", `{"id":"abcde"}`).requireOK(t, http.StatusCreated, nil)
		b.call(t, "GET", "/api/workflows/greet/instances/abcdef", "").
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidInstanceID, "the limit is 5")

		// Params.
		b.call(t, "POST", "/api/workflows/greet/instances", `{"id":"p","params":`+big+`}`).
			requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "params is 108 bytes, the limit is 100")
		b.call(t, "POST", "/api/workflows/greet/instances", `{"id":"p","params":{"s":"small"}}`).requireOK(t, http.StatusCreated, nil)

		// Batches: their size, and each instance.
		b.call(t, "POST", "/api/workflows/greet/instances/batch", `{"instances":[{"id":"b1"},{"id":"b2"},{"id":"b3"}]}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "a batch of 3 instances; the limit is 2")
		b.call(t, "POST", "/api/workflows/greet/instances/batch", `{"instances":[{"id":"b1"},{"id":"b2-too-long"}]}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidInstanceID, "instance 1")
		b.call(t, "POST", "/api/workflows/greet/instances/batch", `{"instances":[{"id":"b1","params":`+big+`}]}`).
			requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "instance 0")
		for _, id := range []string{"abcdef", "b1", "b2", "b3"} {
			_, err := b.h.Client.Get(b.ctx, "greet", id)
			require.ErrorIs(t, err, workflow.ErrInstanceNotFound, id)
		}
		b.call(t, "POST", "/api/workflows/greet/instances/batch", `{"instances":[{"id":"b1"},{"id":"b2"}]}`).requireOK(t, http.StatusCreated, nil)

		// Events.
		_, err := b.api.Create(b.ctx, "approve", dftype.CreateRequest{ID: "a"})
		require.NoError(t, err)
		b.call(t, "POST", "/api/workflows/approve/instances/a/events", `{"type":"approval9"}`).
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidEventType, "9 characters, the limit is 8")
		b.call(t, "POST", "/api/workflows/approve/instances/a/events", `{"type":"approval","payload":`+big+`}`).
			requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "the event payload is 108 bytes")
		b.call(t, "POST", "/api/workflows/approve/instances/a/events", `{"type":"approval","payload":{}}`).requireOK(t, http.StatusAccepted, nil)

		// Workflow names.
		b.call(t, "GET", "/api/workflows/a-long-name/instances", "").
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "11 characters, the limit is 7")
		b.call(t, "GET", "/api/workflows/a-long-name/instances/a", "").
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "the limit is 7")

		// Page sizes: past the limit refused, the default page capped at it.
		for _, path := range []string{"/api/workflows/greet/instances", "/api/workflows/greet/instances/p/history", "/api/workers"} {
			b.call(t, "GET", path+"?pageSize=3", "").requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "between 1 and 2")
		}
		var page apiclient.InstancePage
		b.call(t, "GET", "/api/workflows/greet/instances", "").requireOK(t, http.StatusOK, &page)
		require.Len(t, page.Instances, 2)
		require.True(t, page.HasNextPage)
	})
}

func TestLimitsAreChecked(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	for _, tc := range []struct {
		limits httpapi.Limits
		want   string
	}{
		{httpapi.Limits{MaxBatchSize: workflow.MaxBatchSize + 1}, "MaxBatchSize 101 must be between 1 and 100"},
		{httpapi.Limits{MaxPayloadBytes: -1}, "MaxPayloadBytes -1"},
		{httpapi.Limits{MaxIDLength: 101}, "MaxIDLength"},
		{httpapi.Limits{MaxEventTypeLength: 101}, "MaxEventTypeLength"},
		{httpapi.Limits{MaxWorkflowNameLength: 65}, "MaxWorkflowNameLength"},
		{httpapi.Limits{MaxPageSize: httpapi.MaxPageSize + 1}, "MaxPageSize"},
	} {
		_, err := httpapi.New(&httpapi.Config{Client: h.Client, Limits: tc.limits})
		require.ErrorContains(t, err, tc.want, fmt.Sprint(tc.limits))
	}

	// The defaults are the engine's, and the body bound follows the payload's.
	cfg := (&httpapi.Config{Client: h.Client}).WithDefaults()
	require.Equal(t, httpapi.DefaultLimits(), cfg.Limits)
	require.Equal(t, int64(httpapi.DefaultMaxBodyBytes), cfg.MaxBodyBytes)
	cfg = (&httpapi.Config{Client: h.Client, Limits: httpapi.Limits{MaxPayloadBytes: 1000}}).WithDefaults()
	require.Equal(t, int64(1000+64<<10), cfg.MaxBodyBytes)
}

// TestLimitsFollowTheEngine: over a client whose engine limits are raised,
// the server's payload and batch limits and its body bound default to
// them, may be lowered but not raised past them, and a request past the
// engine's default limits is taken.
func TestLimitsFollowTheEngine(t *testing.T) {
	t.Parallel()
	h := testharness.New(t, testharness.WithEngineLimits(workflow.EngineLimits{MaxPayloadBytes: 2 << 20, MaxBatchSize: 150}))
	workflow.MustRegister(h.Registry, "echo", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (json.RawMessage, error) {
		return ev.Payload, nil
	})

	cfg := (&httpapi.Config{Client: h.Client}).WithDefaults()
	require.Equal(t, 2<<20, cfg.Limits.MaxPayloadBytes)
	require.Equal(t, 150, cfg.Limits.MaxBatchSize)
	require.Equal(t, workflow.MaxIDLength, cfg.Limits.MaxIDLength, "the fixed limits stay")
	require.Equal(t, int64(2<<20+64<<10), cfg.MaxBodyBytes)
	require.Equal(t, httpapi.LimitsFor(h.Client.EngineLimits()), cfg.Limits)
	for _, tc := range []struct {
		cfg  httpapi.Config
		want string
	}{
		{httpapi.Config{Limits: httpapi.Limits{MaxPayloadBytes: 2<<20 + 1}}, "MaxPayloadBytes 2097153 must be between 1 and 2097152"},
		{httpapi.Config{Limits: httpapi.Limits{MaxBatchSize: 151}}, "MaxBatchSize 151 must be between 1 and 150"},
		{httpapi.Config{MaxBodyBytes: 2<<20 + 64<<10 + 1}, "MaxBodyBytes 2162689 must be between 1 and 2162688"},
	} {
		tc.cfg.Client = h.Client
		_, err := httpapi.New(&tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}

	srv, err := httpapi.New(&httpapi.Config{Client: h.Client, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	require.Equal(t, 2<<20, srv.Limits().MaxPayloadBytes)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	api := apiclient.New(ts.URL, "", ts.Client())
	big := json.RawMessage(`"` + strings.Repeat("x", 3<<19) + `"`)
	_, err = api.Create(h.Context(), "echo", dftype.CreateRequest{ID: "big", Params: big})
	require.NoError(t, err, "1.5 MiB of params, past the default limit")
	h.RunUntilIdle()
	require.Equal(t, string(big), string(h.RequireStatus("echo", "big", dftype.StatusComplete).Output))
	_, err = api.Create(h.Context(), "echo", dftype.CreateRequest{ID: "too-big", Params: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)})
	require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
	reqs := make([]dftype.CreateRequest, 150)
	for i := range reqs {
		reqs[i].ID = fmt.Sprintf("b%d", i)
	}
	created, err := api.CreateBatch(h.Context(), "echo", reqs)
	require.NoError(t, err)
	require.Len(t, created, 150)
}

// TestLoweredPayloadLimitCoversTriggersAndSchedules: the params of a
// trigger's instance and of a schedule (which starts instances with them)
// are held to a lowered Limits.MaxPayloadBytes like a create's.
func TestLoweredPayloadLimitCoversTriggersAndSchedules(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupOn(t, backend, "", withSchedules(t, nil), withTriggers(httpapi.Trigger{Path: "/hooks/greet", Workflow: "greet"}),
			func(c *httpapi.Config, _ *testharness.Harness) { c.Limits = httpapi.Limits{MaxPayloadBytes: 100} })
		big := `{"name":"` + strings.Repeat("x", 100) + `"}`

		b.call(t, "POST", "/hooks/greet", big).
			requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "params is 111 bytes, the limit is 100")
		list, err := b.h.Client.List(b.ctx, client.ListParams{WorkflowName: "greet"})
		require.NoError(t, err)
		require.Empty(t, list.Instances, "the refused trigger created nothing")
		b.call(t, "POST", "/hooks/greet", `{"name":"ada"}`).requireOK(t, http.StatusAccepted, nil)

		b.call(t, "POST", "/api/schedules", `{"id":"s","workflowName":"greet","cron":"@daily","params":`+big+`}`).
			requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "params is 111 bytes")
		b.call(t, "GET", "/api/schedules/s", "").requireError(t, http.StatusNotFound, apiclient.CodeScheduleNotFound)
		b.call(t, "POST", "/api/schedules", `{"id":"s","workflowName":"greet","cron":"@daily","params":{"name":"ada"}}`).requireOK(t, http.StatusCreated, nil)
		b.call(t, "PATCH", "/api/schedules/s", `{"params":`+big+`}`).
			requireError(t, http.StatusRequestEntityTooLarge, apiclient.CodePayloadTooLarge, "params is 111 bytes")
		var info schedule.Info
		b.call(t, "GET", "/api/schedules/s", "").requireOK(t, http.StatusOK, &info)
		require.JSONEq(t, `{"name":"ada"}`, string(info.Params), "the refused update changed nothing")
	})
}
