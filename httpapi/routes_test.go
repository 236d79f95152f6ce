package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func TestWorkflows(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	list, err := b.api.Workflows(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []apiclient.WorkflowSummary{{Name: "approve", Kind: apiclient.KindGo}, {Name: "greet", Kind: apiclient.KindGo}, {Name: "steps", Kind: apiclient.KindGo}}, list.Workflows)

	b.call(t, http.MethodGet, "/api/workflows", "").requireOK(t, http.StatusOK, nil)
	require.JSONEq(t, `{"workflows":[{"name":"approve","kind":"go"},{"name":"greet","kind":"go"},{"name":"steps","kind":"go"}]}`,
		string(b.call(t, http.MethodGet, "/api/workflows", "").body))
}

func TestCreateAndGet(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	// Params pass through untouched: a number no float64 holds, key order, HTML characters.
	params := `{"name":"ada","big":123456789012345678901234567890,"html":"<b>&</b>"}`
	r := b.call(t, http.MethodPost, "/api/workflows/greet/instances", `{"id":"g-1","params":`+params+`}`)
	var created apiclient.Instance
	r.requireOK(t, http.StatusCreated, &created)
	require.Equal(t, "/api/workflows/greet/instances/g-1", r.header.Get("Location"))
	require.Equal(t, "greet", created.WorkflowName)
	require.Equal(t, "g-1", created.ID)
	require.Equal(t, dftype.StatusQueued, created.Details.Status)
	require.Equal(t, params, string(created.Params))
	require.Contains(t, string(r.body), `"params":`+params)
	// The status is under details, and only there.
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &raw))
	require.JSONEq(t, `{"status":"queued"}`, string(raw["details"]))
	for _, k := range []string{"status", "error", "output"} {
		require.NotContains(t, raw, k)
	}

	got, err := b.api.Get(b.ctx, "greet", "g-1")
	require.NoError(t, err)
	require.Equal(t, params, string(got.Params))

	// No body: a random id and null params.
	var anon apiclient.Instance
	b.call(t, http.MethodPost, "/api/workflows/greet/instances", "").requireOK(t, http.StatusCreated, &anon)
	require.Len(t, anon.ID, 32)
	require.Equal(t, "null", string(anon.Params))

	// The typed client.
	info, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "g-2", Params: json.RawMessage(`{"name":"bob"}`)})
	require.NoError(t, err)
	require.Equal(t, "g-2", info.ID)

	b.h.RunUntilIdle()
	done, err := b.api.Get(b.ctx, "greet", "g-2")
	require.NoError(t, err)
	require.Equal(t, dftype.StatusComplete, done.Status)
	require.JSONEq(t, `{"greeting":"hello, bob"}`, string(done.Output))
	var doneRaw struct {
		ID      string                    `json:"id"`
		Details apiclient.InstanceDetails `json:"details"`
	}
	b.call(t, http.MethodGet, "/api/workflows/greet/instances/g-2", "").requireOK(t, http.StatusOK, &doneRaw)
	require.Equal(t, "g-2", doneRaw.ID)
	require.Equal(t, dftype.StatusComplete, doneRaw.Details.Status)
	require.JSONEq(t, `{"greeting":"hello, bob"}`, string(doneRaw.Details.Output))

	// An instance may be called "batch", although POST …/instances/batch is the batch route.
	_, err = b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "batch"})
	require.NoError(t, err)
	got, err = b.api.Get(b.ctx, "greet", "batch")
	require.NoError(t, err)
	require.Equal(t, "batch", got.ID)
	_, err = b.api.Pause(b.ctx, "greet", "batch")
	require.NoError(t, err)
}

func TestCreateBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "b-2"})
	require.NoError(t, err)

	var batch apiclient.InstanceBatch
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch",
		`{"instances":[{"id":"b-1","params":{"name":"x"}},{"id":"b-2"},{"id":"b-3"}]}`).
		requireOK(t, http.StatusCreated, &batch)
	var ids []string
	for _, i := range batch.Instances {
		ids = append(ids, i.ID)
	}
	require.ElementsMatch(t, []string{"b-1", "b-3"}, ids, "b-2 existed and is left out")

	// Only existing ids: 201 with an empty list.
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"b-1"}]}`).
		requireOK(t, http.StatusCreated, &batch)
	require.Empty(t, batch.Instances)
	require.NotNil(t, batch.Instances)

	created, err := b.api.CreateBatch(b.ctx, "greet", []dftype.CreateRequest{{ID: "b-4"}, {Params: json.RawMessage(`{"name":"y"}`)}})
	require.NoError(t, err)
	require.Len(t, created, 2)
	require.Equal(t, `{"name":"y"}`, string(created[1].Params))

	tooMany := make([]dftype.CreateRequest, workflow.MaxBatchSize+1)
	_, err = b.api.CreateBatch(b.ctx, "greet", tooMany)
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)

	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[]}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "at least one")
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"d"},{"id":"d"}]}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "twice")
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":"ok"},{"id":"no way"}]}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidInstanceID, "instance 1")
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", ``).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "empty")
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/batch", `{"instances":[{"id":7}]}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, `"instances.id"`, "string")

	// Nothing of the refused batches was written.
	_, err = b.api.Get(b.ctx, "greet", "ok")
	require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
}

