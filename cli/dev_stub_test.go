package cli_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/cli"
)

// exampleFlowsDir returns a folder with the two example flows: order, whose
// http step calls the stub, and expense-approval, which does not.
func exampleFlowsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"order.json", "approval.json"} {
		data, err := os.ReadFile(filepath.Join(exampleFlows, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}
	return dir
}

// freeLoopbackAddr returns a loopback address with a port nothing listens
// on at the time of the call.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestDevStubAddr: --stub-addr puts the stub on the address given.
func TestDevStubAddr(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, dbArgs []string) {
		addr := freeLoopbackAddr(t)
		s := startServer(t, append([]string{"dev", "--stub-addr", addr, "--flows", exampleFlowsDir(t)}, dbArgs...))
		s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
		require.Contains(t, s.stdout.String(), "Stub service for flows: http://stub.localhost (on http://"+addr+")")
		require.Contains(t, s.stdout.String(), "expense-approval 1.0.0 (applied), order 1.0.0 (applied)")
		resp, err := http.Get("http://" + addr + "/healthz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	})
}

// TestDevStubOff: with the stub off, a flow file whose http steps call it
// is reported and not applied; the others are.
func TestDevStubOff(t *testing.T) {
	t.Parallel()
	for _, off := range [][]string{{"--stub-addr", ""}, {"--stub=false"}} {
		t.Run(strings.Join(off, " "), func(t *testing.T) {
			t.Parallel()
			forEachBackend(t, func(t *testing.T, dbArgs []string) {
				dir := exampleFlowsDir(t)
				s := startServer(t, append(append([]string{"dev", "--flows", dir}, off...), dbArgs...))
				s.stdout.waitLine(t, 10*time.Second, func(l string) bool { return strings.HasPrefix(l, "Press Ctrl-C") })
				out := s.stdout.String()
				require.Contains(t, out, "Flows from "+dir+": expense-approval 1.0.0 (applied)\n")
				require.Contains(t, out, "Skipped (see above): order.json\n")
				require.NotContains(t, out, "Stub service")
				require.Contains(t, s.stderr.String(), filepath.Join(dir, "order.json")+
					`: warning: not applied: its http steps call the stub service (http://stub.localhost), which is off (--stub=false or --stub-addr "")`)

				list, err := s.apiClient().Workflows(t.Context())
				require.NoError(t, err)
				var names []string
				for _, w := range list.Workflows {
					names = append(names, w.Name)
				}
				require.Contains(t, names, "expense-approval")
				require.NotContains(t, names, "order")
			})
		})
	}
}

// TestDevStubAddrRefused: the stub listens on loopback only.
func TestDevStubAddrRefused(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "dev", "--db", sqliteDB(t), "--addr", "127.0.0.1:0", "--metrics-addr", "", "--stub-addr", "0.0.0.0:0")
	require.Equal(t, cli.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--stub-addr: devstub: address \"0.0.0.0:0\" is not a loopback IP address")
}
