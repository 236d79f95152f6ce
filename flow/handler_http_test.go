package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
)

// testResolver resolves the names of a map and nothing else.
type testResolver map[string][]netip.Addr

func (r testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ips, ok := r[strings.ToLower(host)]; ok {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// server is an httptest server on loopback that counts its requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

func newHTTP(t *testing.T, cfg *flow.HTTPHandlerConfig) *flow.HTTPHandler {
	t.Helper()
	h, err := flow.NewHTTPHandler(cfg)
	require.NoError(t, err)
	return h
}

// runHTTP runs an http step with url (set as a raw template value, so that
// validation does not refuse IP literals before the dialer does).
func runHTTP(t *testing.T, h *flow.HTTPHandler, rawURL string, extra string) (map[string]any, error) {
	t.Helper()
	ctx, _ := json.Marshal(map[string]any{"target": rawURL})
	cfg := `{"url": "${raw:target}"` + extra + `}`
	out, err := invoke(t, h, cfg, string(ctx), nil)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(asJSON(t, out)), &m))
	return m, nil
}

func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	var loopHits atomic.Int64 // only /loop, so parallel subtests cannot inflate it
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/orders/42":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Add("X-Multi", "a")
			w.Header().Add("X-Multi", "b")
			fmt.Fprintf(w, `{"id": 42, "big": 9007199254740993, "auth": %q, "ua": %q}`, r.Header.Get("Authorization"), r.UserAgent())
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			out, _ := json.Marshal(map[string]any{"method": r.Method, "contentType": r.Header.Get("Content-Type"), "body": string(body)})
			w.Write(out)
		case "/text":
			w.Write([]byte("plain text"))
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0xff, 0xfe, 0x00})
		case "/bad-json":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("{oops"))
		case "/status":
			code := 0
			fmt.Sscan(r.URL.Query().Get("code"), &code)
			w.WriteHeader(code)
			w.Write([]byte("failure details"))
		case "/big":
			w.Write([]byte(strings.Repeat("x", 5000)))
		case "/loop":
			loopHits.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/hop":
			http.Redirect(w, r, "/text", http.StatusFound)
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}
	})
	h := newHTTP(t, &flow.HTTPHandlerConfig{Allow: []string{"127.0.0.1"}, MaxResponseBytes: 4096})
	base := srv.URL

	t.Run("GetJSON", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"url": "`+base+`/orders/${order.id}", "headers": {"Authorization": "Bearer ${token}"}}`,
			`{"order": {"id": 42}, "token": "t0k"}`, nil)
		require.NoError(t, err)
		res := out.(flow.HTTPResult)
		require.Equal(t, 200, res.Status)
		require.Equal(t, "a, b", res.Headers["x-multi"])
		require.Equal(t, "application/json; charset=utf-8", res.Headers["content-type"])
		require.Equal(t, `{"auth":"Bearer t0k","big":9007199254740993,"id":42,"ua":"duraflow"}`, asJSON(t, res.Body), "the body is parsed, big numbers intact")
	})

	t.Run("PostJSONBody", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"method": "${m}", "url": "`+base+`/echo", "body": {"path": "order"}}`, `{"m": "post", "order": {"id": 1}}`, nil)
		require.NoError(t, err)
		require.JSONEq(t, `{"method": "POST", "contentType": "application/json", "body": "{\"id\":1}"}`, asJSON(t, out.(flow.HTTPResult).Body))
	})

	t.Run("PostTextBody", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"method": "PUT", "url": "`+base+`/echo", "headers": {"Content-Type": "text/csv"}, "body": {"template": "a,${n}"}}`, `{"n": 2}`, nil)
		require.NoError(t, err)
		require.JSONEq(t, `{"method": "PUT", "contentType": "text/csv", "body": "a,2"}`, asJSON(t, out.(flow.HTTPResult).Body))
	})

	t.Run("TextAndBinaryBodies", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"url": "`+base+`/text"}`, `{}`, nil)
		require.NoError(t, err)
		require.Equal(t, "plain text", out.(flow.HTTPResult).Body)
		out, err = invoke(t, h, `{"url": "`+base+`/bad-json"}`, `{}`, nil)
		require.NoError(t, err)
		require.Equal(t, "{oops", out.(flow.HTTPResult).Body, "unparsable JSON is kept as text")
		out, err = invoke(t, h, `{"url": "`+base+`/binary"}`, `{}`, nil)
		require.NoError(t, err)
		require.Equal(t, "//4A", out.(flow.HTTPResult).Body)
		require.Equal(t, "base64", out.(flow.HTTPResult).BodyEncoding)
	})

	t.Run("Statuses", func(t *testing.T) {
		t.Parallel()
		for code, retry := range map[int]bool{500: true, 502: true, 503: true, 408: true, 429: true, 400: false, 401: false, 404: false, 409: false, 422: false} {
			_, err := invoke(t, h, fmt.Sprintf(`{"url": "%s/status?code=%d&secret=s3"}`, base, code), `{}`, nil)
			requireFailure(t, err, flow.ErrorNameHTTP, retry, code)
			require.ErrorContains(t, err, fmt.Sprintf("answered %d %s: failure details", code, http.StatusText(code)))
			require.NotContains(t, err.Error(), "s3", "the query is left out of messages")
		}
		out, err := invoke(t, h, `{"url": "`+base+`/status?code=404", "acceptAnyStatus": true}`, `{}`, nil)
		require.NoError(t, err)
		require.Equal(t, 404, out.(flow.HTTPResult).Status)
	})

	t.Run("ResponseTooLarge", func(t *testing.T) {
		t.Parallel()
		_, err := invoke(t, h, `{"url": "`+base+`/big"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameResponseTooLarge, false)
	})

	t.Run("Redirects", func(t *testing.T) {
		t.Parallel()
		out, err := invoke(t, h, `{"url": "`+base+`/hop"}`, `{}`, nil)
		require.NoError(t, err)
		require.Equal(t, "plain text", out.(flow.HTTPResult).Body)
		_, err = invoke(t, h, `{"url": "`+base+`/loop"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameTooManyRedirects, false)
		require.ErrorContains(t, err, "more than 5 redirects")
		require.Equal(t, int64(6), loopHits.Load(), "the first request and 5 redirects")
	})

	t.Run("Timeout", func(t *testing.T) {
		t.Parallel()
		_, err := invoke(t, h, `{"url": "`+base+`/slow", "timeout": "100 milliseconds"}`, `{}`, nil)
		requireFailure(t, err, flow.ErrorNameHTTPRequest, true)
		require.ErrorContains(t, err, "no response within 100 milliseconds")
	})

	t.Run("ConnectionRefusedIsRetryable", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		l.Close()
		_, err = runHTTP(t, h, "http://"+addr+"/", "")
		requireFailure(t, err, flow.ErrorNameHTTPRequest, true)
	})

	t.Run("OnlyHTTPAndHTTPS", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{"file:///etc/passwd", "gopher://127.0.0.1/", "ftp://example.com/", "//no-scheme/", "http:///no-host"} {
			_, err := runHTTP(t, h, u, "")
			requireFailure(t, err, flow.ErrorNameInvalidInput, false, u)
		}
	})

	t.Run("Config", func(t *testing.T) {
		t.Parallel()
		_, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Allow: []string{"10.0.0.0/33"}})
		require.ErrorContains(t, err, "10.0.0.0/33")
		_, err = flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Allow: []string{"not a host"}})
		require.ErrorContains(t, err, "is not a CIDR, an IP or a host name")
	})
}

