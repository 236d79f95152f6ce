package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

func mustParseToken(t *testing.T, spec string) httpapi.Token {
	t.Helper()
	tok, err := httpapi.ParseToken(spec)
	require.NoError(t, err)
	return tok
}

func TestTokens(t *testing.T) {
	t.Parallel()
	adminHash := sha256.Sum256([]byte("admin-secret"))
	b := setup(t, "admin-secret", withTick, func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tokens = []httpapi.Token{
			mustParseToken(t, "reader:reader-secret:read"),
			mustParseToken(t, "admin:sha256="+hex.EncodeToString(adminHash[:])+":*"),
			mustParseToken(t, "cron:cron:with:colons:tick"),
		}
	})
	_, err := b.api.Create(b.ctx, "greet", dftype.CreateRequest{ID: "a-1"})
	require.NoError(t, err)

	const list = "/api/workflows/greet/instances"
	for _, tc := range []struct {
		name      string
		auth      []string
		method    string
		path      string
		status    int
		code      apiclient.Code
		errHas    string
		challenge bool
	}{
		{"missing", nil, "GET", list, 401, apiclient.CodeUnauthorized, "missing bearer token", true},
		{"wrong secret", []string{"Authorization: Bearer nope"}, "GET", list, 401, apiclient.CodeUnauthorized, "unknown bearer token", true},
		{"hash instead of secret", []string{"Authorization: Bearer " + hex.EncodeToString(adminHash[:])}, "GET", list, 401, apiclient.CodeUnauthorized, "unknown", true},
		{"basic scheme", []string{"Authorization: Basic cmVhZGVyOnJlYWRlci1zZWNyZXQ="}, "GET", list, 401, apiclient.CodeUnauthorized, "malformed", true},
		{"bearer without token", []string{"Authorization: Bearer"}, "GET", list, 401, apiclient.CodeUnauthorized, "malformed", true},
		{"bearer with blank token", []string{"Authorization: Bearer    "}, "GET", list, 401, apiclient.CodeUnauthorized, "malformed", true},
		{"token with spaces", []string{"Authorization: Bearer reader-secret extra"}, "GET", list, 401, apiclient.CodeUnauthorized, "malformed", true},
		{"two headers", []string{"Authorization: Bearer reader-secret", "Authorization: Bearer admin-secret"}, "GET", list, 401, apiclient.CodeUnauthorized, "more than one", true},
		{"reader reads", []string{"Authorization: Bearer reader-secret"}, "GET", list, 200, "", "", false},
		{"scheme is case-insensitive", []string{"Authorization: bearer reader-secret"}, "GET", list, 200, "", "", false},
		{"reader creates", []string{"Authorization: Bearer reader-secret"}, "POST", list, 403, apiclient.CodeForbidden, `token "reader" lacks the "create" scope`, false},
		{"reader pauses", []string{"Authorization: Bearer reader-secret"}, "POST", list + "/a-1/pause", 403, apiclient.CodeForbidden, `"manage"`, false},
		{"reader sends events", []string{"Authorization: Bearer reader-secret"}, "POST", list + "/a-1/events", 403, apiclient.CodeForbidden, `"events"`, false},
		{"reader ticks", []string{"Authorization: Bearer reader-secret"}, "POST", "/api/_runner/tick", 403, apiclient.CodeForbidden, `"tick"`, false},
		{"admin creates", []string{"Authorization: Bearer admin-secret"}, "POST", list, 201, "", "", false},
		{"admin pauses", []string{"Authorization: Bearer admin-secret"}, "POST", list + "/a-1/pause", 200, "", "", false},
		{"star excludes tick", []string{"Authorization: Bearer admin-secret"}, "POST", "/api/_runner/tick", 403, apiclient.CodeForbidden, `"tick"`, false},
		{"cron ticks", []string{"Authorization: Bearer cron:with:colons"}, "POST", "/api/_runner/tick", 200, "", "", false},
		{"cron reads", []string{"Authorization: Bearer cron:with:colons"}, "GET", list, 403, apiclient.CodeForbidden, `"read"`, false},
		{"healthz needs nothing", nil, "GET", "/healthz", 200, "", "", false},
		{"readyz needs nothing", []string{"Authorization: Bearer nope"}, "GET", "/readyz", 200, "", "", false},
		{"unauthenticated unknown route", nil, "GET", "/api/secret", 404, apiclient.CodeNotFound, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.call(t, tc.method, tc.path, "", tc.auth...)
			if tc.code == "" {
				r.requireOK(t, tc.status, nil)
				return
			}
			r.requireError(t, tc.status, tc.code, tc.errHas)
			if tc.challenge {
				require.Equal(t, `Bearer realm="duraflow"`, r.header.Get("WWW-Authenticate"))
			}
		})
	}

	// The typed client sends its token; errors match the package's sentinels.
	_, err = b.api.Get(b.ctx, "greet", "a-1")
	require.NoError(t, err)
	_, err = apiclient.New(b.srv.URL, "", nil).Get(b.ctx, "greet", "a-1")
	require.ErrorIs(t, err, httpapi.ErrUnauthorized)
	_, err = apiclient.New(b.srv.URL, "reader-secret", nil).Pause(b.ctx, "greet", "a-1")
	require.ErrorIs(t, err, httpapi.ErrForbidden)
	_, err = apiclient.New(b.srv.URL, "cron:with:colons", nil).Tick(b.ctx, apiclient.TickRequest{})
	require.NoError(t, err)

	// A server with tokens answers any Host.
	b.call(t, "GET", list, "", "Authorization: Bearer reader-secret", "Host: duraflow.example.com").requireOK(t, http.StatusOK, nil)
}

