package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/cli"
	clientpkg "github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
)

// exampleFlows is the folder of the example flows.
const exampleFlows = "../examples/flows"

// flowsDir returns a folder with the example flows, an invalid flow, and a
// changed copy of the order flow under its old version.
func flowsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"order.json", "approval.json"} {
		data, err := os.ReadFile(filepath.Join(exampleFlows, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"id": "broken", "version": "1.0.0", "initialStepId": "a",
		"steps": {"a": {"id": "a", "type": "teleport"}}}`), 0o600))
	order, err := os.ReadFile(filepath.Join(exampleFlows, "order.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zz-order-changed.json"), bytes.Replace(order, []byte("50000"), []byte("60000"), 1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a flow"), 0o600))
	return dir
}

// apiClient is a typed client of a test server.
func (s *server) apiClient() *apiclient.Client { return apiclient.New(s.url, "", nil) }

// waitSettled polls an instance over HTTP until it is complete, errored or
// waiting.
func waitSettled(t *testing.T, c *apiclient.Client, name, id string) *dftype.InstanceInfo {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := c.Get(t.Context(), name, id)
		require.NoError(t, err)
		switch info.Status {
		case dftype.StatusComplete, dftype.StatusErrored, dftype.StatusWaiting, dftype.StatusTerminated:
			return info
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "the instance did not settle", "%s/%s is %s", name, id, info.Status)
		}
		<-tick.C
	}
}

// TestDevFlows runs dev with --flows, as a user would, and starts both
// example flows over HTTP: the order flow calls the dev stub, the approval
// flow waits for an event.
func TestDevFlows(t *testing.T) {
	t.Parallel()
	dir := flowsDir(t)
	s := startServer(t, []string{"dev", "--db", sqliteDB(t), "--flows", dir})
	s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
	out := s.stdout.String()
	require.Contains(t, out, "Flows from "+dir+": expense-approval 1.0.0 (applied), order 1.0.0 (applied)\n")
	require.Contains(t, out, "Skipped (see above): broken.json, zz-order-changed.json\n")
	require.Regexp(t, `Stub service for flows: http://stub\.localhost \(on http://127\.0\.0\.1:\d+\)`, out)
	require.Contains(t, out, "Workflows: approval, child, expense-approval, flaky, hello, order, parent, sleeper")
	errs := s.stderr.String()
	require.Contains(t, errs, filepath.Join(dir, "broken.json")+": skipped: the flow is invalid:\n  steps.a.type: ")
	require.Contains(t, errs, filepath.Join(dir, "zz-order-changed.json")+": skipped: ")
	require.Contains(t, errs, "give the changed flow a new version")

	api := s.apiClient()
	ctx := t.Context()
	list, err := api.Workflows(ctx)
	require.NoError(t, err)
	require.Contains(t, list.Workflows, apiclient.WorkflowSummary{Name: "order", Kind: apiclient.KindFlow, Version: "1.0.0"})
	require.Contains(t, list.Workflows, apiclient.WorkflowSummary{Name: "hello", Kind: apiclient.KindGo})

	t.Run("Order", func(t *testing.T) {
		t.Parallel()
		create := func(id, params string) {
			_, err := api.Create(ctx, "order", dftype.CreateRequest{ID: id, Params: json.RawMessage(params)})
			require.NoError(t, err)
		}
		create("o-small", `{"orderId":"A-1","items":[{"sku":"book","qty":2,"priceCents":1250},{"sku":"pen","qty":10,"priceCents":120}]}`)
		create("o-big", `{"orderId":"A-2","items":[{"sku":"desk","qty":2,"priceCents":45000}]}`)
		create("o-short", `{"orderId":"A-3","items":[{"sku":"unobtainium","qty":1,"priceCents":99}]}`)
		for id, want := range map[string]string{
			"o-small": `{"status":"accepted","orderId":"A-1","totalCents":3700,"reservation":"R-A-1"}`,
			"o-big":   `{"status":"review","orderId":"A-2","totalCents":90000,"reservation":"R-A-2"}`,
			"o-short": `{"status":"rejected","orderId":"A-3","missing":["unobtainium"]}`,
		} {
			info := waitSettled(t, api, "order", id)
			require.Equal(t, dftype.StatusComplete, info.Status, "%s: %+v", id, info.Error)
			require.JSONEq(t, want, string(info.Output), id)
			require.Contains(t, string(info.Metadata), `"flow":{"id":"order","version":"1.0.0"}`)
		}
		hist, err := api.History(ctx, "order", "o-small", clientpkg.HistoryParams{PageSize: 100})
		require.NoError(t, err)
		require.Equal(t, "reserve#1", hist.Steps[1].Name)
		require.Contains(t, string(hist.Steps[1].Result), `"status":200`)
	})

	t.Run("Approval", func(t *testing.T) {
		t.Parallel()
		c := s.client(t)
		r := c.run(cli.ExitOK, "instances", "create", "expense-approval", "e-small", "--params", `{"expenseId":"E-1","amount":40,"submitter":"Ada"}`)
		require.Regexp(t, `(?m)^Status:\s+complete$`, r.stdout)
		require.Regexp(t, `(?m)^Output:\s+\{"amount":40,"by":"policy","expenseId":"E-1","status":"approved"\}$`, r.stdout)

		_, err := api.Create(ctx, "expense-approval", dftype.CreateRequest{ID: "e-big", Params: json.RawMessage(`{"expenseId":"E-2","amount":420,"submitter":"Grace"}`)})
		require.NoError(t, err)
		require.Equal(t, dftype.StatusWaiting, waitSettled(t, api, "expense-approval", "e-big").Status)
		require.NoError(t, api.SendEvent(ctx, "expense-approval", "e-big", "approval", json.RawMessage(`{"approved":true,"by":"grace"}`)))
		info := c.waitStatus("expense-approval", "e-big", "complete")
		got, err := json.Marshal(info["details"].(map[string]any)["output"])
		require.NoError(t, err)
		require.JSONEq(t, `{"status":"approved","by":"grace","expenseId":"E-2","amount":420}`, string(got))
	})
}

func TestFlowsCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	c := s.client(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	orderFile := filepath.Join(exampleFlows, "order.json")
	order, err := os.ReadFile(orderFile)
	require.NoError(t, err)

	r := c.run(cli.ExitOK, "flows", "apply", "-f", orderFile)
	require.Equal(t, "order 1.0.0: applied; new instances run 1.0.0\n", r.stdout)
	r = c.run(cli.ExitOK, "flows", "apply", "-f", orderFile)
	require.Equal(t, "order 1.0.0: unchanged, stored already; new instances run 1.0.0\n", r.stdout)

	v110 := write("order-1.1.0.json", bytes.Replace(order, []byte(`"version": "1.0.0"`), []byte(`"version": "1.1.0"`), 1))
	var applied struct {
		ID, Version, Latest string
		Created             bool
		Warnings            []any
	}
	c.json(&applied, "flows", "apply", "-f", v110)
	require.True(t, applied.Created)
	require.Equal(t, "1.1.0", applied.Latest)
	require.NotNil(t, applied.Warnings)

	r = c.run(cli.ExitOK, "flows", "list")
	require.Regexp(t, `^ID\s+LATEST\s+NAME\s+CREATED\norder\s+1\.1\.0\s+Order\s+\S+\n$`, r.stdout)
	var list struct {
		Flows []struct{ ID, Version string }
	}
	c.json(&list, "flows", "list", "--page-size", "1", "--all")
	require.Len(t, list.Flows, 1)

	r = c.run(cli.ExitOK, "flows", "versions", "order")
	require.Regexp(t, `^VERSION\s+LATEST\s+NAME\s+CREATED\n1\.0\.0\s+Order\s+\S+\n1\.1\.0\s+\*\s+Order\s+\S+\n$`, r.stdout)

	r = c.run(cli.ExitOK, "flows", "get", "order")
	require.Regexp(t, `(?m)^Flow:\s+order$`, r.stdout)
	require.Regexp(t, `(?m)^Version:\s+1\.1\.0$`, r.stdout)
	require.Regexp(t, `(?m)^Latest:\s+true$`, r.stdout)
	require.Contains(t, r.stdout, "Definition:\n{\n  \"id\": \"order\",")
	r = c.run(cli.ExitOK, "flows", "get", "order", "--version", "1.0.0", "--definition")
	require.JSONEq(t, string(order), r.stdout)
	var info struct {
		Version    string
		Latest     bool
		Definition json.RawMessage
	}
	c.json(&info, "flows", "get", "order", "--version", "1.0.0")
	require.Equal(t, "1.0.0", info.Version)
	require.False(t, info.Latest)

	r = c.run(cli.ExitOK, "workflows", "list")
	require.Regexp(t, `(?m)^order\s+flow\s+1\.1\.0$`, r.stdout)
	require.Regexp(t, `(?m)^hello\s+go\s+-$`, r.stdout)

	changed := write("changed.json", bytes.Replace(order, []byte("50000"), []byte("60000"), 1))
	invalid := write("invalid.json", []byte(`{"id": "order", "version": "2.0", "initialStepId": "x", "steps": {}}`))
	empty := write("empty.json", nil)
	cases := []struct {
		name string
		code int
		args []string
		msg  string
	}{
		{"Conflict", cli.ExitConflict, []string{"flows", "apply", "-f", changed}, "FLOW_VERSION_CONFLICT"},
		{"Invalid", cli.ExitInvalid, []string{"flows", "apply", "-f", invalid}, "the flow is invalid"},
		{"Empty", cli.ExitInvalid, []string{"flows", "apply", "-f", empty}, "empty"},
		{"NoFile", cli.ExitInvalid, []string{"flows", "apply", "-f", filepath.Join(dir, "nope.json")}, "no such file"},
		{"FileFlagRequired", cli.ExitUsage, []string{"flows", "apply"}, `required flag(s) "file" not set`},
		{"UnknownFlow", cli.ExitNotFound, []string{"flows", "get", "nope"}, "FLOW_NOT_FOUND"},
		{"UnknownVersion", cli.ExitNotFound, []string{"flows", "get", "order", "--version", "9.0.0"}, "FLOW_NOT_FOUND"},
		{"BadVersion", cli.ExitInvalid, []string{"flows", "get", "order", "--version", "v9"}, "INVALID_REQUEST"},
		{"UnknownFlowVersions", cli.ExitNotFound, []string{"flows", "versions", "nope"}, "FLOW_NOT_FOUND"},
		{"MissingID", cli.ExitUsage, []string{"flows", "get"}, "accepts 1 arg(s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, c.env, tc.args...)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}
	t.Run("InvalidListsTheProblems", func(t *testing.T) {
		t.Parallel()
		r := run(t, c.env, "flows", "apply", "-f", invalid)
		require.Contains(t, r.stderr, "  version: ")
		require.Contains(t, r.stderr, "  steps: a flow needs at least one step")
	})
}

// TestFlowsScope needs the flows scope to apply a flow.
func TestFlowsScope(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--token", "ops:0ps:read,create,manage,events", "--token", "ci:c1:flows"})
	orderFile := filepath.Join(exampleFlows, "order.json")
	r := run(t, map[string]string{"DURAFLOW_SERVER": s.url, "DURAFLOW_TOKEN": "0ps"}, "flows", "apply", "-f", orderFile)
	require.Equal(t, cli.ExitAuth, r.code, r.stderr)
	require.Contains(t, r.stderr, "FORBIDDEN")
	r = run(t, map[string]string{"DURAFLOW_SERVER": s.url, "DURAFLOW_TOKEN": "c1"}, "flows", "apply", "-f", orderFile)
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
}

// TestServeRefusesInternalAddresses shows serve's default: no http step may
// reach an internal address, until --http-allow lists it.
func TestServeRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pong":true}`))
	}))
	t.Cleanup(backend.Close)
	def := []byte(`{"id": "ping", "version": "1.0.0", "initialStepId": "ping",
		"steps": {"ping": {"id": "ping", "type": "http", "config": {"url": "` + backend.URL + `/ping"}, "outputKey": "resp"}},
		"output": "resp.body"}`)

	strict := startServer(t, []string{"serve", "--db", sqliteDB(t)})
	_, err := strict.apiClient().ApplyFlow(t.Context(), def)
	var apiErr *apiclient.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, apiclient.CodeInvalidFlow, apiErr.Code)
	require.Equal(t, "steps.ping.config.url", apiErr.Problems[0].Path)

	allowed := startServer(t, []string{"serve", "--db", sqliteDB(t), "--http-allow", "127.0.0.1"})
	api := allowed.apiClient()
	_, err = api.ApplyFlow(t.Context(), def)
	require.NoError(t, err)
	_, err = api.Create(t.Context(), "ping", dftype.CreateRequest{ID: "p1"})
	require.NoError(t, err)
	info := waitSettled(t, api, "ping", "p1")
	require.Equal(t, dftype.StatusComplete, info.Status, "%+v", info.Error)
	require.JSONEq(t, `{"pong":true}`, string(info.Output))

	r := run(t, nil, "serve", "--db", sqliteDB(t), "--addr", "127.0.0.1:0", "--http-allow", "not an address!")
	require.Equal(t, cli.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--http-allow")
}