func TestLifeCycle(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "l-1"})
	require.NoError(t, err)

	var info apiclient.Instance
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/l-1/pause", "").requireOK(t, http.StatusOK, &info)
	require.Equal(t, "l-1", info.ID)
	require.Equal(t, dftype.StatusPaused, info.Details.Status)
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/l-1/resume", "{}").requireOK(t, http.StatusOK, &info)
	require.Equal(t, dftype.StatusQueued, info.Details.Status)

	got, err := b.api.Pause(b.ctx, "greet", "l-1")
	require.NoError(t, err)
	require.Equal(t, dftype.StatusPaused, got.Status)
	got, err = b.api.Resume(b.ctx, "greet", "l-1")
	require.NoError(t, err)
	require.Equal(t, dftype.StatusQueued, got.Status)
	got, err = b.api.Terminate(b.ctx, "greet", "l-1")
	require.NoError(t, err)
	require.Equal(t, dftype.StatusTerminated, got.Status)

	b.call(t, http.MethodPost, "/api/workflows/greet/instances/l-1/terminate", "").
		requireError(t, http.StatusConflict, apiclient.CodeInstanceTerminal, "l-1")
	_, err = b.api.Pause(b.ctx, "greet", "l-1")
	require.ErrorIs(t, err, workflow.ErrInstanceTerminal)
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusConflict, apiErr.Status)
	require.Equal(t, apiclient.CodeInstanceTerminal, apiErr.Code)

	b.call(t, http.MethodPost, "/api/workflows/greet/instances/l-1/restart", "").requireOK(t, http.StatusOK, &info)
	require.Equal(t, dftype.StatusQueued, info.Details.Status)
	require.Equal(t, 2, info.RunNumber)
	got, err = b.api.Restart(b.ctx, "greet", "l-1")
	require.NoError(t, err)
	require.Equal(t, 3, got.RunNumber)

	b.h.RunUntilIdle()
	b.h.RequireStatus("greet", "l-1", dftype.StatusComplete)

	// A life-cycle route takes no body fields.
	b.call(t, http.MethodPost, "/api/workflows/greet/instances/l-1/pause", `{"force":true}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, `unknown field "force"`)
}

func TestEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	_, err := b.api.Create(b.ctx, "approve", dftype.CreateRequest{ID: "e-1"})
	require.NoError(t, err)
	b.h.RunUntilIdle()
	b.h.RequireStatus("approve", "e-1", dftype.StatusWaiting)

	var sent apiclient.EventSent
	b.call(t, http.MethodPost, "/api/workflows/approve/instances/e-1/events", `{"type":"approval","payload":{"by":"grace"}}`).
		requireOK(t, http.StatusAccepted, &sent)
	// The status once the event is stored: still waiting, until the runner
	// (which the harness runs only when told) delivers it.
	require.Equal(t, apiclient.InstanceDetails{Status: dftype.StatusWaiting}, sent.Status)
	b.h.RunUntilIdle()
	var out approval
	b.h.RequireOutput("approve", "e-1", &out)
	require.Equal(t, "grace", out.By)

	// Terminal instances refuse events; unknown ones don't exist.
	err = b.api.SendEvent(b.ctx, "approve", "e-1", "approval", json.RawMessage(`{}`))
	require.ErrorIs(t, err, workflow.ErrInstanceTerminal)
	err = b.api.SendEvent(b.ctx, "approve", "nope", "approval", nil)
	require.ErrorIs(t, err, workflow.ErrInstanceNotFound)

	// Through the typed client, with no payload.
	_, err = b.api.Create(b.ctx, "approve", dftype.CreateRequest{ID: "e-2"})
	require.NoError(t, err)
	st, err := b.api.SendEventStatus(b.ctx, "approve", "e-2", "approval", nil)
	require.NoError(t, err)
	require.Equal(t, dftype.StatusQueued, st.Status, "stored before the instance ever ran")
	b.h.RunUntilIdle()
	b.h.RequireStatus("approve", "e-2", dftype.StatusComplete)

	b.call(t, http.MethodPost, "/api/workflows/approve/instances/e-2/events", `{"type":"not valid"}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidEventType, "not valid")
	b.call(t, http.MethodPost, "/api/workflows/approve/instances/e-2/events", `{"payload":1}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidEventType)
	b.call(t, http.MethodPost, "/api/workflows/approve/instances/e-2/events", ``).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, "empty")
	b.call(t, http.MethodPost, "/api/workflows/approve/instances/e-2/events", `{"type":["approval"]}`).
		requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest, `field "type" must be a string`)
}

func TestHistoryPagination(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	_, err := b.api.Create(b.ctx, "steps", dftype.CreateRequest{ID: "h-1"})
	require.NoError(t, err)
	for i := range 3 {
		require.NoError(t, b.api.SendEvent(b.ctx, "steps", "h-1", "note", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))))
	}
	b.h.RunUntilIdle()
	b.h.RequireStatus("steps", "h-1", dftype.StatusComplete)

	var steps []string
	var events []string
	cursor := ""
	pages := 0
	for {
		h, err := b.api.History(b.ctx, "steps", "h-1", client.HistoryParams{PageSize: 2, Cursor: cursor})
		require.NoError(t, err)
		pages++
		require.Equal(t, 1, h.RunNumber)
		require.LessOrEqual(t, len(h.Steps), 2)
		require.LessOrEqual(t, len(h.Events), 2)
		for _, s := range h.Steps {
			steps = append(steps, s.Name)
		}
		for _, e := range h.Events {
			events = append(events, string(e.Payload))
		}
		if h.NextCursor == "" {
			break
		}
		cursor = h.NextCursor
		require.Less(t, pages, 10, "history pagination does not end")
	}
	require.GreaterOrEqual(t, pages, 3)
	require.Equal(t, []string{"step-0", "step-1", "step-2", "step-3", "step-4"}, steps)
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`}, events)

	// Default page size: everything fits in one page.
	var h apiclient.History
	b.call(t, http.MethodGet, "/api/workflows/steps/instances/h-1/history", "").requireOK(t, http.StatusOK, &h)
	require.Len(t, h.Steps, numSteps)
	require.Len(t, h.Events, 3)
	require.Empty(t, h.NextCursor)
	require.Equal(t, "h-1", h.Instance.ID)
	b.call(t, http.MethodGet, "/api/workflows/steps/instances/h-1/history?run=1&pageSize=1000", "").requireOK(t, http.StatusOK, &h)
	require.Len(t, h.Steps, numSteps)

	for _, q := range []string{"pageSize=0", "pageSize=1001", "pageSize=x", "run=-1", "run=x", "run=2", "cursor=%%%", "cursor=bm9wZQ", "limit=3", "run=1&run=1"} {
		t.Log(q)
		b.call(t, http.MethodGet, "/api/workflows/steps/instances/h-1/history?"+q, "").
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
	}
	b.call(t, http.MethodGet, "/api/workflows/steps/instances/nope/history", "").
		requireError(t, http.StatusNotFound, apiclient.CodeInstanceNotFound)
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	b := setup(t, "")

	var complete, open []string
	for i := range 12 {
		id := fmt.Sprintf("c-%02d", i)
		complete = append(complete, id)
		_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: id})
		require.NoError(t, err)
	}
	_, err := b.api.Create(b.ctx, "steps", dftype.CreateRequest{ID: "other-workflow"})
	require.NoError(t, err)
	b.h.RunUntilIdle()
	for i := range 7 {
		id := fmt.Sprintf("o-%02d", i)
		open = append(open, id)
		_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: id})
		require.NoError(t, err)
		if i < 3 {
			_, err = b.api.Terminate(b.ctx, "greet", id)
			require.NoError(t, err)
		}
	}

	// listAll follows the cursors and checks the pages' shape.
	listAll := func(p client.ListParams) []string {
		t.Helper()
		var ids []string
		for pages := 0; ; pages++ {
			require.Less(t, pages, 50, "list pagination does not end")
			res, err := b.api.List(b.ctx, p)
			require.NoError(t, err)
			require.LessOrEqual(t, len(res.Instances), p.PageSize)
			for _, i := range res.Instances {
				require.Equal(t, "greet", i.WorkflowName)
				if len(p.Statuses) > 0 {
					require.Contains(t, p.Statuses, i.Status)
				}
				ids = append(ids, i.ID)
			}
			if res.NextCursor == "" {
				return ids
			}
			p.Cursor = res.NextCursor
		}
	}
	got := listAll(client.ListParams{WorkflowName: "greet", Statuses: []dftype.InstanceStatus{dftype.StatusComplete}, PageSize: 5})
	require.Len(t, got, len(complete), "no instance twice: %v", got)
	require.ElementsMatch(t, complete, got)

	got = listAll(client.ListParams{WorkflowName: "greet", Statuses: []dftype.InstanceStatus{dftype.StatusQueued, dftype.StatusTerminated}, PageSize: 3})
	require.ElementsMatch(t, open, got)

	got = listAll(client.ListParams{WorkflowName: "greet", PageSize: 4})
	require.ElementsMatch(t, append(slices.Clone(complete), open...), got)

	// The raw form, with the status repeated instead of comma-separated.
	var page apiclient.InstancePage
	b.call(t, http.MethodGet, "/api/workflows/greet/instances?status=queued&status=terminated&pageSize=100", "").
		requireOK(t, http.StatusOK, &page)
	require.Len(t, page.Instances, len(open))
	require.Empty(t, page.Cursor)
	require.False(t, page.HasNextPage)
	require.Contains(t, string(b.call(t, http.MethodGet, "/api/workflows/greet/instances?status=queued&status=terminated&pageSize=100", "").body), `"hasNextPage":false`)
	page = apiclient.InstancePage{}
	b.call(t, http.MethodGet, "/api/workflows/greet/instances?status=queued&pageSize=2", "").requireOK(t, http.StatusOK, &page)
	require.Len(t, page.Instances, 2)
	require.NotEmpty(t, page.Cursor)
	require.True(t, page.HasNextPage)
	require.Equal(t, dftype.StatusQueued, page.Instances[0].Details.Status)
	body := string(b.call(t, http.MethodGet, "/api/workflows/greet/instances?status=queued&pageSize=2", "").body)
	require.Contains(t, body, `"cursor":"`)
	require.NotContains(t, body, `"nextCursor"`)

	for _, q := range []string{"status=bogus", "pageSize=0", "pageSize=1001", "pageSize=ten", "cursor=garbage", "page=2", "cursor=a&cursor=b"} {
		t.Log(q)
		b.call(t, http.MethodGet, "/api/workflows/greet/instances?"+q, "").
			requireError(t, http.StatusBadRequest, apiclient.CodeInvalidRequest)
	}
	b.call(t, http.MethodGet, "/api/workflows/nope/instances", "").
		requireError(t, http.StatusNotFound, apiclient.CodeWorkflowNotFound, "nope")
	// Without a workflow, the typed client lists every workflow's
	// instances (GET /instances).
	every, err := b.api.List(b.ctx, client.ListParams{})
	require.NoError(t, err)
	require.NotEmpty(t, every.Instances)
	for _, i := range every.Instances {
		require.NotEmpty(t, i.WorkflowName)
	}
}