// routeActions lists every route of the API with the action it asks for.
var routeActions = []struct {
	method, path, body string
	action             httpapi.Action
}{
	{"GET", "/api/workflows", "", httpapi.ActionRead},
	{"GET", "/api/workflows/greet/instances", "", httpapi.ActionRead},
	{"POST", "/api/workflows/greet/instances", `{"id":"hook-2"}`, httpapi.ActionCreate},
	{"POST", "/api/workflows/greet/instances/batch", `{"instances":[{"id":"hook-3"}]}`, httpapi.ActionCreate},
	{"GET", "/api/workflows/greet/instances/hook-1", "", httpapi.ActionRead},
	{"GET", "/api/workflows/greet/instances/batch", "", httpapi.ActionRead},
	{"POST", "/api/workflows/greet/instances/hook-1/pause", "", httpapi.ActionManage},
	{"POST", "/api/workflows/greet/instances/hook-1/resume", "", httpapi.ActionManage},
	{"POST", "/api/workflows/greet/instances/hook-1/events", `{"type":"ping"}`, httpapi.ActionEvents},
	{"GET", "/api/workflows/greet/instances/hook-1/history", "", httpapi.ActionRead},
	{"POST", "/api/workflows/greet/instances/hook-1/terminate", "", httpapi.ActionManage},
	{"POST", "/api/workflows/greet/instances/hook-1/restart", "", httpapi.ActionManage},
	{"POST", "/api/workflows/greet/instances/hook-1/compensate", "", httpapi.ActionManage},
	{"POST", "/api/_runner/tick", `{"maxInstances":1}`, httpapi.ActionTick},
}

func TestAuthorizeHook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls []string
	b := setup(t, "", withTick, func(c *httpapi.Config, _ *testharness.Harness) {
		c.Tokens = []httpapi.Token{httpapi.NewToken("ignored", "s", httpapi.ActionRead)}
		c.Authorize = func(r *http.Request, action httpapi.Action) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, action))
			return nil
		}
	})
	_, err := b.h.Client.Create(b.ctx, "greet", dftype.CreateRequest{ID: "hook-1"})
	require.NoError(t, err)
	_, err = b.h.Client.Create(b.ctx, "greet", dftype.CreateRequest{ID: "batch"})
	require.NoError(t, err)

	for _, rt := range routeActions {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			mu.Lock()
			calls = nil
			mu.Unlock()
			r := b.call(t, rt.method, rt.path, rt.body)
			require.Less(t, r.status, 300, "body: %s", r.body)
			mu.Lock()
			defer mu.Unlock()
			want := []string{rt.method + " " + rt.path + " " + string(rt.action)}
			if rt.action == httpapi.ActionEvents {
				// Once the event is stored, whether the answer may show
				// the instance's error and output.
				want = append(want, rt.method+" "+rt.path+" "+string(httpapi.ActionRead))
			}
			require.Equal(t, want, calls)
		})
	}

	// Health checks never call it.
	mu.Lock()
	calls = nil
	mu.Unlock()
	b.call(t, "GET", "/healthz", "").requireOK(t, http.StatusOK, nil)
	b.call(t, "GET", "/readyz", "").requireOK(t, http.StatusOK, nil)
	mu.Lock()
	require.Empty(t, calls)
	mu.Unlock()
}

func TestAuthorizeHookErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(c *httpapi.Config, _ *testharness.Harness) {
		c.Authorize = func(r *http.Request, action httpapi.Action) error {
			switch r.Header.Get("X-Who") {
			case "":
				return fmt.Errorf("%w: who are you?", httpapi.ErrUnauthorized)
			case "guest":
				if action != httpapi.ActionRead {
					return fmt.Errorf("%w: guests only read", httpapi.ErrForbidden)
				}
				return nil
			case "broken":
				return errors.New("identity provider at 10.0.0.7 timed out")
			}
			return nil
		}
	})
	const list = "/api/workflows/greet/instances"
	b.call(t, "GET", list, "").requireError(t, 401, apiclient.CodeUnauthorized, "who are you?")
	b.call(t, "GET", list, "", "X-Who: guest").requireOK(t, 200, nil)
	b.call(t, "POST", list, "", "X-Who: guest").requireError(t, 403, apiclient.CodeForbidden, "guests only read")
	msg := b.call(t, "GET", list, "", "X-Who: broken").requireError(t, 500, apiclient.CodeInternal)
	require.NotContains(t, msg, "10.0.0.7", "internal errors are not shown")
	b.call(t, "POST", list, `{"id":"x"}`, "X-Who: admin").requireOK(t, 201, nil)
}

// TestNoAuth checks a server without authentication: it serves loopback
// hosts only, and refuses cross-origin browser requests.
func TestNoAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	const list = "/api/workflows/greet/instances"
	b.call(t, "GET", list, "").requireOK(t, 200, nil)
	b.call(t, "GET", list, "", "Host: localhost:8080").requireOK(t, 200, nil)
	b.call(t, "GET", list, "", "Host: [::1]:8080").requireOK(t, 200, nil)
	b.call(t, "GET", list, "", "Host: 127.0.0.2").requireOK(t, 200, nil)
	b.call(t, "GET", list, "", "Host: rebind.attacker.example:8080").
		requireError(t, 403, apiclient.CodeForbidden, "loopback")
	b.call(t, "GET", list, "", "Host: 10.1.2.3").requireError(t, 403, apiclient.CodeForbidden)
	b.call(t, "GET", "/healthz", "", "Host: 10.1.2.3").requireOK(t, 200, nil)

	// A browser page of another site may not post to the API.
	b.call(t, "POST", list, `{"id":"csrf"}`, "Sec-Fetch-Site: cross-site").
		requireError(t, 403, apiclient.CodeForbidden, "cross-origin")
	b.call(t, "POST", list, `{"id":"csrf"}`, "Origin: https://evil.example").
		requireError(t, 403, apiclient.CodeForbidden, "cross-origin")
	_, err := b.h.Client.Get(b.ctx, "greet", "csrf")
	require.ErrorIs(t, err, workflow.ErrInstanceNotFound)
	b.call(t, "POST", list, `{"id":"same"}`, "Sec-Fetch-Site: same-origin").requireOK(t, 201, nil)
	b.call(t, "GET", list, "", "Sec-Fetch-Site: cross-site").requireOK(t, 200, nil)
}

