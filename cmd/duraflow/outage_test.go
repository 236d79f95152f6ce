//go:build unix

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/pgcluster"
)

// waitLogWith waits for a JSON log line with the message and the
// attribute key=value, and returns its fields.
func (o *output) waitLogWith(t *testing.T, name, msg, key, value string) map[string]any {
	t.Helper()
	var m map[string]any
	o.waitLine(t, name, fmt.Sprintf("no log %q with %s=%q", msg, key, value), func(line string) bool {
		m = nil
		return json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg && m[key] == value
	})
	return m
}

// countLog counts the JSON log lines with the message and, when key is
// not empty, the attribute key=value.
func (o *output) countLog(msg, key, value string) int {
	n := 0
	for _, line := range strings.Split(o.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg && (key == "" || m[key] == value) {
			n++
		}
	}
	return n
}

// TestProcessesSurviveADatabaseRestart runs serve, worker and dev on a
// private Postgres server, each serving a queue of its own, with work in
// flight on each (steps running, sleeps that end while the server is
// down, an instance waiting for an event), and restarts the server in
// immediate mode. While it is down the API answers 503
// DATABASE_UNAVAILABLE, /readyz 503 and /healthz 200, and the console
// shows its database unavailable page; each process logs the outage once.
// Once it is back every process goes on by itself: the steps that were
// running complete once, the sleepers wake, the event is delivered, and
// every process is still running (and drains on SIGTERM when the test
// ends).
func TestProcessesSurviveADatabaseRestart(t *testing.T) {
	t.Parallel()
	pg := pgcluster.Start(t)
	common := []string{"--db", pg.URL(), "--poll-interval", "500ms", "--log-format", "json", "--log-level", "info"}
	serve := start(t, "serve", append([]string{"serve", "--addr", "127.0.0.1:0", "--queues", "s"}, common...)...)
	// serve migrates first; the others find the schema.
	serving := serve.out.waitLog(t, serve.name, "serving the HTTP API")
	worker := start(t, "worker", append([]string{"worker", "--queues", "w"}, common...)...)
	dev := start(t, "dev", append([]string{"dev", "--addr", "127.0.0.1:0", "--queues", "d", "--metrics-addr", "", "--activity-interval", "0"}, common...)...)
	devServing := dev.out.waitLog(t, dev.name, "serving the HTTP API")
	worker.out.waitLog(t, worker.name, "started")
	procs := []*proc{serve, worker, dev}
	serveURL, devURL := serving["url"].(string), devServing["url"].(string)
	api := apiclient.New(serveURL, "", nil)
	ctx := context.Background()

	// Work on each process's queue, in flight when the server stops.
	type item struct{ workflow, id, queue, params string }
	var items []item
	for _, q := range []string{"s", "w", "d"} {
		items = append(items,
			item{"flaky", "flaky-" + q, q, `{"failures":0,"work":"3 seconds"}`},
			item{"sleeper", "sleeper-" + q, q, `{"duration":"2 seconds"}`},
			item{"approval", "approval-" + q, q, `{"amount":10}`},
		)
	}
	for _, it := range items {
		_, err := api.Create(ctx, it.workflow, dftype.CreateRequest{ID: it.id, Queue: it.queue, Params: json.RawMessage(it.params)})
		require.NoError(t, err)
	}
	c := &cluster{api: api}
	for _, q := range []string{"s", "w", "d"} {
		c.waitStatus(t, "flaky", "flaky-"+q, dftype.StatusRunning)
		c.waitStatus(t, "approval", "approval-"+q, dftype.StatusWaiting)
	}

	require.NoError(t, pg.Stop())

	_, err := api.Get(ctx, "flaky", "flaky-s")
	require.ErrorIs(t, err, &apiclient.APIError{Code: apiclient.CodeDatabaseUnavailable}, "a read in the outage answers 503 DATABASE_UNAVAILABLE")
	_, err = api.Create(ctx, "flaky", dftype.CreateRequest{ID: "in-the-outage", Queue: "s"})
	require.ErrorIs(t, err, &apiclient.APIError{Code: apiclient.CodeDatabaseUnavailable}, "a write in the outage answers 503 DATABASE_UNAVAILABLE")
	require.ErrorIs(t, api.Ready(ctx), &apiclient.APIError{Code: apiclient.CodeNotReady})
	require.NoError(t, api.Health(ctx), "the process is alive: no liveness probe restarts it")
	resp, err := http.Get(devURL + "/ui/")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", page)
	require.Contains(t, string(page), "Database unavailable")
	for _, p := range procs {
		p.out.waitLogWith(t, p.name, "database unavailable; retrying with backoff", "while", "claiming tasks")
	}
	// The steps finish in the outage (after the sleeps ended) and fail to
	// record their ends.
	for _, p := range procs {
		p.out.waitLogWith(t, p.name, "store call failed; retrying until the database answers", "call", "checkpoint")
	}

	require.NoError(t, pg.Start())
	back := time.Now()
	for _, p := range procs {
		p.out.waitLogWith(t, p.name, "database available again", "while", "claiming tasks")
		p.out.waitLogWith(t, p.name, "database available again", "while", "listening for wake-ups")
	}
	for _, q := range []string{"s", "w", "d"} {
		info := c.waitStatus(t, "flaky", "flaky-"+q, dftype.StatusComplete, dftype.StatusErrored)
		require.Equal(t, dftype.StatusComplete, info.Status, "%+v", info.Error)
		require.JSONEq(t, `{"attempts":1}`, string(info.Output), "the step that ran through the restart completed once")
		hist, err := api.History(ctx, "flaky", info.ID, listHistory())
		require.NoError(t, err)
		require.Len(t, hist.Steps, 1)
		require.Equal(t, 1, hist.Steps[0].Attempts)
		require.Equal(t, dftype.StatusComplete, c.waitStatus(t, "sleeper", "sleeper-"+q, dftype.StatusComplete, dftype.StatusErrored).Status)
		require.NoError(t, api.SendEvent(ctx, "approval", "approval-"+q, "approval", json.RawMessage(`{"approved":true}`)))
		require.Equal(t, dftype.StatusComplete, c.waitStatus(t, "approval", "approval-"+q, dftype.StatusComplete, dftype.StatusErrored).Status)
	}
	t.Logf("every instance complete %s after the database came back", time.Since(back).Round(time.Millisecond))
	require.NoError(t, api.Ready(ctx))
	for _, p := range procs {
		select {
		case <-p.done:
			t.Fatalf("%s exited: %v; its output:\n%s", p.name, p.err, p.out)
		default:
		}
		require.Equal(t, 1, p.out.countLog("database unavailable; retrying with backoff", "while", "claiming tasks"),
			"%s logs the outage once", p.name)
		require.Zero(t, p.out.countLog("claiming tasks failed", "", ""), "%s: no warning per failed claim", p.name)
	}
}