// TestWorkerRunsFlowsAppliedElsewhere applies a flow to one server and
// runs its instance on a worker that started before the flow existed.
func TestWorkerRunsFlowsAppliedElsewhere(t *testing.T) {
	t.Parallel()
	db := sqliteDB(t)
	api := startServer(t, []string{"serve", "--db", db, "--runner=false"})
	stderr := newLines()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--db", db, "--poll-interval", "50ms", "--flow-refresh", "100ms", "--log-format", "json", "--log-level", "info"},
			cli.WithOutput(newLines(), stderr), cli.WithLookupEnv(noEnv))
	}()
	t.Cleanup(func() {
		cancel()
		require.Equal(t, cli.ExitOK, <-done, stderr.String())
	})
	stderr.waitLine(t, 30*time.Second, func(l string) bool { _, ok := logLine(l, "started"); return ok })

	c := api.apiClient()
	_, err := c.ApplyFlow(t.Context(), []byte(`{"id": "hi", "version": "1.0.0", "initialStepId": "s",
		"steps": {"s": {"id": "s", "type": "transform", "config": {"expression": "'hi ' + name"}, "outputKey": "out"}}, "output": "out"}`))
	require.NoError(t, err)
	_, err = c.Create(t.Context(), "hi", dftype.CreateRequest{ID: "h1", Params: json.RawMessage(`{"name":"Ada"}`)})
	require.NoError(t, err)
	// The worker learns of the flow at its next refresh and then runs the
	// instance.
	stderr.waitLine(t, 30*time.Second, func(l string) bool {
		m, ok := logLine(l, "flow: registered a flow applied elsewhere")
		return ok && m["flow"] == "hi"
	})
	info := waitSettled(t, c, "hi", "h1")
	require.Equal(t, dftype.StatusComplete, info.Status, "%+v", info.Error)
	require.JSONEq(t, `"hi Ada"`, string(info.Output))
}