func TestParseToken(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("s3cret"))
	hexSum := hex.EncodeToString(sum[:])
	all := []httpapi.Action{httpapi.ActionRead, httpapi.ActionCreate, httpapi.ActionManage, httpapi.ActionEvents, httpapi.ActionFlows, httpapi.ActionSchedules, httpapi.ActionMetrics}
	for _, tc := range []struct {
		spec   string
		name   string
		scopes []httpapi.Action
		err    string
	}{
		{spec: "ci:s3cret:read,create,events", name: "ci", scopes: []httpapi.Action{httpapi.ActionRead, httpapi.ActionCreate, httpapi.ActionEvents}},
		{spec: "ci:sha256=" + hexSum + ":*", name: "ci", scopes: all},
		{spec: "ci:sha256=" + strings.ToUpper(hexSum) + ":read", name: "ci", scopes: []httpapi.Action{httpapi.ActionRead}},
		{spec: "cron.job-1:s3cret:tick", name: "cron.job-1", scopes: []httpapi.Action{httpapi.ActionTick}},
		{spec: "prom:s3cret:metrics", name: "prom", scopes: []httpapi.Action{httpapi.ActionMetrics}},
		{spec: "prom:s3cret:metrics@acme", err: `cannot have the "metrics" scope`},
		{spec: "admin:s3cret:*,tick", name: "admin", scopes: append(append([]httpapi.Action{}, all...), httpapi.ActionTick)},
		{spec: "dup:s3cret:read, read ,manage", name: "dup", scopes: []httpapi.Action{httpapi.ActionRead, httpapi.ActionManage}},
		{spec: "x:s3:cr:et:read", name: "x", scopes: []httpapi.Action{httpapi.ActionRead}},
		{spec: "", err: "name:secret:scopes"},
		{spec: "only-name", err: "name:secret:scopes"},
		{spec: "name:secret", err: "name:secret:scopes"},
		{spec: ":s3cret:read", err: "token name"},
		{spec: "bad name:s3cret:read", err: "token name"},
		{spec: "n::read", err: "empty secret"},
		{spec: "n:s3cret:", err: "empty scope"},
		{spec: "n:s3cret:read,,create", err: "empty scope"},
		{spec: "n:s3cret:admin", err: `unknown scope "admin"`},
		{spec: "n:sha256=abc:read", err: "64 hex digits"},
		{spec: "n:sha256=" + strings.Repeat("z", 64) + ":read", err: "64 hex digits"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			tok, err := httpapi.ParseToken(tc.spec)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.name, tok.Name)
			require.Equal(t, tc.scopes, tok.Scopes)
			if !strings.HasPrefix(tc.spec, "x:") {
				require.Equal(t, sum, tok.Hash)
			}
		})
	}
	tok := httpapi.NewToken("n", "s3cret", httpapi.ActionRead)
	require.Equal(t, httpapi.Token{Name: "n", Hash: sum, Scopes: []httpapi.Action{httpapi.ActionRead}}, tok)
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	tok := httpapi.NewToken("a", "secret", httpapi.ActionRead)
	for _, tc := range []struct {
		name string
		cfg  *httpapi.Config
		err  string
	}{
		{"nil", nil, "Config is required"},
		{"no client", &httpapi.Config{}, "Client is required"},
		{"relative prefix", &httpapi.Config{Client: h.Client, Prefix: "api"}, "Prefix"},
		{"prefix with a parameter", &httpapi.Config{Client: h.Client, Prefix: "/:x"}, "Prefix"},
		{"negative ticks", &httpapi.Config{Client: h.Client, MaxConcurrentTicks: -1}, "MaxConcurrentTicks"},
		{"negative body", &httpapi.Config{Client: h.Client, MaxBodyBytes: -1}, "MaxBodyBytes"},
		{"body raised", &httpapi.Config{Client: h.Client, MaxBodyBytes: httpapi.DefaultMaxBodyBytes + 1}, "MaxBodyBytes 1114113 must be between 1 and 1114112"},
		{"same name", &httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{tok, httpapi.NewToken("a", "other", httpapi.ActionRead)}}, "two tokens"},
		{"same secret", &httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{tok, httpapi.NewToken("b", "secret", httpapi.ActionRead)}}, "same secret"},
		{"no scopes", &httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{httpapi.NewToken("c", "x")}}, "no scopes"},
		{"unknown scope", &httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{httpapi.NewToken("c", "x", "admin")}}, "unknown scope"},
		{"no hash", &httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{{Name: "c", Scopes: []httpapi.Action{httpapi.ActionRead}}}}, "no hash"},
		{"no name", &httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{httpapi.NewToken("", "x", httpapi.ActionRead)}}, "no name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := httpapi.New(tc.cfg)
			require.ErrorContains(t, err, tc.err)
		})
	}

	s, err := httpapi.New(&httpapi.Config{Client: h.Client})
	require.NoError(t, err)
	require.False(t, s.AuthConfigured())
	s, err = httpapi.New(&httpapi.Config{Client: h.Client, Tokens: []httpapi.Token{tok}})
	require.NoError(t, err)
	require.True(t, s.AuthConfigured())
	s, err = httpapi.New(&httpapi.Config{Client: h.Client, Authorize: func(*http.Request, httpapi.Action) error { return nil }})
	require.NoError(t, err)
	require.True(t, s.AuthConfigured())
}

func TestCheckListenAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr    string
		auth    bool
		wantErr string
	}{
		{addr: "127.0.0.1:8080"},
		{addr: "127.3.4.5:80"},
		{addr: "localhost:8080"},
		{addr: "LocalHost:8080"},
		{addr: "[::1]:8080"},
		{addr: "[::ffff:127.0.0.1]:8080"},
		{addr: "127.0.0.1:0"},
		{addr: ":8080", wantErr: "every interface"},
		{addr: "", wantErr: "every interface"},
		{addr: "0.0.0.0:8080", wantErr: "without authentication"},
		{addr: "[::]:8080", wantErr: "without authentication"},
		{addr: "192.168.1.10:8080", wantErr: "without authentication"},
		{addr: "10.0.0.1:8080", wantErr: "without authentication"},
		{addr: "example.com:8080", wantErr: "without authentication"},
		{addr: "localhost.example.com:8080", wantErr: "without authentication"},
		{addr: "128.0.0.1:8080", wantErr: "without authentication"},
		{addr: "127.0.0.1", wantErr: "missing port"},
		{addr: ":8080", auth: true},
		{addr: "", auth: true},
		{addr: "0.0.0.0:8080", auth: true},
		{addr: "[::]:443", auth: true},
		{addr: "no-port", auth: true, wantErr: "missing port"},
	} {
		t.Run(fmt.Sprintf("%q auth=%v", tc.addr, tc.auth), func(t *testing.T) {
			err := httpapi.CheckListenAddr(tc.addr, tc.auth)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
