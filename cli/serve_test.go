package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/cli"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/hook"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/workflow"
)

func TestServeTokens(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t),
		"--token", "admin:adm1n:*", "--token", "reader:r3ad:read"})
	env := func(token string) map[string]string {
		return map[string]string{"DURAFLOW_SERVER": s.url, "DURAFLOW_TOKEN": token}
	}
	cases := []struct {
		name  string
		token string
		args  []string
		code  int
		msg   string
	}{
		{"Missing", "", []string{"workflows", "list"}, cli.ExitAuth, "UNAUTHORIZED"},
		{"Wrong", "nope", []string{"workflows", "list"}, cli.ExitAuth, "UNAUTHORIZED"},
		{"UnderScoped", "r3ad", []string{"instances", "create", "hello"}, cli.ExitAuth, "FORBIDDEN"},
		{"Read", "r3ad", []string{"workflows", "list"}, cli.ExitOK, ""},
		{"Create", "adm1n", []string{"instances", "create", "hello", "--params", `{"name":"Ada"}`}, cli.ExitOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, env(tc.token), tc.args...)
			require.Equal(t, tc.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}

	// --token on the command line wins over DURAFLOW_TOKEN.
	r := run(t, env("nope"), "workflows", "list", "--token", "r3ad")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
}

func TestServeTokensFromEnvironment(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t)}, cli.WithLookupEnv(envMap(map[string]string{
		"DURAFLOW_TOKENS": "admin:adm1n:*; reader:r3ad:read",
	})))
	r := run(t, map[string]string{"DURAFLOW_SERVER": s.url}, "workflows", "list")
	require.Equal(t, cli.ExitAuth, r.code, r.stderr)
	for _, token := range []string{"adm1n", "r3ad"} {
		r = run(t, map[string]string{"DURAFLOW_SERVER": s.url, "DURAFLOW_TOKEN": token}, "workflows", "list")
		require.Equal(t, cli.ExitOK, r.code, r.stderr)
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	db := sqliteDB(t)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		msg  string
	}{
		{"PublicAddrWithoutTokens", []string{"serve", "--addr", "0.0.0.0:0"}, nil, "refusing to listen"},
		{"EveryInterfaceWithoutTokens", []string{"serve", "--addr", ":0"}, nil, "refusing to listen on every interface"},
		{"PublicAddrFromEnvironment", []string{"serve"}, map[string]string{"DURAFLOW_ADDR": "0.0.0.0:0"}, "refusing to listen"},
		{"BadToken", []string{"serve", "--addr", "127.0.0.1:0", "--token", "nameonly"}, nil, "--token"},
		{"BadScope", []string{"serve", "--addr", "127.0.0.1:0", "--token", "a:b:fly"}, nil, `unknown scope "fly"`},
		{"BadConcurrency", []string{"worker", "--concurrency", "0"}, nil, "--concurrency 0"},
		{"BadMaxLeaseLosses", []string{"worker", "--max-lease-losses", "0"}, nil, "--max-lease-losses 0 must be at least 1"},
		{"BadMaxInvokeDepth", []string{"worker", "--max-invoke-depth", "0"}, nil, "--max-invoke-depth 0 must be at least 1"},
		{"BadMaxLeaseLossesFromEnvironment", []string{"worker"}, map[string]string{"DURAFLOW_MAX_LEASE_LOSSES": "0"}, "--max-lease-losses 0 must be at least 1"},
		{"BadBodyTimeout", []string{"serve", "--addr", "127.0.0.1:0", "--body-timeout", "0s"}, nil, "--body-timeout 0s must be positive"},
		{"LimitPastTheEngines", []string{"serve", "--addr", "127.0.0.1:0", "--max-page-size", "1001"}, nil, "MaxPageSize 1001 must be between 1 and 1000"},
		{"BadLimitFromEnvironment", []string{"serve", "--addr", "127.0.0.1:0"}, map[string]string{"DURAFLOW_MAX_PAGE_SIZE": "-1"}, "MaxPageSize -1"},
		{"BadEnvironmentValue", []string{"worker"}, map[string]string{"DURAFLOW_CONCURRENCY": "many"}, "$DURAFLOW_CONCURRENCY"},
		{"BadLogFormat", []string{"worker", "--log-format", "xml"}, nil, "--log-format"},
		{"BadDatabaseURL", []string{"worker", "--db", "mysql://x"}, nil, "unsupported database URL scheme"},
		{"Arguments", []string{"serve", "extra"}, nil, "unknown command"},
		{"BadQueue", []string{"worker", "--queues", "default,bad queue"}, nil, `queue "bad queue"`},
		{"BadQueueFromEnvironment", []string{"worker"}, map[string]string{"DURAFLOW_QUEUES": "-x"}, `queue "-x"`},
		{"EveryQueueAndAnother", []string{"worker", "--queues", "*,default"}, nil, `queue "*"`},
		{"BadWorkflowName", []string{"worker", "--workflows", "-bad"}, nil, `"-bad"`},
		{"APIPrefixOnTheConsole", []string{"serve", "--addr", "127.0.0.1:0", "--api-prefix", "/ui"}, nil, "collides with the web console"},
		{"TriggerOnTheConsole", []string{"serve", "--addr", "127.0.0.1:0", "--trigger", "/ui/orders=hello"}, nil, "collides with the web console"},
		{"TriggerOnTheMetrics", []string{"serve", "--addr", "127.0.0.1:0", "--trigger", "GET /metrics=hello"}, nil, "trigger /metrics collides with the metrics at /metrics (choose another path or --metrics=false)"},
		{"TriggerUnderTheMetrics", []string{"serve", "--addr", "127.0.0.1:0", "--trigger", "POST /metrics/orders=hello"}, nil, "collides with the metrics"},
		{"APIPrefixOnTheMetrics", []string{"serve", "--addr", "127.0.0.1:0", "--api-prefix", "/metrics"}, nil, "collides with the metrics"},
		{"BodyBoundRaised", []string{"serve", "--addr", "127.0.0.1:0", "--max-body-bytes", "524288000"}, nil, "--max-body-bytes 524288000 must be between 1 and 1114112"},
		{"BodyBoundRaisedFromEnvironment", []string{"serve", "--addr", "127.0.0.1:0"}, map[string]string{"DURAFLOW_MAX_BODY_BYTES": "1114113"}, "may be lowered, not raised"},
		{"NegativeBodyBound", []string{"serve", "--addr", "127.0.0.1:0", "--max-body-bytes", "-1"}, nil, "--max-body-bytes -1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DURAFLOW_DATABASE_URL": db}
			for k, v := range tc.env {
				env[k] = v
			}
			r := run(t, env, tc.args...)
			require.Equal(t, cli.ExitUsage, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}
}

