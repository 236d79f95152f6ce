//go:build attack

package attack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// serveRefused runs `duraflow serve` with args, which must make it exit at
// start with an error (not be killed after the deadline, as a server that
// started would be), and returns what it printed.
func serveRefused(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	all := append([]string{"serve", "--db", "sqlite:" + filepath.Join(t.TempDir(), "refused.db"), "--addr", "127.0.0.1:0",
		"--token", "creator:" + secretCreate + ":create"}, args...)
	cmd := exec.CommandContext(ctx, binary, all...)
	cmd.Env = append(os.Environ(), "DURAFLOW_TOKENS=", "DURAFLOW_DATABASE_URL=", "DURAFLOW_TRIGGERS_FILE=", "GODEBUG=netdns=go")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "duraflow serve %v must refuse to start; it ran until killed (%v):\n%s", args, err, out)
	require.Positive(t, exit.ExitCode(), "duraflow serve %v was killed, not refused (%v):\n%s", args, err, out)
	return string(out)
}

// TestTriggerCredentialHeaders starts the binary with triggers that copy a
// credential header (Authorization, Cookie, …) into the params, where every
// read token would see it: serve must refuse to start and say
// which header and how to allow it. With allowCredentialHeaders it starts,
// and a header that is no credential needs no opt-in.
func TestTriggerCredentialHeaders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ header, trigger string }{
		{"Authorization", "POST /hooks/steal=hello,auth=header.Authorization"},
		{"authorization", "POST /hooks/steal=hello,auth=header.authorization"},
		{"Cookie", "POST /hooks/steal=hello,name=body.name,c=header.Cookie"},
		{"Proxy-Authorization", "/hooks/steal=hello,p=header.Proxy-Authorization"},
		{"X-Api-Key", "POST /hooks/steal=hello,k=header.X-Api-Key"},
	} {
		out := serveRefused(t, "--trigger", c.trigger)
		t.Logf("%s: %s", c.header, strings.TrimSpace(out))
		require.Contains(t, out, "header."+c.header, "the refusal must name the header")
		require.Contains(t, out, "allowCredentialHeaders", "the refusal must say how to allow it")
	}

	// The same refusal from a triggers file.
	file := filepath.Join(t.TempDir(), "triggers.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"method":"POST","path":"/hooks/steal","workflow":"hello","params":{"c":"header.Cookie"}}]`), 0o600))
	out := serveRefused(t, "--triggers-file", file)
	require.Contains(t, out, "header.Cookie")
	require.Contains(t, out, "allowCredentialHeaders")

	// Opted in, it starts, and the mapping does what the author asked.
	s := sqliteServer(t,
		"--trigger", "POST /hooks/cred=hello,auth=header.Authorization,c=header.Cookie,allowCredentialHeaders",
		"--trigger", "POST /hooks/traced=hello,trace=header.X-Request-Id")
	r := s.do(t, request{method: http.MethodPost, path: "/hooks/cred", token: secretCreate, body: strings.NewReader(`{}`),
		header: map[string]string{"Cookie": "session=s3cret"}})
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	requireTriggerParams(t, s, r, map[string]string{"auth": "Bearer " + secretCreate, "c": "session=s3cret"})

	r = s.do(t, request{method: http.MethodPost, path: "/hooks/traced", token: secretCreate, body: strings.NewReader(`{}`),
		header: map[string]string{"X-Request-Id": "req-1"}})
	require.Equal(t, http.StatusAccepted, r.status, "body: %s", r.body)
	requireTriggerParams(t, s, r, map[string]string{"trace": "req-1"})
	s.requireHealthy(t)
}

// requireTriggerParams reads the instance a trigger answered with and
// checks its params.
func requireTriggerParams(t *testing.T, s *server, r *response, want map[string]string) {
	t.Helper()
	var started struct {
		InstanceID string `json:"instanceId"`
	}
	require.NoError(t, json.Unmarshal(r.body, &started))
	require.NotEmpty(t, started.InstanceID, "body: %s", r.body)
	got := s.call(t, http.MethodGet, "/api/workflows/hello/instances/"+started.InstanceID, "")
	require.Equal(t, http.StatusOK, got.status, "body: %s", got.body)
	var inst struct {
		Params map[string]string `json:"params"`
	}
	require.NoError(t, json.Unmarshal(got.body, &inst), "body: %s", got.body)
	require.Equal(t, want, inst.Params)
}
