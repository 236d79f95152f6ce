package cli_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// consoleGet fetches a console page without following redirects.
func consoleGet(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func noRedirects(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestDevServesConsole(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"dev", "--db", sqliteDB(t)})
	s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
	require.Contains(t, s.stdout.String(), "Web console: "+s.url+"/ui/\n")

	c := noRedirects(t)
	resp, body := consoleGet(t, c, s.url+"/ui/workflows")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, body, `<a href="/ui/workflows/hello">hello</a>`)
	resp, _ = consoleGet(t, c, s.url+"/ui")
	require.Equal(t, http.StatusFound, resp.StatusCode)
	// The API beside it answers as before.
	resp, body = consoleGet(t, c, s.url+"/api/workflows")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `"hello"`)
}

func TestServeConsoleLogin(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--token", "admin:adm1n:*", "--token", "reader:r3ad:read"})
	c := noRedirects(t)
	resp, _ := consoleGet(t, c, s.url+"/ui/instances")
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/ui/login?next=%2Fui%2Finstances", resp.Header.Get("Location"))

	_, page := consoleGet(t, c, s.url+"/ui/login?next=%2Fui%2Finstances")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, m, page)
	form := url.Values{"csrf": {m[1]}, "token": {"r3ad"}, "next": {"/ui/instances"}}
	req, err := http.NewRequest(http.MethodPost, s.url+"/ui/login", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.url)
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/ui/instances", resp.Header.Get("Location"))

	resp, body := consoleGet(t, c, s.url+"/ui/instances")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "reader")
	// The session cookie is no API credential.
	resp, _ = consoleGet(t, c, s.url+"/api/workflows")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestServeConsoleOff(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--console=false"})
	resp, body := consoleGet(t, noRedirects(t), s.url+"/ui/")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, body, `"NOT_FOUND"`)
}
