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
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// numSteps is how many Do steps the "steps" workflow runs.
const numSteps = 5

type greetParams struct {
	Name string `json:"name"`
}

type greetOutput struct {
	Greeting string `json:"greeting"`
}

type approval struct {
	By string `json:"by"`
}

// stepCounter counts the executions of step callbacks by "instance/step".
type stepCounter struct {
	mu     sync.Mutex
	counts map[string]int
	total  atomic.Int64
}

func (c *stepCounter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[key]++
	c.total.Add(1)
}

func (c *stepCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type testBundle struct {
	h      *testharness.Harness
	server *httpapi.Server
	srv    *httptest.Server
	api    *apiclient.Client
	steps  *stepCounter
	ctx    context.Context
}

// setup starts a server over a fresh harness with three workflows: "greet"
// (one step), "approve" (waits for an "approval" event) and "steps"
// (numSteps steps, counted). token is what the typed client sends.
func setup(t *testing.T, token string, configure ...func(*httpapi.Config, *testharness.Harness)) *testBundle {
	t.Helper()
	return setupOn(t, testharness.DefaultBackend(), token, configure...)
}

// setupOn is setup on a fresh database of backend b.
func setupOn(t *testing.T, backend testharness.Backend, token string, configure ...func(*httpapi.Config, *testharness.Harness)) *testBundle {
	t.Helper()
	h := testharness.New(t, testharness.WithBackend(backend))
	steps := &stepCounter{}
	workflow.MustRegister(h.Registry, "greet", func(ctx context.Context, ev workflow.Event[greetParams], step workflow.Step) (greetOutput, error) {
		g, err := workflow.Do(step, "greet", func(ctx context.Context) (string, error) {
			return "hello, " + ev.Payload.Name, nil
		})
		return greetOutput{Greeting: g}, err
	})
	workflow.MustRegister(h.Registry, "approve", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (approval, error) {
		return workflow.WaitForEvent[approval](step, "wait for approval", workflow.WaitOptions{Type: "approval"})
	})
	workflow.MustRegister(h.Registry, "steps", func(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (int, error) {
		sum := 0
		for i := range numSteps {
			name := fmt.Sprintf("step-%d", i)
			n, err := workflow.Do(step, name, func(ctx context.Context) (int, error) {
				steps.add(ev.InstanceID + "/" + name)
				return i, nil
			})
			if err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	})

	cfg := &httpapi.Config{Client: h.Client, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range configure {
		f(cfg, h)
	}
	srv, err := httpapi.New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testBundle{h: h, server: srv, srv: ts, api: apiclient.New(ts.URL, token, ts.Client()), steps: steps, ctx: h.Context()}
}

// withTick turns the tick route on, over the harness's runner.
func withTick(c *httpapi.Config, h *testharness.Harness) { c.Tick = tickWithRunner(h) }

// tickWithRunner is a TickFunc over the harness's runner.
func tickWithRunner(h *testharness.Harness) httpapi.TickFunc {
	return func(ctx context.Context, maxInstances, maxSteps int) (int, error) {
		return h.Runner.RunDueLimited(ctx, maxInstances, maxSteps)
	}
}

// response is a raw answer of the server.
type response struct {
	status int
	header http.Header
	body   []byte
}

// call sends a raw request. headers are "Name: value" strings.
func (b *testBundle) call(t *testing.T, method, path, body string, headers ...string) *response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, r)
	require.NoError(t, err)
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		require.True(t, ok, h)
		if strings.EqualFold(k, "Host") {
			req.Host = strings.TrimSpace(v)
			continue
		}
		req.Header.Add(k, strings.TrimSpace(v))
	}
	return b.send(t, req)
}

func (b *testBundle) send(t *testing.T, req *http.Request) *response {
	t.Helper()
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// requireOK checks the status of a successful answer and decodes it into v (unless nil).
func (r *response) requireOK(t *testing.T, status int, v any) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	if v != nil {
		require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
	}
}

// requireError checks an error answer's status and code, and that its message
// holds every fragment in contains. It returns the message.
func (r *response) requireError(t *testing.T, status int, code apiclient.Code, contains ...string) string {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&body), "body: %s", r.body)
	require.NotNil(t, body.Error, "body: %s", r.body)
	require.Equal(t, string(code), body.Error.Code, "body: %s", r.body)
	require.NotEmpty(t, body.Error.Message)
	for _, c := range contains {
		require.Contains(t, body.Error.Message, c)
	}
	return body.Error.Message
}
