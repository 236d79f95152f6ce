package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/console"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
)

func TestLogin(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend, testTokens(t)...)
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)

		// Without a session a page sends to the login form, and a POST is
		// refused.
		r := br.get("/ui/instances/approve/a1")
		require.Equal(t, http.StatusSeeOther, r.status)
		require.Equal(t, "/ui/login?next=%2Fui%2Finstances%2Fapprove%2Fa1", r.header.Get("Location"))
		br.post("/ui/instances/approve/a1/action", url.Values{"action": {"pause"}}).requireStatus(t, http.StatusUnauthorized)

		// Wrong tokens, and one without the read scope.
		require.Contains(t, br.login("nope").requireStatus(t, http.StatusUnauthorized).body, "Unknown token.")
		require.Contains(t, br.login(tickSecret).requireStatus(t, http.StatusForbidden).body, "lacks the read scope")
		// The login form repeats its cookie: without it, refused.
		br.post("/ui/login", url.Values{"csrf": {"forged"}, "token": {adminSecret}}).requireStatus(t, http.StatusForbidden)

		login := br.login(adminSecret)
		require.Equal(t, http.StatusSeeOther, login.status, login.body)
		require.Equal(t, "/ui/", login.header.Get("Location"))
		cookie := sessionCookieOf(t, login)
		require.True(t, cookie.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
		require.Equal(t, "/ui", cookie.Path)
		require.False(t, cookie.Secure, "plain HTTP")
		require.NotContains(t, cookie.Value, adminSecret)
		require.Len(t, cookie.Value, 43, "256 random bits, base64url")

		page := br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.Contains(t, page.body, `id="action-terminate"`)
		require.Contains(t, page.body, "admin")
		require.Equal(t, http.StatusSeeOther, br.act("approve", "a1", "pause", nil).status)
		b.h.RequireStatus("approve", "a1", dftype.StatusPaused)

		// Logout ends the session on the server: the old cookie is dead.
		csrf := br.csrf("/ui/")
		out := br.post("/ui/logout", url.Values{"csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, out.status)
		replay := b.browser(t)
		replay.client.Jar.SetCookies(mustURL(t, b.srv.URL+"/ui/"), []*http.Cookie{{Name: "duraflow_console", Value: cookie.Value, Path: "/ui"}})
		require.Equal(t, http.StatusSeeOther, replay.get("/ui/").status)
	})
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend, testTokens(t)...)
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)
		require.Equal(t, http.StatusSeeOther, br.login(readSecret).status)

		page := br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK)
		require.NotContains(t, page.body, `id="actions"`)
		require.NotContains(t, page.body, `id="action-pause"`)
		require.NotContains(t, page.body, `id="send-event"`)
		for _, action := range []string{"pause", "terminate", "restart", "resume"} {
			require.Contains(t, br.get("/ui/instances/approve/a1/confirm?action="+action).requireStatus(t, http.StatusForbidden).body, `lacks the &#34;manage&#34; scope`)
		}
		br.get("/ui/instances/approve/a1/confirm?action=event&type=approval").requireStatus(t, http.StatusForbidden)

		// The POST itself is refused, whatever the page showed.
		csrf := br.csrf("/ui/")
		for _, form := range []url.Values{
			{"csrf": {csrf}, "action": {"terminate"}},
			{"csrf": {csrf}, "action": {"event"}, "type": {"approval"}, "payload": {`{"by":"x"}`}},
		} {
			br.post("/ui/instances/approve/a1/action", form).requireStatus(t, http.StatusForbidden)
		}
		b.h.RunUntilIdle()
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
		require.Empty(t, b.h.History("approve", "a1").Events)
		// Counts span namespaces: a read-only token sees throughput only.
		require.Contains(t, br.get("/ui/").requireStatus(t, http.StatusOK).body, "need a token with the metrics scope")
	})
}

func TestNamespaceLimitedToken(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend, testTokens(t)...)
		b.create(t, "approve", "a1") // in the default namespace
		_, err := b.h.Client.Create(b.ctx, "approve", dftype.CreateRequest{ID: "n1", Namespace: "acme"})
		require.NoError(t, err)
		b.h.RunUntilIdle()
		br := b.browser(t)
		require.Equal(t, http.StatusSeeOther, br.login(acmeSecret).status)

		list := br.get("/ui/instances").requireStatus(t, http.StatusOK)
		require.Contains(t, list.body, `>n1</a>`)
		require.NotContains(t, list.body, `>a1</a>`)
		require.Contains(t, list.body, `href="/ui/instances/approve/n1?namespace=acme"`)
		br.get("/ui/instances/approve/a1").requireStatus(t, http.StatusNotFound)
		br.get("/ui/instances/approve/a1?namespace=default").requireStatus(t, http.StatusForbidden)
		require.Equal(t, http.StatusSeeOther, br.act("approve", "n1", "terminate", nil).status)
		b.h.RequireStatus("approve", "n1", dftype.StatusTerminated)
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
	})
}

