package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/console"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
)

// loginFrom logs in with secret, the request's X-Forwarded-For set to
// forwardedFor when it is not empty.
func (br *browser) loginFrom(secret, forwardedFor string) *answer {
	br.t.Helper()
	form := url.Values{"csrf": {br.csrf("/ui/login")}, "token": {secret}, "next": {"/ui/"}}
	req, err := http.NewRequest(http.MethodPost, br.base+"/ui/login", strings.NewReader(form.Encode()))
	require.NoError(br.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", br.origin)
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	return br.do(req)
}

// TestSessionsBoundedPerCredential: one token logging in again and again
// ends only its own oldest sessions; the bound of all sessions evicts from
// the credential that holds the most, never another token's only session.
func TestSessionsBoundedPerCredential(t *testing.T) {
	t.Parallel()
	b := setupWith(t, testharness.DefaultBackend(), func(cfg *console.Config) {
		cfg.Tokens = testTokens(t)
		cfg.MaxSessions = 4
	})
	admin := b.browser(t)
	require.Equal(t, http.StatusSeeOther, admin.login(adminSecret).status)

	var readers []*browser
	for range 10 {
		br := b.browser(t)
		require.Equal(t, http.StatusSeeOther, br.login(readSecret).status)
		readers = append(readers, br)
	}
	admin.get("/ui/").requireStatus(t, http.StatusOK)
	// The bound of all (4) left the reader three sessions: its newest.
	for i, br := range readers {
		want := http.StatusSeeOther
		if i >= len(readers)-3 {
			want = http.StatusOK
		}
		require.Equal(t, want, br.get("/ui/").status, "reader session %d", i)
	}

	// The bound per credential holds under the bound of all too.
	b = setupWith(t, testharness.DefaultBackend(), func(cfg *console.Config) {
		cfg.Tokens = testTokens(t)
		cfg.MaxSessionsPerCredential = 2
	})
	admin = b.browser(t)
	require.Equal(t, http.StatusSeeOther, admin.login(adminSecret).status)
	readers = readers[:0]
	for range 5 {
		br := b.browser(t)
		require.Equal(t, http.StatusSeeOther, br.login(readSecret).status)
		readers = append(readers, br)
	}
	admin.get("/ui/").requireStatus(t, http.StatusOK)
	require.Equal(t, http.StatusSeeOther, readers[2].get("/ui/").status)
	readers[3].get("/ui/").requireStatus(t, http.StatusOK)
	readers[4].get("/ui/").requireStatus(t, http.StatusOK)
}

// TestLoginThrottle: past LoginFailures unknown tokens from one address,
// every login from it is 429 with Retry-After, the right token's too,
// until the interval has given it another try (the clock is the
// harness's); other addresses are not held back, and X-Forwarded-For
// counts only from a trusted proxy.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	b := setupWith(t, testharness.DefaultBackend(), func(cfg *console.Config) {
		cfg.Tokens = testTokens(t)
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	br := b.browser(t)
	const client = "198.51.100.7"
	for i := range console.DefaultLoginFailures {
		require.Equal(t, http.StatusUnauthorized, br.loginFrom("wrong", client).status, "failure %d", i)
	}
	for _, secret := range []string{"wrong", adminSecret} {
		a := br.loginFrom(secret, client).requireStatus(t, http.StatusTooManyRequests)
		require.Equal(t, "6", a.header.Get("Retry-After"))
		require.Contains(t, a.body, "Too many failed logins")
		require.Empty(t, sessionCookies(a), "a throttled login made a session")
	}
	// Another address, and the proxy's own, may still log in.
	require.Equal(t, http.StatusSeeOther, b.browser(t).loginFrom(adminSecret, "198.51.100.8").status)
	require.Equal(t, http.StatusSeeOther, b.browser(t).login(adminSecret).status)

	b.h.Advance(5 * time.Second)
	a := br.loginFrom(adminSecret, client).requireStatus(t, http.StatusTooManyRequests)
	require.Equal(t, "1", a.header.Get("Retry-After"))
	b.h.Advance(time.Second)
	require.Equal(t, http.StatusSeeOther, br.loginFrom(adminSecret, client).status)

	// One more try per interval: a wrong one spends it.
	require.Equal(t, http.StatusUnauthorized, b.browser(t).loginFrom("wrong", client).status)
	b.browser(t).loginFrom(adminSecret, client).requireStatus(t, http.StatusTooManyRequests)

	// Without a trusted proxy X-Forwarded-For is ignored: every attempt
	// counts against the peer's address.
	b = setup(t, testharness.DefaultBackend(), testTokens(t)...)
	br = b.browser(t)
	for i := range console.DefaultLoginFailures {
		require.Equal(t, http.StatusUnauthorized, br.loginFrom("wrong", fmt.Sprintf("203.0.113.%d", i+1)).status)
	}
	b.browser(t).loginFrom(adminSecret, "203.0.113.200").requireStatus(t, http.StatusTooManyRequests)
}

