//go:build unix

package main_test

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDevProcessesSideBySide: two `duraflow dev` processes on other --addr
// ports of one machine both start with their default metrics flags, and
// each serves its own metrics at /metrics on its API address.
func TestDevProcessesSideBySide(t *testing.T) {
	t.Parallel()
	var urls []string
	for _, name := range []string{"dev 1", "dev 2"} {
		p := start(t, name, "dev", "--db", filepath.Join(t.TempDir(), "duraflow.db"), "--addr", "127.0.0.1:0",
			"--stub=false", "--activity-interval", "0", "--log-format", "json", "--log-level", "info")
		m := p.out.waitLog(t, name, "started")
		require.Equal(t, m["api"].(string)+"/metrics", m["metrics"], "%s serves its metrics on its API address", name)
		urls = append(urls, m["api"].(string))
	}
	require.NotEqual(t, urls[0], urls[1])
	for _, u := range urls {
		resp, err := http.Get(u + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.Contains(t, string(body), "duraflow_workers_online")
	}
}