func TestServeTokensAllowAnyAddress(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := newLines()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--db", sqliteDB(t), "--addr", "0.0.0.0:0", "--token", "a:b:*", "--log-format", "json"},
			cli.WithOutput(&strings.Builder{}, stderr), cli.WithLookupEnv(noEnv))
	}()
	stderr.waitLine(t, 10*time.Second, func(l string) bool { _, ok := logLine(l, "serving the HTTP API"); return ok })
	cancel()
	require.Equal(t, cli.ExitOK, <-done)
}

func TestServeTickOnly(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--runner=false", "--tick",
		"--token", "admin:adm1n:*", "--token", "cron:cr0n:tick"})
	c := s.client(t)
	c.env["DURAFLOW_TOKEN"] = "adm1n"
	c.run(cli.ExitOK, "instances", "create", "hello", "t1", "--wait", "0")

	// Without a runner loop nothing runs until a tick.
	var info struct{ Details struct{ Status string } }
	c.json(&info, "instances", "get", "hello", "t1")
	require.Equal(t, "queued", info.Details.Status)

	_, err := apiclient.New(s.url, "adm1n", nil).Tick(context.Background(), apiclient.TickRequest{})
	require.ErrorIs(t, err, httpapi.ErrForbidden, "the tick needs its own scope")
	res, err := apiclient.New(s.url, "cr0n", nil).Tick(context.Background(), apiclient.TickRequest{MaxInstances: 10})
	require.NoError(t, err)
	require.Equal(t, &apiclient.TickResult{Processed: 1, MaxInstances: 10, MaxSteps: 0}, res)
	c.json(&info, "instances", "get", "hello", "t1")
	require.Equal(t, "complete", info.Details.Status)
}

func TestServeWithoutTickHasNoTickRoute(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t)})
	_, err := apiclient.New(s.url, "", nil).Tick(context.Background(), apiclient.TickRequest{})
	var api *apiclient.APIError
	require.ErrorAs(t, err, &api)
	require.Equal(t, http.StatusNotFound, api.Status)
}