func TestHealthAndReady(t *testing.T) {
	t.Parallel()
	var failing atomic.Bool
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tokens = []httpapi.Token{httpapi.NewToken("t", "secret", httpapi.ActionRead)}
		c.Ready = func(ctx context.Context) error {
			if failing.Load() {
				return errors.New("database unreachable")
			}
			return nil
		}
	})
	// No token needed at the root.
	var st apiclient.HealthStatus
	b.call(t, http.MethodGet, "/healthz", "").requireOK(t, http.StatusOK, &st)
	require.Equal(t, "ok", st.Status)
	b.call(t, http.MethodGet, "/readyz", "").requireOK(t, http.StatusOK, &st)
	require.Equal(t, "ok", st.Status)
	require.NoError(t, b.api.Health(b.ctx))
	require.NoError(t, b.api.Ready(b.ctx))

	failing.Store(true)
	b.call(t, http.MethodGet, "/readyz", "").requireError(t, http.StatusServiceUnavailable, apiclient.CodeNotReady, "database unreachable")
	err := b.api.Ready(b.ctx)
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusServiceUnavailable, apiErr.Status)
	require.Equal(t, apiclient.CodeNotReady, apiErr.Code)
	b.call(t, http.MethodGet, "/healthz", "").requireOK(t, http.StatusOK, nil)

	// Neither is under the prefix, and the API behind it needs the token.
	b.call(t, http.MethodGet, "/api/healthz", "").requireError(t, http.StatusNotFound, apiclient.CodeNotFound)
	b.call(t, http.MethodGet, "/api/workflows", "").requireError(t, http.StatusUnauthorized, apiclient.CodeUnauthorized)
}

func TestReadyWithoutCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.call(t, http.MethodGet, "/readyz", "").requireOK(t, http.StatusOK, nil)
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"/v1/duraflow/", "/"} {
		b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) { c.Prefix = prefix })
		api := b.api.WithPrefix(prefix)
		_, err := api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "p-1"})
		require.NoError(t, err)
		got, err := api.Get(b.ctx, "greet", "p-1")
		require.NoError(t, err)
		require.Equal(t, "p-1", got.ID)
		r := b.call(t, http.MethodPost, strings.TrimSuffix(prefix, "/")+"/workflows/greet/instances", `{"id":"p-2"}`)
		r.requireOK(t, http.StatusCreated, nil)
		require.Equal(t, strings.TrimSuffix(prefix, "/")+"/workflows/greet/instances/p-2", r.header.Get("Location"))
		require.NoError(t, api.Health(b.ctx))
		if prefix != "/" {
			b.call(t, http.MethodGet, "/api/workflows", "").requireError(t, http.StatusNotFound, apiclient.CodeNotFound)
		}
	}
}

// TestRemoteRegistry binds a registry to the HTTP client, so typed bindings
// create and control instances on the server.
func TestRemoteRegistry(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	remote := workflow.NewRegistry()
	greet := workflow.MustRegister(remote, "greet", func(ctx context.Context, ev workflow.Event[greetParams], step workflow.Step) (greetOutput, error) {
		return greetOutput{}, errors.New("runs on the server only")
	})
	remote.Bind(b.api)

	inst, err := greet.Create(b.ctx, workflow.CreateOptions[greetParams]{ID: "r-1", Params: greetParams{Name: "remote"}})
	require.NoError(t, err)
	b.h.RunUntilIdle()
	st, err := inst.Status(b.ctx)
	require.NoError(t, err)
	require.Equal(t, dftype.StatusComplete, st.Status)
	require.Equal(t, "hello, remote", st.Output.Greeting)
	_, err = greet.Create(b.ctx, workflow.CreateOptions[greetParams]{ID: "r-1"})
	require.ErrorIs(t, err, workflow.ErrInstanceAlreadyExists)
}
