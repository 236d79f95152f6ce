//go:build attack

package attack_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// browser is a client of the web console: a cookie jar, no redirects
// followed, and the console's origin on every form.
type browser struct {
	t      testing.TB
	s      *server
	client *http.Client
	header map[string]string // sent with every request
}

func (s *server) browser(t testing.TB) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, s: s, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (br *browser) do(req *http.Request) *response {
	br.t.Helper()
	for k, v := range br.header {
		req.Header.Set(k, v)
	}
	resp, err := br.client.Do(req)
	require.NoError(br.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(br.t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: body}
}

func (br *browser) get(path string) *response {
	br.t.Helper()
	req, err := http.NewRequest(http.MethodGet, br.s.url+path, nil)
	require.NoError(br.t, err)
	return br.do(req)
}

// post sends a form from the console's own origin, with extra headers.
func (br *browser) post(path string, form url.Values, header map[string]string) *response {
	br.t.Helper()
	req, err := http.NewRequest(http.MethodPost, br.s.url+path, strings.NewReader(form.Encode()))
	require.NoError(br.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", br.s.url)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return br.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the forms of a page.
func (br *browser) csrf(path string) string {
	br.t.Helper()
	r := br.get(path)
	require.Equal(br.t, http.StatusOK, r.status, "%s: %.300s", path, r.body)
	m := csrfField.FindSubmatch(r.body)
	require.NotNil(br.t, m, "no CSRF token in %s", path)
	return string(m[1])
}

// login logs in with secret and returns the answer to the login form.
func (br *browser) login(secret string, next string, header map[string]string) *response {
	br.t.Helper()
	return br.post("/ui/login", url.Values{"csrf": {br.csrf("/ui/login")}, "token": {secret}, "next": {next}}, header)
}

// sessionCookie returns the console's session cookie an answer sets.
func sessionCookie(t testing.TB, r *response) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "duraflow_console" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", r.header.Values("Set-Cookie"))
	return nil
}

// TestConsoleAppliesTheServersLimits starts the server with lowered limits
// and sends the console's forms past them: an event type of 26 characters
// against a limit of 8 and a 1,500-byte payload against 1,024 bytes are
// refused with the API's codes (they used to be stored), a form past
// --max-body-bytes is 413, a page holds --max-page-size instances, and
// nothing is stored.
func TestConsoleAppliesTheServersLimits(t *testing.T) {
	t.Parallel()
	limits := []string{"--max-event-type-length", "8", "--max-payload-bytes", "1024", "--max-page-size", "2", "--max-body-bytes", "4000"}
	servers := []*server{sqliteServer(t, limits...)}
	if postgresReachable() == nil {
		servers = append(servers, postgresServer(t, limits...))
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			id := newApproval(t, s)
			newApproval(t, s)
			newApproval(t, s)
			br := s.browser(t)
			require.Equal(t, http.StatusSeeOther, br.login(secretAdmin, "/ui/", nil).status)
			action := "/ui/instances/approval/" + id + "/action"
			for _, tc := range []struct {
				name, typ, payload string
				status             int
				code               string
			}{
				{"event type past the limit", strings.Repeat("t", 26), `{}`, http.StatusBadRequest, "INVALID_EVENT_TYPE"},
				{"payload past the limit", "approval", `"` + strings.Repeat("x", 1500) + `"`, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
				{"form past the body bound", "approval", `"` + strings.Repeat("x", 5000) + `"`, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE"},
			} {
				csrf := br.csrf("/ui/instances/approval/" + id + "/confirm?action=pause")
				r := br.post(action, url.Values{"csrf": {csrf}, "action": {"event"}, "type": {tc.typ}, "payload": {tc.payload}}, nil)
				require.Equal(t, tc.status, r.status, "%s: %.500s", tc.name, r.body)
				require.Contains(t, string(r.body), `<code id="error-code">`+tc.code+`</code>`, tc.name)
			}
			hist := s.call(t, http.MethodGet, "/api/workflows/approval/instances/"+id+"/history?pageSize=2", "")
			require.Equal(t, http.StatusOK, hist.status, "body: %.300s", hist.body)
			require.Contains(t, string(hist.body), `"events":[]`, "a refused event was stored")

			page := br.get("/ui/instances?workflow=approval")
			require.Equal(t, http.StatusOK, page.status)
			require.Equal(t, 2, strings.Count(string(page.body), `class="instance-link"`), "a page of --max-page-size instances")
			require.Contains(t, string(page.body), `id="next-page"`)
			s.requireHealthy(t)
		})
	}
}

// TestConsoleSessionsPerToken logs in with a read-only token 10,001 times
// (which, past the one bound of 10,000 sessions, used to end everyone's
// sessions): the admin's session lives on, and the reader keeps its newest
// sessions only.
func TestConsoleSessionsPerToken(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	admin := s.browser(t)
	require.Equal(t, http.StatusSeeOther, admin.login(secretAdmin, "/ui/", nil).status)

	// One login form, posted again and again with its cookie.
	form := s.browser(t)
	csrf := form.csrf("/ui/login")
	var loginCookie string
	u, err := url.Parse(s.url + "/ui/login")
	require.NoError(t, err)
	for _, c := range form.client.Jar.Cookies(u) {
		if c.Name == "duraflow_console_login" {
			loginCookie = c.Value
		}
	}
	require.NotEmpty(t, loginCookie)
	// A client without a jar: no login sends the session of the one
	// before (which a login would end).
	bare := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var first, last *http.Cookie
	for i := range 10001 {
		req, err := http.NewRequest(http.MethodPost, s.url+"/ui/login", strings.NewReader(url.Values{"csrf": {csrf}, "token": {secretRead}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.url)
		req.Header.Set("Cookie", "duraflow_console_login="+loginCookie)
		resp, err := bare.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r := &response{status: resp.StatusCode, header: resp.Header}
		require.Equal(t, http.StatusSeeOther, r.status, "login %d", i)
		if i == 0 {
			first = sessionCookie(t, r)
		}
		last = sessionCookie(t, r)
	}
	// The admin's session lives on.
	require.Equal(t, http.StatusOK, admin.get("/ui/").status)
	withCookie := func(c *http.Cookie) int {
		req, err := http.NewRequest(http.MethodGet, s.url+"/ui/", nil)
		require.NoError(t, err)
		req.AddCookie(c)
		return s.browser(t).do(req).status
	}
	require.Equal(t, http.StatusOK, withCookie(last), "the reader's newest session")
	require.Equal(t, http.StatusSeeOther, withCookie(first), "the reader's oldest session was ended, by its own bound")
	s.requireHealthy(t)
}

// TestConsoleLoginThrottle sends 300 wrong tokens in a row (all used to be
// answered 401 at full speed, and the right one then worked): past the
// allowed failures every login from the address is 429 with Retry-After,
// the right token's too.
func TestConsoleLoginThrottle(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	br := s.browser(t)
	unauthorized, throttled := 0, 0
	for i := range 300 {
		r := br.login(fmt.Sprintf("guess-%d", i), "/ui/", nil)
		switch r.status {
		case http.StatusUnauthorized:
			require.Zero(t, throttled, "a 401 after a 429")
			unauthorized++
		case http.StatusTooManyRequests:
			require.NotEmpty(t, r.header.Get("Retry-After"))
			throttled++
		default:
			t.Fatalf("guess %d: %d %.300s", i, r.status, r.body)
		}
	}
	require.Equal(t, 10, unauthorized)
	r := br.login(secretAdmin, "/ui/", nil)
	require.Equal(t, http.StatusTooManyRequests, r.status, "the right token after the burst: %.300s", r.body)
	require.NotEmpty(t, r.header.Get("Retry-After"))
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		require.NotEqual(t, "duraflow_console", c.Name, "a throttled login made a session")
	}
	s.requireHealthy(t)
}

// TestConsoleLoginNext logs in with next paths that climb out of the
// console (next=/ui/../../evil used to redirect to /evil): each lands in
// the console.
func TestConsoleLoginNext(t *testing.T) {
	t.Parallel()
	s := sqliteServer(t)
	for next, want := range map[string]string{
		"/ui/../../evil":           "/ui/",
		"/ui/%2e%2e/%2e%2e/api":    "/ui/",
		"/ui/../api/instances":     "/ui/",
		"//evil.example/":          "/ui/",
		"/ui/instances/../workers": "/ui/workers",
	} {
		r := s.browser(t).login(secretAdmin, next, nil)
		require.Equal(t, http.StatusSeeOther, r.status)
		require.Equal(t, want, r.header.Get("Location"), "next %q", next)
	}
}

// TestConsoleSecureCookies: behind a proxy that terminates TLS the session
// cookie is Secure with --secure-cookies, or with --trusted-proxies and
// the proxy's X-Forwarded-Proto (it never was, the binary serving no
// TLS); X-Forwarded-Proto from a peer that is no trusted proxy changes
// nothing.
func TestConsoleSecureCookies(t *testing.T) {
	t.Parallel()
	https := map[string]string{"X-Forwarded-Proto": "https"}
	for _, tc := range []struct {
		name   string
		flags  []string
		header map[string]string
		secure bool
	}{
		{"plain", nil, https, false},
		{"secure-cookies", []string{"--secure-cookies"}, nil, true},
		{"trusted proxy", []string{"--trusted-proxies", "127.0.0.1"}, https, true},
		{"trusted proxy over http", []string{"--trusted-proxies", "127.0.0.0/8"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := sqliteServer(t, tc.flags...)
			br := s.browser(t)
			// The jar keeps a Secure login cookie from plain HTTP: it is
			// sent by hand.
			page := br.get("/ui/login")
			require.Equal(t, http.StatusOK, page.status)
			var loginCookie string
			for _, c := range (&http.Response{Header: page.header}).Cookies() {
				if c.Name == "duraflow_console_login" {
					loginCookie = c.Value
				}
			}
			m := csrfField.FindSubmatch(page.body)
			require.NotNil(t, m)
			header := map[string]string{"Cookie": "duraflow_console_login=" + loginCookie}
			for k, v := range tc.header {
				header[k] = v
			}
			r := br.post("/ui/login", url.Values{"csrf": {string(m[1])}, "token": {secretAdmin}}, header)
			require.Equal(t, http.StatusSeeOther, r.status, "%.300s", r.body)
			require.Equal(t, tc.secure, sessionCookie(t, r).Secure)
		})
	}
}