func TestServeReady(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--api-prefix", "/duraflow"})
	c := apiclient.New(s.url, "", nil)
	require.NoError(t, c.Health(context.Background()))
	require.NoError(t, c.Ready(context.Background()))
	r := run(t, map[string]string{"DURAFLOW_SERVER": s.url}, "workflows", "list", "--api-prefix", "/duraflow")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	r = run(t, map[string]string{"DURAFLOW_SERVER": s.url}, "workflows", "list")
	require.Equal(t, cli.ExitNotFound, r.code, "the default /api prefix is not served: %s", r.stderr)
}

func TestOnWorkflowEnqueued(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		calls    []hook.Enqueued
		failures = 1
		got      = make(chan struct{}, 10)
	)
	onEnqueued := func(_ context.Context, e hook.Enqueued) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, e)
		if failures > 0 {
			failures--
			return errors.New("host not ready")
		}
		got <- struct{}{}
		return nil
	}
	s := startServer(t, []string{"serve", "--db", sqliteDB(t)}, cli.WithOnWorkflowEnqueued(onEnqueued))
	c := s.client(t)
	c.run(cli.ExitOK, "instances", "create", "hello", "hooked")
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the hook was not delivered")
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, calls, 2, "one failed attempt, then the delivery")
	for i, e := range calls {
		require.Equal(t, "hello", e.WorkflowName)
		require.Equal(t, "hooked", e.InstanceID)
		require.Equal(t, "create", e.Reason)
		require.Equal(t, i+1, e.Attempt)
	}
}

