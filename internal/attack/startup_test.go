//go:build attack

package attack_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeRefusesRaisedBodyBound starts the binary with --max-body-bytes
// raised past the engine's payload limit plus 64 KiB (it used to start,
// and take batches of 100 payloads of 1 MiB whole): it must refuse to start
// and say the bound may be lowered, not raised. A lowered bound starts,
// and holds.
func TestServeRefusesRaisedBodyBound(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"524288000", "1114113", "-1"} {
		out := serveRefused(t, "--max-body-bytes", v)
		require.Contains(t, out, "--max-body-bytes "+v+" must be between 1 and 1114112", v)
	}
	s := sqliteServer(t, "--max-body-bytes", "2000")
	r := s.call(t, http.MethodPost, "/api/workflows/hello/instances", `{"params":{"name":"`+strings.Repeat("x", 3000)+`"}}`)
	requireRefused(t, r, http.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE")
	require.Equal(t, http.StatusCreated, s.call(t, http.MethodPost, "/api/workflows/hello/instances", `{"params":{"name":"ada"}}`).status)
}

// TestServeRefusesTriggersOnReservedPaths starts the binary with triggers
// and API prefixes where the host serves something itself (a trigger at
// GET /metrics was accepted and could never be reached): it must refuse to
// start and name the collision. With the metrics off, the same trigger
// starts and answers.
func TestServeRefusesTriggersOnReservedPaths(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--trigger", "GET /metrics=hello"},
		{"--trigger", "POST /metrics=hello"},
		{"--trigger", "POST /metrics/orders=hello"},
		{"--api-prefix", "/metrics"},
	} {
		out := serveRefused(t, args...)
		require.Contains(t, out, "collides with the metrics at /metrics", "%v", args)
		require.Contains(t, out, "--metrics=false", "%v", args)
	}
	for _, args := range [][]string{
		{"--trigger", "POST /ui/orders=hello"},
		{"--api-prefix", "/ui"},
	} {
		out := serveRefused(t, args...)
		require.Contains(t, out, "collides with the web console at /ui", "%v", args)
	}
	for _, args := range [][]string{
		{"--trigger", "GET /healthz=hello"},
		{"--trigger", "POST /api/orders=hello"},
	} {
		out := serveRefused(t, args...)
		require.Contains(t, out, "belongs to the API", "%v", args)
	}

	s := sqliteServer(t, "--metrics=false", "--trigger", "GET /metrics=hello")
	r := s.do(t, request{method: http.MethodGet, path: "/metrics", token: secretCreate})
	require.Equal(t, http.StatusAccepted, r.status, "body: %.300s", r.body)
	require.Contains(t, string(r.body), "instanceId")
}
