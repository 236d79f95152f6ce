//go:build attack

package attack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// The attacks the binary cannot be set up for run here, at package level,
// against the handlers of package flow: a resolver of the test's own (the
// binary's would send names to DNS), and an allow-listed exec command.

// fakeResolver answers from a function; lookups counts the calls per name.
type fakeResolver struct {
	mu      sync.Mutex
	lookups map[string]int
	answer  func(host string, n int) []netip.Addr
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	if r.lookups == nil {
		r.lookups = map[string]int{}
	}
	r.lookups[host]++
	n := r.lookups[host]
	r.mu.Unlock()
	if ips := r.answer(host, n); len(ips) > 0 {
		return ips, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// loopbackDialer dials only loopback: any other address (a "public" one a
// fake resolver answered) goes to stand, the server standing in for it. It
// records every address asked for.
type loopbackDialer struct {
	mu     sync.Mutex
	dialed []string
	stand  string
}

func (d *loopbackDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, address)
	d.mu.Unlock()
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	target := address
	if ip, err := netip.ParseAddr(host); err != nil || !ip.Unmap().IsLoopback() {
		if d.stand == "" {
			return nil, errors.New("no stand-in for a public address")
		}
		target = d.stand
	}
	return (&net.Dialer{}).DialContext(ctx, "tcp", target)
}

func (d *loopbackDialer) addresses() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// runStep runs one step of a handler as a compiled flow does, with the
// context given as JSON.
func runStep(t *testing.T, h flow.Handler, config, contextJSON string) (any, error) {
	t.Helper()
	var state map[string]any
	dec := json.NewDecoder(strings.NewReader(contextJSON))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&state))
	ctx := wfcore.ContextWithStepInfo(context.Background(), workflow.StepInfo{Step: "s#1", Attempt: 1})
	return h.Run(ctx, &flow.Invocation{FlowID: "attack", FlowVersion: "1.0.0", StepID: "s", Visit: 1,
		Config: json.RawMessage(config), Context: state})
}

func requireAddressRefused(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var ae *flow.AddressNotAllowedError
	require.True(t, errors.As(err, &ae), "want ADDRESS_NOT_ALLOWED, got %v", err)
	require.Equal(t, flow.ErrorNameAddressNotAllowed, workflow.ErrorName(err))
	require.True(t, workflow.IsNonRetryable(err))
}