func TestMigrateCommands(t *testing.T) {
	t.Parallel()
	db := sqliteDB(t)
	env := map[string]string{"DURAFLOW_DATABASE_URL": db}

	r := run(t, env, "migrate", "status")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^VERSION\s+NAME\s+APPLIED\s+APPLIED AT$`, r.stdout)
	require.Regexp(t, `(?m)^1\s+00001_init.sql\s+no\s+-$`, r.stdout)
	require.Contains(t, r.stdout, "pending: run migrate up")

	r = run(t, env, "migrate", "up")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "applied 00001_init.sql\n")
	require.Contains(t, r.stdout, "is up to date")

	var st struct {
		Migrations []struct {
			Version   int64
			Name      string
			Applied   bool
			AppliedAt *time.Time
		}
	}
	r = run(t, env, "migrate", "status", "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.NotEmpty(t, st.Migrations)
	for _, m := range st.Migrations {
		require.True(t, m.Applied, m.Name)
		require.NotNil(t, m.AppliedAt)
	}

	r = run(t, env, "migrate", "up")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "(0 migration(s) applied now")

	r = run(t, nil, "migrate", "status", "--db", "mysql://nope")
	require.Equal(t, cli.ExitUsage, r.code, r.stderr)
}

func TestWorkerDrainsOnCancel(t *testing.T) {
	t.Parallel()
	db := sqliteDB(t)
	s := startServer(t, []string{"serve", "--db", db, "--runner=false"})
	c := s.client(t)
	c.run(cli.ExitOK, "instances", "create", "flaky", "w1", "--params", `{"work":"300 milliseconds"}`, "--wait", "0")

	ctx, cancel := context.WithCancel(context.Background())
	stderr := newLines()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--db", db, "--log-format", "json", "--poll-interval", "50ms"},
			cli.WithWorkflows(func(reg *workflow.Registry) error { return nil }),
			cli.WithOutput(&strings.Builder{}, stderr), cli.WithLookupEnv(noEnv))
	}()
	stderr.waitLine(t, 10*time.Second, func(l string) bool { _, ok := logLine(l, "started"); return ok })
	require.Contains(t, stderr.String(), "no workflows are registered in this binary")
	cancel()
	require.Equal(t, cli.ExitOK, <-done)
	require.Contains(t, stderr.String(), `"msg":"stopped"`)

	// A worker with the workflows runs it; cancelling it mid-step lets the
	// step finish (the shutdown timeout is far longer than the step).
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	stderr = newLines()
	go func() {
		done <- cli.Run(ctx, []string{"worker", "--db", db, "--log-format", "json", "--poll-interval", "50ms"},
			cli.WithWorkflows(registerDemo), cli.WithOutput(&strings.Builder{}, stderr), cli.WithLookupEnv(noEnv))
	}()
	c.waitStatus("flaky", "w1", "running")
	cancel()
	require.Equal(t, cli.ExitOK, <-done)
	var info struct {
		Details struct {
			Status string
			Output json.RawMessage
		}
	}
	c.json(&info, "instances", "get", "flaky", "w1")
	require.Equal(t, "complete", info.Details.Status, "the running step finished during the drain")
	require.JSONEq(t, `{"attempts":1}`, string(info.Details.Output))
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		code int
	}{
		{nil, cli.ExitOK},
		{errors.New("boom"), cli.ExitError},
		{&apiclient.APIError{Status: 404, Code: apiclient.CodeInstanceNotFound}, cli.ExitNotFound},
		{&apiclient.APIError{Status: 404, Code: apiclient.CodeNotFound}, cli.ExitNotFound},
		{&apiclient.APIError{Status: 409, Code: apiclient.CodeInstanceTerminal}, cli.ExitConflict},
		{&apiclient.APIError{Status: 400, Code: apiclient.CodeInvalidRequest}, cli.ExitInvalid},
		{&apiclient.APIError{Status: 413, Code: apiclient.CodePayloadTooLarge}, cli.ExitInvalid},
		{&apiclient.APIError{Status: 400, Code: apiclient.CodePayloadTooDeep}, cli.ExitInvalid},
		{fmt.Errorf("params: %w", workflow.ErrPayloadTooDeep), cli.ExitInvalid},
		{&apiclient.APIError{Status: 401, Code: apiclient.CodeUnauthorized}, cli.ExitAuth},
		{&apiclient.APIError{Status: 403, Code: apiclient.CodeForbidden}, cli.ExitAuth},
		{&apiclient.APIError{Status: 500, Code: apiclient.CodeInternal}, cli.ExitError},
		{&apiclient.APIError{Status: 502, Code: "HTTP_502"}, cli.ExitUnavailable},
		{&apiclient.APIError{Status: 503, Code: apiclient.CodeNotReady}, cli.ExitUnavailable},
		{fmt.Errorf("creating: %w", workflow.ErrInvalidInstanceID), cli.ExitInvalid},
		{fmt.Errorf("x: %w", workflow.ErrInstanceNotFound), cli.ExitNotFound},
		{context.DeadlineExceeded, cli.ExitUnavailable},
		{&os.PathError{Op: "open", Path: "x", Err: os.ErrNotExist}, cli.ExitError},
	}
	for _, tc := range cases {
		require.Equal(t, tc.code, cli.ExitCode(tc.err), "%v", tc.err)
	}
}

func TestHostFailuresExitOne(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t)})
	busy := strings.TrimPrefix(s.url, "http://")
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"AddressInUse", []string{"serve", "--db", sqliteDB(t), "--addr", busy}, "listening on " + busy},
		{"DatabaseDown", []string{"worker", "--db", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, "unreachable"},
		{"MigrateDatabaseDown", []string{"migrate", "status", "--db", "postgres://postgres@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"}, "unreachable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, nil, tc.args...)
			require.Equal(t, cli.ExitError, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stderr, tc.msg)
		})
	}
}

// TestServeLoweredLimits: the request limits of --max-… flags and their
// variables are the server's.
func TestServeLoweredLimits(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--runner=false", "--max-id-length", "5", "--max-payload-bytes", "1024"},
		cli.WithLookupEnv(envMap(map[string]string{"DURAFLOW_MAX_BATCH_SIZE": "2"})))
	api := apiclient.New(s.url, "", nil)
	ctx := context.Background()
	_, err := api.Create(ctx, "hello", dftype.CreateRequest{ID: "abcdef"})
	require.ErrorIs(t, err, workflow.ErrInvalidInstanceID)
	require.ErrorContains(t, err, "the limit is 5")
	_, err = api.Create(ctx, "hello", dftype.CreateRequest{ID: "abc", Params: json.RawMessage(`{"name":"` + strings.Repeat("x", 1024) + `"}`)})
	require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
	_, err = api.CreateBatch(ctx, "hello", []dftype.CreateRequest{{ID: "a"}, {ID: "b"}, {ID: "c"}})
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	require.ErrorContains(t, err, "the limit is 2")
	_, err = api.CreateBatch(ctx, "hello", []dftype.CreateRequest{{ID: "a"}, {ID: "b"}})
	require.NoError(t, err)
}