func sessionCookies(a *answer) []*http.Cookie {
	var out []*http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "duraflow_console" && c.Value != "" {
			out = append(out, c)
		}
	}
	return out
}

// TestLoginNextStaysInTheConsole: the page a login returns to is a console
// path, its dot segments resolved as a browser resolves them.
func TestLoginNextStaysInTheConsole(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend(), testTokens(t)...)
	for next, want := range map[string]string{
		"/ui/../../evil":                 "/ui/",
		"/ui/../evil":                    "/ui/",
		"/ui/%2e%2e/evil":                "/ui/",
		"/ui/%2E%2E/%2e%2e/evil":         "/ui/",
		"/ui/..%2fevil":                  "/ui/",
		"/ui/./instances/../workers":     "/ui/workers",
		"/ui//instances":                 "/ui/instances",
		"/ui/instances?workflow=approve": "/ui/instances?workflow=approve",
		"/ui/instances/a%2Fb/x":          "/ui/instances/a%2Fb/x",
		"/ui":                            "/ui",
		"/ui/":                           "/ui/",
		"//evil.example/ui/":             "/ui/",
		"https://evil.example/ui/":       "/ui/",
		"/uievil":                        "/ui/",
		"/ui\\..\\evil":                  "/ui/",
		"/ui/#frag":                      "/ui/",
		"":                               "/ui/",
	} {
		br := b.browser(t)
		a := br.post("/ui/login", url.Values{"csrf": {br.csrf("/ui/login")}, "token": {adminSecret}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, a.status, next)
		require.Equal(t, want, a.header.Get("Location"), "next %q", next)
	}
}

