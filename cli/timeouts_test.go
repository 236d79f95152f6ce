package cli_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeBodyTimeout starts serve with a short --body-timeout and sends
// slow bodies: without a token the answer is 401 at once and the
// connection closed; with one the body deadline cuts the request off (408).
func TestServeBodyTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, []string{"serve", "--db", sqliteDB(t), "--token", "admin:adm1n:*", "--body-timeout", "100ms"})
	addr := strings.TrimPrefix(s.url, "http://")
	for _, tc := range []struct {
		auth   string
		status int
	}{
		{"", http.StatusUnauthorized},
		{"Authorization: Bearer adm1n\r\n", http.StatusRequestTimeout},
	} {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = io.WriteString(conn, "POST /api/workflows/hello/instances HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500\r\n"+tc.auth+"\r\n{")
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err, "no answer before the deadline")
		require.Equal(t, tc.status, resp.StatusCode)
		_, _ = io.Copy(io.Discard, resp.Body)
		_, err = br.ReadByte()
		require.ErrorIs(t, err, io.EOF, "the server closes the connection")
		_ = conn.Close()
	}
}