func TestCrossSiteForms(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		b := setup(t, backend)
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()
		br := b.browser(t)
		csrf := br.csrf("/ui/instances/approve/a1/confirm?action=terminate")
		form := url.Values{"csrf": {csrf}, "action": {"terminate"}}
		post := func(token string, header map[string]string) *answer {
			f := url.Values{"action": form["action"]}
			if token != "" {
				f.Set("csrf", token)
			}
			req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/ui/instances/approve/a1/action", strings.NewReader(f.Encode()))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range header {
				req.Header.Set(k, v)
			}
			return br.do(req)
		}
		for name, tc := range map[string]struct {
			token  string
			header map[string]string
		}{
			"no token":                {"", map[string]string{"Origin": b.srv.URL}},
			"wrong token":             {wrongToken(csrf), map[string]string{"Origin": b.srv.URL}},
			"cross-site origin":       {csrf, map[string]string{"Origin": "https://evil.example"}},
			"cross-site referer":      {csrf, map[string]string{"Referer": "https://evil.example/page"}},
			"no origin or referer":    {csrf, nil},
			"sec-fetch-site cross":    {csrf, map[string]string{"Origin": b.srv.URL, "Sec-Fetch-Site": "cross-site"}},
			"cross-site, no token":    {"", map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
			"null origin, no referer": {csrf, map[string]string{"Origin": "null"}},
		} {
			a := post(tc.token, tc.header)
			require.Equal(t, http.StatusForbidden, a.status, name)
			require.Contains(t, a.body, `<code id="error-code">FORBIDDEN</code>`, name)
		}
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)
		// The same form from the console's own origin, with the token, works.
		require.Equal(t, http.StatusSeeOther, post(csrf, map[string]string{"Referer": b.srv.URL + "/ui/"}).status)
		b.h.RequireStatus("approve", "a1", dftype.StatusTerminated)
	})
}

func TestLoopbackOnlyWithoutTokens(t *testing.T) {
	t.Parallel()
	b := setup(t, testharness.DefaultBackend())
	br := b.browser(t)
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/ui/", nil)
	require.NoError(t, err)
	req.Host = "console.example.com"
	a := br.do(req).requireStatus(t, http.StatusForbidden)
	require.Contains(t, a.body, "only loopback hosts are served")
	require.Empty(t, a.header.Values("Set-Cookie"), "no session for a refused request")
	// Loopback needs no login and may do everything "*" grants.
	page := br.get("/ui/").requireStatus(t, http.StatusOK)
	require.NotContains(t, page.body, `id="logout"`)
}

func sessionCookieOf(t *testing.T, a *answer) *http.Cookie {
	t.Helper()
	resp := http.Response{Header: a.header}
	for _, c := range resp.Cookies() {
		if c.Name == "duraflow_console" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", a.header.Values("Set-Cookie"))
	return nil
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	require.NoError(t, err)
	return u
}

func TestAuthorizeFunc(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, backend testharness.Backend) {
		authorize := func(r *http.Request, action httpapi.Action) error {
			switch r.Header.Get("Authorization") {
			case "Bearer ops":
				return nil
			case "Bearer viewer":
				if action == httpapi.ActionRead {
					return nil
				}
				return fmt.Errorf("%w: viewers only read", httpapi.ErrForbidden)
			}
			return httpapi.ErrUnauthorized
		}
		b := setupWith(t, backend, func(cfg *console.Config) { cfg.Authorize = authorize })
		b.create(t, "approve", "a1")
		b.h.RunUntilIdle()

		viewer := b.browser(t)
		require.Equal(t, http.StatusUnauthorized, viewer.login("stranger").status)
		require.Equal(t, http.StatusSeeOther, viewer.login("viewer").status)
		require.NotContains(t, viewer.get("/ui/instances/approve/a1").requireStatus(t, http.StatusOK).body, `id="actions"`)
		csrf := viewer.csrf("/ui/")
		require.Contains(t, viewer.post("/ui/instances/approve/a1/action", url.Values{"csrf": {csrf}, "action": {"pause"}}).requireStatus(t, http.StatusForbidden).body, "viewers only read")
		b.h.RequireStatus("approve", "a1", dftype.StatusWaiting)

		ops := b.browser(t)
		require.Equal(t, http.StatusSeeOther, ops.login("ops").status)
		require.Equal(t, http.StatusSeeOther, ops.act("approve", "a1", "pause", nil).status)
		b.h.RequireStatus("approve", "a1", dftype.StatusPaused)
	})
}

// wrongToken is token with its first character changed, so never token
// itself (a fixed first character would be the token's own now and then).
func wrongToken(token string) string {
	if token[0] == 'x' {
		return "y" + token[1:]
	}
	return "x" + token[1:]
}