// TestSecureCookies: the cookies are Secure with SecureCookies, and behind
// a trusted proxy that says the request came over https; a header from
// any other peer changes nothing.
func TestSecureCookies(t *testing.T) {
	t.Parallel()
	secure := func(cfgFunc func(*console.Config), header map[string]string) bool {
		b := setupWith(t, testharness.DefaultBackend(), func(cfg *console.Config) {
			cfg.Tokens = testTokens(t)
			cfgFunc(cfg)
		})
		// A cookie jar keeps Secure cookies from plain HTTP: the login
		// cookie is sent by hand.
		br := b.browser(t)
		page := br.get("/ui/login").requireStatus(t, http.StatusOK)
		var loginCookie *http.Cookie
		for _, c := range (&http.Response{Header: page.header}).Cookies() {
			if c.Name == "duraflow_console_login" {
				loginCookie = c
			}
		}
		require.NotNil(t, loginCookie)
		m := csrfRE.FindStringSubmatch(page.body)
		require.NotNil(t, m)
		form := url.Values{"csrf": {m[1]}, "token": {adminSecret}}
		req, err := http.NewRequest(http.MethodPost, br.base+"/ui/login", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", br.origin)
		req.Header.Set("Cookie", "duraflow_console_login="+loginCookie.Value)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		a := (&browser{t: t, client: &http.Client{CheckRedirect: br.client.CheckRedirect}}).do(req)
		require.Equal(t, http.StatusSeeOther, a.status, a.body)
		return sessionCookieOf(t, a).Secure
	}
	https := map[string]string{"X-Forwarded-Proto": "https"}
	require.False(t, secure(func(*console.Config) {}, nil))
	require.False(t, secure(func(*console.Config) {}, https), "X-Forwarded-Proto from a peer that is no trusted proxy")
	require.True(t, secure(func(cfg *console.Config) { cfg.SecureCookies = true }, nil))
	trust := func(cfg *console.Config) {
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	require.True(t, secure(trust, https))
	require.False(t, secure(trust, map[string]string{"X-Forwarded-Proto": "http"}))
}

// TestConsoleAppliesAPILimits: the console holds ids, workflow names,
// event types, event payloads, forms and pages to the limits it is given,
// the API's, and writes nothing past them.
func TestConsoleAppliesAPILimits(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setupWith(t, backend, func(cfg *console.Config) {
			cfg.Limits = httpapi.Limits{MaxEventTypeLength: 8, MaxPayloadBytes: 1000, MaxPageSize: 2, MaxIDLength: 10, MaxWorkflowNameLength: 7}
			cfg.MaxBodyBytes = 4000
		})
		for _, id := range []string{"a1", "a2", "a3"} {
			b.create(t, "approve", id)
		}
		b.h.RunUntilIdle()
		br := b.browser(t)

		for _, tc := range []struct {
			name, typ, payload string
			status             int
			code               string
		}{
			{"type", strings.Repeat("t", 26), `{}`, http.StatusBadRequest, "INVALID_EVENT_TYPE"},
			{"payload", "approval", `"` + strings.Repeat("x", 1500) + `"`, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
			{"form", "approval", `"` + strings.Repeat("x", 5000) + `"`, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
		} {
			form := url.Values{"csrf": {br.csrf("/ui/instances/approve/a1/confirm?action=pause")}, "action": {"event"}, "type": {tc.typ}, "payload": {tc.payload}}
			a := br.post("/ui/instances/approve/a1/action", form)
			require.Equal(t, tc.status, a.status, tc.name)
			require.Contains(t, a.body, `<code id="error-code">`+tc.code+`</code>`, tc.name)
		}
		conf := br.get("/ui/instances/approve/a1/confirm?action=event&type=" + strings.Repeat("t", 26))
		require.Equal(t, http.StatusBadRequest, conf.status)
		require.Empty(t, b.h.History("approve", "a1").Events, "a refused event was stored")
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)

		for path, code := range map[string]string{
			"/ui/instances/approve/" + strings.Repeat("x", 11):                           "INVALID_INSTANCE_ID",
			"/ui/instances/approve/a1234567890/lifecycle":                                "INVALID_INSTANCE_ID",
			"/ui/instances/approves/a1":                                                  "INVALID_REQUEST",
			"/ui/instances?id=" + strings.Repeat("x", 11):                                "INVALID_INSTANCE_ID",
			"/ui/workflows/approves":                                                     "INVALID_REQUEST",
			"/ui/instances/approve/" + strings.Repeat("x", 11) + "/confirm?action=pause": "INVALID_INSTANCE_ID",
		} {
			a := br.get(path)
			require.Equal(t, http.StatusBadRequest, a.status, path)
			require.Contains(t, a.body, `<code id="error-code">`+code+`</code>`, path)
		}

		// A page holds MaxPageSize instances.
		page := br.get("/ui/instances").requireStatus(t, http.StatusOK)
		require.Len(t, regexpInstance.FindAllStringSubmatch(page.body, -1), 2)
		require.Regexp(t, regexpNext, page.body)

		// Within the limits the event goes through.
		require.Equal(t, http.StatusSeeOther, br.act("approve", "a1", "event", url.Values{"type": {"approval"}, "payload": {`{"by":"ada"}`}}).status)
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "a1", dftype.StatusComplete)
	})
}

// payloadCounter counts the payload bytes the lists of a store return:
// what the console's reads hold.
type payloadCounter struct {
	db.Store
	mu    sync.Mutex
	bytes int
}

func (s *payloadCounter) add(n int) {
	s.mu.Lock()
	s.bytes += n
	s.mu.Unlock()
}

func (s *payloadCounter) take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.bytes
	s.bytes = 0
	return n
}

