package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/console"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// Secrets of the tokens setupAuth configures.
const (
	adminSecret = "admin-secret"
	readSecret  = "read-secret"
	acmeSecret  = "acme-secret"
	tickSecret  = "tick-secret"
)

type approval struct {
	By string `json:"by"`
}

type testBundle struct {
	h       *testharness.Harness
	console *console.Console
	srv     *httptest.Server
	sched   *schedule.Scheduler
	flows   *flow.Registry
	ctx     context.Context
}

// setup serves a console over a fresh harness on backend with the
// workflows "greet" (one step), "approve" (a step, then a wait for an
// "approval" event), "flaky" (a step that fails once, then succeeds),
// "nap" (a sleep of an hour) and "parent" (invokes greet as the child
// "<id>-child"), a scheduler and a flow registry; tokens, when given, turn
// login on.
func setup(t *testing.T, backend testharness.Backend, tokens ...httpapi.Token) *testBundle {
	t.Helper()
	return setupWith(t, backend, func(cfg *console.Config) { cfg.Tokens = tokens })
}

// setupWith is setup with the console's config changed by configure.
func setupWith(t *testing.T, backend testharness.Backend, configure func(*console.Config)) *testBundle {
	t.Helper()
	h := testharness.New(t, testharness.WithBackend(backend))
	workflow.MustRegister(h.Registry, "greet", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
		return workflow.Do(step, "greet", func(ctx context.Context) (string, error) { return "hello", nil })
	})
	workflow.MustRegister(h.Registry, "approve", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (approval, error) {
		if _, err := workflow.Do(step, "prepare", func(ctx context.Context) (int, error) { return 1, nil }); err != nil {
			return approval{}, err
		}
		return workflow.WaitForEvent[approval](step, "wait for approval", workflow.WaitOptions{Type: "approval"})
	})
	var (
		mu       sync.Mutex
		failures = map[string]int{}
	)
	workflow.MustRegister(h.Registry, "flaky", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (int, error) {
		return workflow.Do(step, "call", func(ctx context.Context) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			if failures[ev.InstanceID] < 1 {
				failures[ev.InstanceID]++
				return 0, errors.New("service unavailable")
			}
			return 42, nil
		})
	})
	workflow.MustRegister(h.Registry, "nap", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
		if err := step.Sleep("nap", time.Hour); err != nil {
			return "", err
		}
		return "rested", nil
	})
	workflow.MustRegister(h.Registry, "parent", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (string, error) {
		return workflow.Invoke[string](step, "child", workflow.InvokeOptions{Workflow: "greet", ID: ev.InstanceID + "-child"})
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sched, err := schedule.New(&schedule.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: quiet})
	require.NoError(t, err)
	flows, err := flow.New(&flow.Config{Store: h.Store, Registry: h.Registry, Clock: h.Clock, Logger: quiet})
	require.NoError(t, err)
	cfg := &console.Config{Client: h.Client, Schedules: sched, Flows: flows, Stats: h.Store, Clock: h.Clock, Logger: quiet}
	configure(cfg)
	c, err := console.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return &testBundle{h: h, console: c, srv: srv, sched: sched, flows: flows, ctx: h.Context()}
}

// testTokens are an admin ("*"), a read-only, a namespace-limited and a
// tick-only token.
func testTokens(t *testing.T) []httpapi.Token {
	t.Helper()
	var out []httpapi.Token
	for _, spec := range []string{
		"admin:" + adminSecret + ":*", "reader:" + readSecret + ":read",
		"acme:" + acmeSecret + ":read,manage,events@acme", "ticker:" + tickSecret + ":tick",
	} {
		tok, err := httpapi.ParseToken(spec)
		require.NoError(t, err)
		out = append(out, tok)
	}
	return out
}

// browser is an HTTP client with a cookie jar that sends what a browser
// sends with a form: the console's Origin.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
	origin string // "" sends no Origin
}

func (b *testBundle) browser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: b.srv.URL, origin: b.srv.URL, client: &http.Client{
		Jar: jar,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// answer is a console answer.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a *answer) requireStatus(t *testing.T, status int) *answer {
	t.Helper()
	require.Equal(t, status, a.status, "body: %s", a.body)
	require.NotContains(t, a.body, "goroutine ", "a stack trace in the page")
	return a
}

func (br *browser) do(req *http.Request) *answer {
	br.t.Helper()
	resp, err := br.client.Do(req)
	require.NoError(br.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(br.t, err)
	return &answer{status: resp.StatusCode, header: resp.Header, body: string(body)}
}

func (br *browser) get(path string) *answer {
	br.t.Helper()
	req, err := http.NewRequest(http.MethodGet, br.base+path, nil)
	require.NoError(br.t, err)
	return br.do(req)
}

// post sends a form, with the browser's Origin.
func (br *browser) post(path string, form url.Values) *answer {
	br.t.Helper()
	req, err := http.NewRequest(http.MethodPost, br.base+path, strings.NewReader(form.Encode()))
	require.NoError(br.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if br.origin != "" {
		req.Header.Set("Origin", br.origin)
	}
	return br.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the forms of a page.
func (br *browser) csrf(path string) string {
	br.t.Helper()
	a := br.get(path).requireStatus(br.t, http.StatusOK)
	m := csrfRE.FindStringSubmatch(a.body)
	require.NotNil(br.t, m, "no CSRF token in %s", path)
	return m[1]
}

// login logs in with secret and returns the answer to the form.
func (br *browser) login(secret string) *answer {
	br.t.Helper()
	return br.post("/ui/login", url.Values{"csrf": {br.csrf("/ui/login")}, "token": {secret}, "next": {"/ui/"}})
}

// act confirms an action on an instance, as the confirmation page's form
// does.
func (br *browser) act(wf, id, action string, extra url.Values) *answer {
	br.t.Helper()
	form := url.Values{"action": {action}}
	for k, v := range extra {
		form[k] = v
	}
	confirm := br.get(fmt.Sprintf("/ui/instances/%s/%s/confirm?%s", wf, id, form.Encode())).requireStatus(br.t, http.StatusOK)
	m := csrfRE.FindStringSubmatch(confirm.body)
	require.NotNil(br.t, m)
	form.Set("csrf", m[1])
	return br.post(fmt.Sprintf("/ui/instances/%s/%s/action", wf, id), form)
}

// create creates an instance of wf with id.
func (b *testBundle) create(t *testing.T, wf, id string) {
	t.Helper()
	_, err := b.h.Client.Create(b.ctx, wf, dftype.CreateRequest{ID: id})
	require.NoError(t, err)
}

var (
	regexpNext     = regexp.MustCompile(`<a id="next-page" href="([^"]+)"`)
	regexpInstance = regexp.MustCompile(`class="instance-link" href="[^"]+">([^<]+)</a>`)
	// regexpLifecycleType finds the type of each lifecycle event row.
	regexpLifecycleType = regexp.MustCompile(`<td class="lifecycle-type">([^<]+)</td>`)
)

// doubler is a flow that doubles params.n and names its version.
func doubler(version string) string {
	return fmt.Sprintf(`{
  "id": "doubler", "version": %q, "name": "Doubler",
  "initialStepId": "double",
  "steps": {
    "double": {"id": "double", "type": "transform", "config": {"expression": "{n: n * 2}"}, "outputKey": "result"}
  },
  "output": "result"
}`, version)
}