// TestSSRFPackageLevel covers what needs a resolver of the test's own:
// encodings as a resolver that reads them as addresses (inet_aton) would
// answer, a name that answers public and then loopback (rebinding between
// the first request and a redirect), and a name with a public and a
// loopback address.
func TestSSRFPackageLevel(t *testing.T) {
	t.Parallel()
	canary := newCanary(t)
	public := netip.MustParseAddr("93.184.216.34") // never dialed: loopbackDialer sends it to a stand-in

	t.Run("EncodingsReadAsLoopback", func(t *testing.T) {
		t.Parallel()
		d := &loopbackDialer{}
		res := &fakeResolver{answer: func(string, int) []netip.Addr { return []netip.Addr{netip.MustParseAddr("127.0.0.1")} }}
		h, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Resolver: res, DialContextFunc: d.dial})
		require.NoError(t, err)
		for _, host := range []string{"0x7f000001", "0x7f.0x0.0x0.0x1", "0x7f.1", "2130706433", "0177.0.0.1", "0177.1", "127.1", "0", "017700000001"} {
			_, err := runStep(t, h, `{"url":"${raw:target}"}`, `{"target":"http://`+host+`:`+canary.port+`/"}`)
			requireAddressRefused(t, err, host)
		}
		require.Empty(t, d.addresses(), "refused addresses are never dialed")
	})

	t.Run("RebindingAtDial", func(t *testing.T) {
		t.Parallel()
		// The stand-in for the public address redirects to the same name on
		// another port, so the redirect needs a new connection and a new
		// lookup, which now answers loopback.
		var standHits atomic.Int64
		stand := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			standHits.Add(1)
			http.Redirect(w, r, "http://rebind.test:"+canary.port+"/", http.StatusFound)
		}))
		defer stand.Close()
		d := &loopbackDialer{stand: stand.Listener.Addr().String()}
		res := &fakeResolver{answer: func(host string, n int) []netip.Addr {
			if host != "rebind.test" {
				return nil
			}
			if n == 1 {
				return []netip.Addr{public}
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
		}}
		h, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Resolver: res, DialContextFunc: d.dial})
		require.NoError(t, err)
		_, err = runStep(t, h, `{"url":"http://rebind.test:8080/start"}`, `{}`)
		requireAddressRefused(t, err)
		require.Equal(t, int64(1), standHits.Load(), "the first answer (public) was used")
		require.Equal(t, []string{"93.184.216.34:8080"}, d.addresses(), "the rebound (loopback) answer was never dialed")
	})

	t.Run("PublicAndLoopbackInOneAnswer", func(t *testing.T) {
		t.Parallel()
		d := &loopbackDialer{} // no stand-in: the public address fails to connect
		res := &fakeResolver{answer: func(string, int) []netip.Addr {
			return []netip.Addr{public, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
		}}
		h, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Resolver: res, DialContextFunc: d.dial})
		require.NoError(t, err)
		_, err = runStep(t, h, `{"url":"http://mixed.test:`+canary.port+`/"}`, `{}`)
		require.Error(t, err)
		for _, a := range d.addresses() {
			require.True(t, strings.HasPrefix(a, "93.184.216.34:"), "dialed %s after the public address failed", a)
		}
	})

	t.Run("RedirectFromAllowedHostToLoopback", func(t *testing.T) {
		t.Parallel()
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		}))
		defer redirector.Close()
		_, rport, _ := net.SplitHostPort(redirector.Listener.Addr().String())
		res := &fakeResolver{answer: func(host string, _ int) []netip.Addr {
			switch host {
			case "allowed.test", "evil.test":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}
			}
			return nil
		}}
		// The real dialer, with its Control hook: only loopback is involved.
		h, err := flow.NewHTTPHandler(&flow.HTTPHandlerConfig{Resolver: res, Allow: []string{"allowed.test"}})
		require.NoError(t, err)
		for _, to := range []string{
			"http://127.0.0.1:" + canary.port + "/", "http://evil.test:" + canary.port + "/", "http://[::ffff:127.0.0.1]:" + canary.port + "/",
			"http://0x7f000001:" + canary.port + "/", "http://allowed.test@127.0.0.1:" + canary.port + "/",
		} {
			_, err := runStep(t, h, `{"url":"${raw:target}"}`, `{"target":"http://allowed.test:`+rport+`/?to=`+queryEscape(to)+`"}`)
			require.Error(t, err, to)
			require.Contains(t, []string{flow.ErrorNameAddressNotAllowed, flow.ErrorNameHTTPRequest}, workflow.ErrorName(err), "%s: %v", to, err)
		}
	})
	t.Cleanup(func() { require.Zero(t, canary.hits.Load(), "a refused request reached the canary") })
}

// TestExecArgsRunWithoutShell runs an allow-listed command with arguments
// full of shell syntax: they reach the program as they are, nothing
// interprets them, and the program sees no environment but the host's list.
func TestExecArgsRunWithoutShell(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/usr/bin/printf", "/usr/bin/env"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s is missing: %v", p, err)
		}
	}
	h, err := flow.NewExecHandler(&flow.ExecHandlerConfig{Commands: []flow.ExecCommand{
		// printf '"%s"' <arg> writes the argument as a JSON string.
		{Name: "quote", Path: "/usr/bin/printf", Args: []string{`"%s"`}, AllowArgs: true},
		{Name: "env", Path: "/usr/bin/env"},
	}})
	require.NoError(t, err)

	for _, arg := range []string{"; id", "$(id)", "`id`", "&& touch /tmp/duraflow-attack-pwned", "| cat /etc/passwd", "> /tmp/duraflow-attack-x", "$HOME", "*", "a' 'b"} {
		ctxJSON, _ := json.Marshal(map[string]string{"arg": arg})
		out, err := runStep(t, h, `{"command":"quote","args":["${arg}"]}`, string(ctxJSON))
		require.NoError(t, err, arg)
		require.Equal(t, arg, out, "the argument reached the program unchanged")
	}
	_, err = os.Stat("/tmp/duraflow-attack-pwned")
	require.True(t, os.IsNotExist(err), "a shell ran the argument")

	// The host's environment is not inherited: env prints nothing, which is null.
	out, err := runStep(t, h, `{"command":"env"}`, `{}`)
	require.NoError(t, err)
	require.Nil(t, out, "the command saw an environment: %v", out)

	for _, cfg := range []string{
		`{"command":"/usr/bin/printf"}`, `{"command":"/usr/bin/../bin/printf"}`, `{"command":"quote "}`, `{"command":"QUOTE"}`,
		`{"command":"env","args":["sh","-c","id"]}`, `{"command":"quote","env":["A=b"]}`, `{"command":"${x}"}`,
	} {
		require.Error(t, h.Validate(json.RawMessage(cfg)), cfg)
		_, err := runStep(t, h, cfg, `{"x":"quote"}`)
		require.Error(t, err, cfg)
		require.True(t, workflow.IsNonRetryable(err), "%s: %v", cfg, err)
	}
}