func (s *payloadCounter) InstanceList(ctx context.Context, p *db.InstanceListParams) ([]*db.Instance, error) {
	rows, err := s.Store.InstanceList(ctx, p)
	for _, r := range rows {
		s.add(len(r.Params) + len(r.Metadata) + len(r.Output) + len(r.ErrorMessage))
	}
	return rows, err
}

func (s *payloadCounter) StepList(ctx context.Context, p *db.StepListParams) ([]*db.Step, error) {
	rows, err := s.Store.StepList(ctx, p)
	for _, r := range rows {
		s.add(len(r.Result) + len(r.ErrorMessage))
	}
	return rows, err
}

func (s *payloadCounter) EventList(ctx context.Context, p *db.EventListParams) ([]*db.Event, error) {
	rows, err := s.Store.EventList(ctx, p)
	for _, r := range rows {
		s.add(len(r.Payload))
	}
	return rows, err
}

// TestPagesReadNoPayloadTheyDoNotShow: the overview and the instance list
// read no params, output or error of any instance (they used to read a
// page of up to 1000 ended instances whole per workflow), and the instance
// page holds its history to a page's byte budget.
func TestPagesReadNoPayloadTheyDoNotShow(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		var counter *payloadCounter
		b := setupWith(t, backend, func(cfg *console.Config) {
			counter = &payloadCounter{Store: cfg.Stats.(db.Store)}
			c, err := client.New(&client.Config{Store: counter, Registry: cfg.Client.Registry(), Clock: cfg.Clock})
			require.NoError(t, err)
			cfg.Client = c
		})
		big := json.RawMessage(`"` + strings.Repeat("x", 300<<10) + `"`)
		for i := range 20 {
			_, err := b.h.Client.Create(b.ctx, "greet", dftype.CreateRequest{ID: fmt.Sprintf("g%d", i), Params: big})
			require.NoError(t, err)
		}
		b.h.RunUntilIdle()
		counter.take()

		ov := b.browser(t).get("/ui/").requireStatus(t, http.StatusOK)
		require.Contains(t, ov.body, `<p id="ended">20 instances ended`)
		require.Zero(t, counter.take(), "the overview read payloads")
		list := b.browser(t).get("/ui/instances").requireStatus(t, http.StatusOK)
		require.Len(t, regexpInstance.FindAllStringSubmatch(list.body, -1), 20)
		require.Zero(t, counter.take(), "the instance list read payloads")

		// An instance with 30 events of 300 KiB: its page holds a page's
		// budget of them, and says there is more.
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		for range 30 {
			require.NoError(t, b.h.Client.SendEvent(b.ctx, "approve", "a1", "note", big))
		}
		counter.take()
		page := b.browser(t).get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.LessOrEqual(t, counter.take(), client.DefaultPagePayloadBytes+len(big))
		require.Contains(t, page.body, `id="truncated"`)
	})
}

// TestNewChecksTheNewBounds: the bounds of sessions, logins, limits and
// forms are checked when the console is made.
func TestNewChecksTheNewBounds(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	for _, tc := range []struct {
		cfg  console.Config
		want string
	}{
		{console.Config{MaxSessions: 5, MaxSessionsPerCredential: 6}, "MaxSessionsPerCredential 6 must be between 1 and MaxSessions (5)"},
		{console.Config{MaxSessionsPerCredential: -1}, "MaxSessionsPerCredential -1"},
		{console.Config{LoginFailures: -1}, "LoginFailures -1"},
		{console.Config{LoginFailureInterval: -time.Second}, "LoginFailureInterval -1s must not be negative"},
		{console.Config{Limits: httpapi.Limits{MaxPageSize: 1001}}, "MaxPageSize 1001"},
		{console.Config{MaxBodyBytes: httpapi.DefaultMaxBodyBytes + 1}, "MaxBodyBytes 1114113"},
		{console.Config{TrustedProxies: []netip.Prefix{{}}}, "TrustedProxies"},
	} {
		cfg := tc.cfg
		cfg.Client = h.Client
		_, err := console.New(&cfg)
		require.ErrorContains(t, err, tc.want)
	}
	// A small MaxSessions lowers the default bound per token with it.
	_, err := console.New(&console.Config{Client: h.Client, MaxSessions: 5})
	require.NoError(t, err)
}
