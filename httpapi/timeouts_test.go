package httpapi_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/testharness"
)

// serveReal serves cfg with the *http.Server of Server.HTTPServer on a
// loopback listener and returns its address.
func serveReal(t *testing.T, cfg *httpapi.Config) string {
	t.Helper()
	if cfg.Client == nil {
		h := testharness.New(t)
		cfg.Client = h.Client
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := httpapi.New(cfg)
	require.NoError(t, err)
	hs := s.HTTPServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// slowRequest sends the headers of a request whose body is 1000 bytes
// long, and only its first byte, and returns the answer as far as it comes
// before the deadline, and whether the server then closed the connection.
func slowRequest(t *testing.T, addr, path string, headers ...string) (*http.Response, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	req := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	_, err = io.WriteString(conn, req+"\r\n{")
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*time.Second)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer before the deadline")
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	_ = resp.Body.Close()
	_, err = br.ReadByte()
	return resp, err == io.EOF
}

// TestUnauthenticatedSlowBody sends headers and the start of a body that
// never comes, without a token (or refused for another reason before the
// body is read): the answer comes at once, without waiting for the body,
// and the server closes the connection instead of draining it.
func TestUnauthenticatedSlowBody(t *testing.T) {
	t.Parallel()
	addr := serveReal(t, &httpapi.Config{
		Tokens:            []httpapi.Token{httpapi.NewToken("reader", "r", httpapi.ActionRead)},
		ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 10 * time.Second,
	})
	const create = "/api/workflows/greet/instances"
	for _, tc := range []struct {
		name, path string
		header     []string
		status     int
	}{
		{"no token", create, nil, http.StatusUnauthorized},
		{"unknown token", create, []string{"Authorization: Bearer nope"}, http.StatusUnauthorized},
		{"token without the scope", create, []string{"Authorization: Bearer r"}, http.StatusForbidden},
		{"unknown route", "/api/nowhere", []string{"Authorization: Bearer r"}, http.StatusNotFound},
		{"cross-origin", create, []string{"Authorization: Bearer r", "Sec-Fetch-Site: cross-site"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp, closed := slowRequest(t, addr, tc.path, tc.header...)
			require.Equal(t, tc.status, resp.StatusCode)
			require.True(t, resp.Close, "the answer says Connection: close")
			require.True(t, closed, "the server closes the connection")
			require.Less(t, time.Since(start), 2*time.Second)
		})
	}
}

// TestSlowBodyIsCutOff sends the start of a body that never comes with a
// valid token: the body deadline cuts it off with 408 REQUEST_TIMEOUT.
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	addr := serveReal(t, &httpapi.Config{
		Tokens:            []httpapi.Token{httpapi.NewToken("creator", "c", httpapi.ActionCreate)},
		ReadHeaderTimeout: 10 * time.Second, BodyTimeout: 100 * time.Millisecond,
	})
	resp, closed := slowRequest(t, addr, "/api/workflows/greet/instances", "Authorization: Bearer c")
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	require.True(t, closed, "the server closes the connection")
}

// TestHTTPServerTimeouts checks the timeouts of Server.HTTPServer: the
// defaults, and the configured ones.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	s, err := httpapi.New(&httpapi.Config{Client: h.Client})
	require.NoError(t, err)
	hs := s.HTTPServer()
	require.Equal(t, httpapi.DefaultReadHeaderTimeout, hs.ReadHeaderTimeout)
	require.Equal(t, httpapi.DefaultReadHeaderTimeout+httpapi.DefaultBodyTimeout, hs.ReadTimeout)
	require.Equal(t, httpapi.DefaultWriteTimeout, hs.WriteTimeout)
	require.Equal(t, httpapi.DefaultIdleTimeout, hs.IdleTimeout)
	require.NotNil(t, hs.Handler)

	s, err = httpapi.New(&httpapi.Config{Client: h.Client, ReadHeaderTimeout: time.Second, BodyTimeout: 2 * time.Second, WriteTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second})
	require.NoError(t, err)
	hs = s.HTTPServer()
	require.Equal(t, []time.Duration{time.Second, 3 * time.Second, 3 * time.Second, 4 * time.Second},
		[]time.Duration{hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout, hs.IdleTimeout})

	_, err = httpapi.New(&httpapi.Config{Client: h.Client, BodyTimeout: -1})
	require.ErrorContains(t, err, "BodyTimeout")
}

// TestLongTickOutlivesWriteTimeout checks that a tick that runs longer than
// WriteTimeout is still answered: the tick's work is not cut off by it.
func TestLongTickOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	addr := serveReal(t, &httpapi.Config{
		Tokens:       []httpapi.Token{httpapi.NewToken("cron", "t", httpapi.ActionTick)},
		WriteTimeout: 100 * time.Millisecond,
		Tick: func(ctx context.Context, _, _ int) (int, error) {
			select { // work that takes longer than WriteTimeout
			case <-time.After(300 * time.Millisecond):
			case <-ctx.Done():
			}
			return 0, nil
		},
	})
	_, err := apiclient.New("http://"+addr, "t", nil).Tick(context.Background(), apiclient.TickRequest{})
	require.NoError(t, err)
}

// TestLongTickOutlivesBodyTimeout checks that a tick that runs longer than
// BodyTimeout and ReadHeaderTimeout, with a body or without one, answers
// 200 with its result: the read deadlines bound the reading of the request
// only, and never cancel the handler's context once the request is read.
func TestLongTickOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	addr := serveReal(t, &httpapi.Config{
		Tokens:            []httpapi.Token{httpapi.NewToken("cron", "t", httpapi.ActionTick)},
		ReadHeaderTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond,
		MaxConcurrentTicks: 2,
		Tick: func(ctx context.Context, _, _ int) (int, error) {
			select { // work that takes longer than both read timeouts
			case <-time.After(600 * time.Millisecond):
				return 7, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
	})
	t.Run("with a body", func(t *testing.T) {
		t.Parallel()
		res, err := apiclient.New("http://"+addr, "t", nil).Tick(context.Background(), apiclient.TickRequest{MaxInstances: 5})
		require.NoError(t, err)
		require.Equal(t, 7, res.Processed)
	})
	t.Run("without a body", func(t *testing.T) {
		t.Parallel()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/_runner/tick", http.NoBody)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer t")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		require.JSONEq(t, `{"processed":7,"maxInstances":0,"maxSteps":0}`, string(body))
	})
}

// TestLongTickOutlivesWriteTimeoutHTTP2 checks that a tick that runs
// longer than WriteTimeout (and the read timeouts) is answered over HTTP/2
// too, where WriteTimeout is a timer per stream that resets the stream when
// it fires, even while the handler is still working.
func TestLongTickOutlivesWriteTimeoutHTTP2(t *testing.T) {
	t.Parallel()
	h := testharness.New(t)
	s, err := httpapi.New(&httpapi.Config{
		Client:       h.Client,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tokens:       []httpapi.Token{httpapi.NewToken("cron", "t", httpapi.ActionTick)},
		WriteTimeout: 200 * time.Millisecond, ReadHeaderTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond,
		Tick: func(ctx context.Context, _, _ int) (int, error) {
			select { // work that takes longer than every timeout
			case <-time.After(600 * time.Millisecond):
				return 7, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		},
	})
	require.NoError(t, err)
	hs := s.HTTPServer()
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetUnencryptedHTTP2(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	res, err := apiclient.New("http://"+ln.Addr().String(), "t", hc).Tick(context.Background(), apiclient.TickRequest{})
	require.NoError(t, err)
	require.Equal(t, 7, res.Processed)
}