// TestHTTPRefusesInternalAddresses is the SSRF suite: addresses are checked
// after resolution, at dial time, and on every redirect.
func TestHTTPRefusesInternalAddresses(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("reached")) })
	redirector := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	resolver := testResolver{
		"evil.test":    addrs("127.0.0.1"),
		"allowed.test": addrs("127.0.0.1"),
		"mixed.test":   addrs("10.0.0.1", "127.0.0.1"),
	}
	// dialed records what the dialer was asked to connect to, and connects
	// every address to srv, so that allow-listed addresses that don't exist
	// here (10.0.0.1, 169.254.169.254) can be shown to be accepted.
	var mu sync.Mutex
	var dialed []string
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
		target := address
		if host, _, _ := net.SplitHostPort(address); host != "127.0.0.1" && host != "::1" {
			target = srv.Listener.Addr().String()
		}
		return (&net.Dialer{}).DialContext(ctx, network, target)
	}
	wasDialed := func(prefix string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range dialed {
			if strings.HasPrefix(d, prefix) {
				return true
			}
		}
		return false
	}

	strict := newHTTP(t, &flow.HTTPHandlerConfig{Resolver: resolver, DialContextFunc: dial})
	// A host name on the allowlist permits whatever it resolves to, not
	// other hosts at the same address.
	hostOnly := newHTTP(t, &flow.HTTPHandlerConfig{Resolver: resolver, Allow: []string{"allowed.test"}})

	refused := []struct {
		name, url, reason string
		h                 *flow.HTTPHandler
	}{
		{"Loopback", "http://127.0.0.1:" + srv.port + "/", "loopback", strict},
		{"IPv6Loopback", "http://[::1]:" + srv.port + "/", "loopback", strict},
		{"Metadata", "http://169.254.169.254/latest/meta-data/", "cloud metadata", strict},
		{"Private", "http://10.0.0.1/", "private", strict},
		{"NameResolvingToLoopback", "http://evil.test:" + srv.port + "/", "loopback", strict},
		{"AnyInternalAddressOfAName", "http://mixed.test:" + srv.port + "/", "private", strict},
		{"RedirectFromAllowedHostToLoopback", "http://allowed.test:" + redirector.port + "/?to=" + url.QueryEscape("http://127.0.0.1:"+srv.port+"/"), "loopback", hostOnly},
		{"RedirectToANameResolvingToLoopback", "http://allowed.test:" + redirector.port + "/?to=" + url.QueryEscape("http://evil.test:"+srv.port+"/"), "loopback", hostOnly},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := runHTTP(t, tc.h, tc.url, "")
			requireFailure(t, err, flow.ErrorNameAddressNotAllowed, false)
			var ae *flow.AddressNotAllowedError
			require.True(t, errors.As(err, &ae), "%v", err)
			require.Equal(t, tc.reason, ae.Reason)
			require.ErrorContains(t, err, "which the http handler's allowlist does not permit")
		})
	}
	t.Cleanup(func() { // after every parallel subtest
		require.Zero(t, srv.hits.Load(), "no refused request reached the server")
		require.False(t, wasDialed("10.0.0.1"), "refused addresses are never dialed")
		require.False(t, wasDialed("169.254.169.254"))
	})

	t.Run("RefusedWhateverTheNameResolvesTo", func(t *testing.T) {
		t.Parallel()
		for ip, reason := range map[string]string{
			"127.0.0.2": "loopback", "0.0.0.0": "unspecified", "0.1.2.3": "\"this network\"",
			"10.1.2.3": "private", "172.16.0.1": "private", "192.168.1.1": "private",
			"100.64.0.1": "shared (CGNAT)", "100.100.100.200": "shared (CGNAT)", "169.254.1.1": "link-local",
			"224.0.0.1": "multicast", "239.255.255.250": "multicast", "255.255.255.255": "broadcast", "240.0.0.1": "reserved",
			"::": "unspecified", "::ffff:127.0.0.1": "loopback", "::ffff:10.0.0.1": "private",
			"fc00::1": "private", "fd12:3456::1": "private", "fd00:ec2::254": "cloud metadata",
			"fe80::1": "link-local", "ff02::1": "multicast", "64:ff9b::7f00:1": "loopback (embedded in 64:ff9b::7f00:1)",
			"2002:a9fe:a9fe::1": "cloud metadata (embedded in 2002:a9fe:a9fe::1)",
		} {
			h := newHTTP(t, &flow.HTTPHandlerConfig{Resolver: testResolver{"target.test": addrs(ip)}, DialContextFunc: dial})
			_, err := runHTTP(t, h, "http://target.test:"+srv.port+"/", "")
			var ae *flow.AddressNotAllowedError
			require.True(t, errors.As(err, &ae), "%s: %v", ip, err)
			require.Equal(t, reason, ae.Reason, ip)
		}
	})

	t.Run("IPLiteralsAreRefusedWhenTheFlowIsValidated", func(t *testing.T) {
		t.Parallel()
		err := strict.Validate(json.RawMessage(`{"url": "http://[::1]:8080/admin"}`))
		require.ErrorContains(t, err, "url: refusing to connect to ::1: a loopback address")
	})

	accepted := []struct {
		name, url, dialedPrefix string
		cfg                     flow.HTTPHandlerConfig
	}{
		{"LoopbackByIP", "http://127.0.0.1:" + srv.port + "/", "127.0.0.1:", flow.HTTPHandlerConfig{Allow: []string{"127.0.0.1"}}},
		{"LoopbackByCIDR", "http://127.0.0.1:" + srv.port + "/", "127.0.0.1:", flow.HTTPHandlerConfig{Allow: []string{"127.0.0.0/8"}}},
		{"MetadataByIP", "http://169.254.169.254/latest/", "169.254.169.254:80", flow.HTTPHandlerConfig{Allow: []string{"169.254.169.254"}}},
		{"PrivateByCIDR", "http://10.0.0.1/", "10.0.0.1:80", flow.HTTPHandlerConfig{Allow: []string{"10.0.0.0/8"}}},
		{"NameByCIDR", "http://evil.test:" + srv.port + "/", "127.0.0.1:", flow.HTTPHandlerConfig{Allow: []string{"127.0.0.0/8"}}},
		{"NameByHost", "http://allowed.test:" + srv.port + "/", "127.0.0.1:", flow.HTTPHandlerConfig{Allow: []string{"allowed.test"}}},
		{"NameByWildcard", "http://api.allowed.test:" + srv.port + "/", "127.0.0.1:", flow.HTTPHandlerConfig{Allow: []string{"*.allowed.test"}}},
		{"RedirectToAllowedLoopback", "http://allowed.test:" + redirector.port + "/?to=" + url.QueryEscape("http://127.0.0.1:"+srv.port+"/"), "127.0.0.1:", flow.HTTPHandlerConfig{Allow: []string{"allowed.test", "127.0.0.1"}}},
	}
	accepting := newServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("reached")) })
	for _, tc := range accepted {
		t.Run("Allowed"+tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []string
			cfg := tc.cfg
			cfg.Resolver = testResolver{"evil.test": addrs("127.0.0.1"), "allowed.test": addrs("127.0.0.1"), "api.allowed.test": addrs("127.0.0.1")}
			cfg.DialContextFunc = func(ctx context.Context, network, address string) (net.Conn, error) {
				mu.Lock()
				got = append(got, address)
				mu.Unlock()
				return (&net.Dialer{}).DialContext(ctx, network, accepting.Listener.Addr().String())
			}
			h := newHTTP(t, &cfg)
			u := strings.NewReplacer(srv.port, accepting.port).Replace(tc.url)
			out, err := runHTTP(t, h, u, "")
			require.NoError(t, err)
			require.Equal(t, "reached", out["body"])
			mu.Lock()
			defer mu.Unlock()
			require.NotEmpty(t, got)
			require.True(t, strings.HasPrefix(got[len(got)-1], tc.dialedPrefix), "dialed %v", got)
		})
	}

	t.Run("AllowedIPv6Loopback", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback here: %v", err)
		}
		v6 := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("v6")) }))
		v6.Listener.Close()
		v6.Listener = l
		v6.Start()
		defer v6.Close()
		h := newHTTP(t, &flow.HTTPHandlerConfig{Allow: []string{"::1"}})
		out, err := runHTTP(t, h, v6.URL+"/", "")
		require.NoError(t, err)
		require.Equal(t, "v6", out["body"])
		_, err = runHTTP(t, newHTTP(t, nil), v6.URL+"/", "")
		requireFailure(t, err, flow.ErrorNameAddressNotAllowed, false)
	})

	t.Run("DefaultDialerChecksRealConnections", func(t *testing.T) {
		t.Parallel()
		// No DialContextFunc: the real net.Dialer runs, with its Control hook.
		h := newHTTP(t, &flow.HTTPHandlerConfig{Resolver: resolver})
		_, err := runHTTP(t, h, "http://evil.test:"+srv.port+"/", "")
		requireFailure(t, err, flow.ErrorNameAddressNotAllowed, false)
		allowed := newHTTP(t, &flow.HTTPHandlerConfig{Resolver: resolver, Allow: []string{"127.0.0.1/32"}})
		_, err = runHTTP(t, allowed, "http://evil.test:"+accepting.port+"/", "")
		require.NoError(t, err)
	})
}
