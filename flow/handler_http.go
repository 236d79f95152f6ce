package flow

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow/internal/netguard"
	"github.com/duraflow/duraflow/workflow"
)

// TypeHTTP is the step type of the built-in http handler.
const TypeHTTP = "http"

// HTTPConfig is the config of an http step.
//
//	{"method": "POST", "url": "https://api.example.com/orders/${order.id}/charge",
//	 "headers": {"Authorization": "Bearer ${secrets.token}"},
//	 "body": {"path": "order.payment"}, "timeout": "10 seconds"}
//
// The step's output is {"status": 200, "headers": {"content-type":
// "application/json"}, "body": ...}: header names in lower case with their
// values joined by ", ", and the body parsed when the response is JSON
// (application/json or +json), else as text (base64 with "bodyEncoding":
// "base64" when it is not UTF-8). A status outside 2xx fails the step with
// HTTP_ERROR, retried for 408, 429 and 5xx, not retried for the rest,
// unless acceptAnyStatus is set.
type HTTPConfig struct {
	// Method is GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, or a
	// template that yields one.
	//
	// Defaults to GET.
	Method string `json:"method,omitempty"`
	// URL is an http or https URL, or a template that yields one. Each
	// value is escaped for the part of the URL it lands in: url.PathEscape
	// in the path ("a/b?c" becomes "a%2Fb%3Fc"; "." and ".." are refused),
	// url.QueryEscape in the query, letters, digits, '.' and '-' only in the
	// host; a placeholder before "://" does not validate. "${raw:path}"
	// inserts a trusted value as it is ("${raw:api.base}/orders/${id}").
	URL string `json:"url"`
	// Headers are request headers; values are templates. Host cannot be set.
	Headers map[string]string `json:"headers,omitempty"`
	// Body selects the request body: a string is sent as it is (text/plain
	// unless Content-Type is set), anything else as JSON (application/json).
	// Nil sends no body.
	Body *Selector `json:"body,omitempty"`
	// Timeout bounds the request, within the step's attempt timeout.
	//
	// Defaults to the handler's DefaultTimeout (30 seconds).
	Timeout dftype.Duration `json:"timeout,omitempty"`
	// AcceptAnyStatus makes every status a success, for flows that branch
	// on the status themselves.
	AcceptAnyStatus bool `json:"acceptAnyStatus,omitempty"`
}

// HTTPResult is the output of an http step.
type HTTPResult struct {
	Status       int               `json:"status"`
	Headers      map[string]string `json:"headers"`
	Body         any               `json:"body"`
	BodyEncoding string            `json:"bodyEncoding,omitempty"`
}

// Resolver resolves host names; *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialContextFunc dials a network address.
type DialContextFunc func(ctx context.Context, network, address string) (net.Conn, error)

// AddressNotAllowedError is the error of an http step that was about to
// connect to an address the handler refuses: loopback, private (RFC 1918 and
// IPv6 ULA), link-local, shared (CGNAT), unspecified, multicast, reserved or
// a cloud metadata address, unless its allowlist permits it. The check runs
// on the resolved IP when the connection is dialed, so a name that resolves
// to such an address (DNS rebinding included) and a redirect to one are
// refused too. Its recorded name is ADDRESS_NOT_ALLOWED and it is not retried.
type AddressNotAllowedError = netguard.AddressNotAllowedError

// HTTPHandlerConfig configures the http handler.
type HTTPHandlerConfig struct {
	// Allow lists internal destinations the handler may connect to anyway:
	// CIDRs ("10.0.0.0/8"), IPs ("127.0.0.1", "::1"), host names
	// ("localhost", whatever they resolve to) and wildcard names
	// ("*.svc.cluster.local", subdomains only). Everything public is allowed.
	//
	// Defaults to none: no loopback, private, link-local, CGNAT, unspecified,
	// multicast, reserved or metadata address is reachable.
	Allow []string
	// Resolver resolves host names before the addresses are checked.
	//
	// Defaults to net.DefaultResolver.
	Resolver Resolver
	// DialContextFunc connects to an IP and port that passed the check
	// ("10.0.0.1:443"), for tests. The default dialer checks the address
	// again in its Control hook, on the socket's own address.
	//
	// Defaults to a net.Dialer with a 10 second timeout.
	DialContextFunc DialContextFunc
	// MaxResponseBytes bounds a response body; a longer one fails the step
	// with RESPONSE_TOO_LARGE. The whole output must also fit the 1 MiB step
	// result limit.
	//
	// Defaults to 1 MiB.
	MaxResponseBytes int64
	// MaxRedirects bounds the redirects followed.
	//
	// Defaults to 5.
	MaxRedirects int
	// DefaultTimeout bounds a request without a timeout of its own.
	//
	// Defaults to 30 seconds.
	DefaultTimeout time.Duration
	// UserAgent is sent unless the step sets User-Agent.
	//
	// Defaults to "duraflow".
	UserAgent string
}

// WithDefaults returns a copy of the config with zero fields filled in.
func (c *HTTPHandlerConfig) WithDefaults() *HTTPHandlerConfig {
	var out HTTPHandlerConfig
	if c != nil {
		out = *c
	}
	if out.Resolver == nil {
		out.Resolver = net.DefaultResolver
	}
	out.MaxResponseBytes = cmp.Or(out.MaxResponseBytes, workflow.MaxPayloadBytes)
	out.MaxRedirects = cmp.Or(out.MaxRedirects, 5)
	out.DefaultTimeout = cmp.Or(out.DefaultTimeout, 30*time.Second)
	out.UserAgent = cmp.Or(out.UserAgent, "duraflow")
	return &out
}

// HTTPHandler is the built-in http handler. Its transport is shared by every
// step it runs and never uses a proxy from the environment (a proxy would
// make the address check meaningless).
type HTTPHandler struct {
	cfg    *HTTPHandlerConfig
	policy *netguard.Policy
	client *http.Client
}

var errTooManyRedirects = errors.New("too many redirects")

// NewHTTPHandler returns an http handler (nil config takes the defaults).
func NewHTTPHandler(cfg *HTTPHandlerConfig) (*HTTPHandler, error) {
	c := cfg.WithDefaults()
	if c.MaxResponseBytes < 0 || c.MaxRedirects < 0 || c.DefaultTimeout < 0 {
		return nil, errors.New("flow: HTTPHandlerConfig: limits must not be negative")
	}
	policy, err := netguard.NewPolicy(c.Allow)
	if err != nil {
		return nil, fmt.Errorf("flow: HTTPHandlerConfig.Allow: %w", err)
	}
	h := &HTTPHandler{cfg: c, policy: policy}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           h.dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	h.client = &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > c.MaxRedirects {
				return fmt.Errorf("%w: stopped after %d", errTooManyRedirects, c.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("refusing a redirect to a %q URL", req.URL.Scheme)
			}
			return nil
		},
	}
	return h, nil
}

// Type returns "http".
func (h *HTTPHandler) Type() string { return TypeHTTP }

var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// Validate checks the config: the URL, method and header templates, and a
// URL whose host is an IP literal the allowlist does not permit.
func (h *HTTPHandler) Validate(config json.RawMessage) error {
	var c HTTPConfig
	if err := DecodeConfig(config, &c); err != nil {
		return err
	}
	var problems []Problem
	add := func(path, format string, args ...any) {
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	if c.URL == "" {
		add("url", "is required")
	} else if t, err := parseTemplate(c.URL); err != nil {
		add("url", "%v", err)
	} else if !t.hasPlaceholders() {
		if _, err := h.checkURL(c.URL); err != nil {
			add("url", "%v", err)
		}
	} else if err := validateURLTemplate(t); err != nil {
		add("url", "%v", err)
	} else if lit := t[0].literal; t[0].path == nil && strings.Contains(lit, "://") &&
		!strings.HasPrefix(strings.ToLower(lit), "http://") && !strings.HasPrefix(strings.ToLower(lit), "https://") {
		add("url", "only http and https URLs are allowed")
	}
	if c.Method != "" {
		if t, err := parseTemplate(c.Method); err != nil {
			add("method", "%v", err)
		} else if !t.hasPlaceholders() && !validMethod(strings.ToUpper(strings.TrimSpace(c.Method))) {
			add("method", "unknown method %q (use %s)", c.Method, strings.Join(httpMethods, ", "))
		}
	}
	for _, name := range sortedKeys(c.Headers) {
		p := joinPath("headers", name)
		switch {
		case !validHeaderName(name):
			add(p, "%q is not a valid header name", name)
		case strings.EqualFold(name, "Host"):
			add(p, "the Host header cannot be set; it comes from the url")
		}
		if err := ValidateTemplate(c.Headers[name]); err != nil {
			add(p, "%v", err)
		}
	}
	if c.Body != nil {
		for _, pr := range c.Body.validate() {
			add(joinPath("body", pr.Path), "%s", pr.Message)
		}
	}
	if c.Timeout < 0 {
		add("timeout", "must not be negative")
	}
	return newValidationError(problems, nil)
}

func validMethod(m string) bool {
	for _, x := range httpMethods {
		if m == x {
			return true
		}
	}
	return false
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 126 || r <= 32 || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// checkURL parses a URL and checks its scheme, host, and an IP literal host.
func (h *HTTPHandler) checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("only http and https URLs are allowed, not %q", raw)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("URL %q has no host", raw)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if err := h.policy.Check(u.Hostname(), ip); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// Run sends the request.
func (h *HTTPHandler) Run(ctx context.Context, inv *Invocation) (any, error) {
	var c HTTPConfig
	if err := DecodeConfig(inv.Config, &c); err != nil {
		return nil, failure(ErrorNameInvalidConfig, "%v", err)
	}
	method := http.MethodGet
	if c.Method != "" {
		m, err := inv.Expand(c.Method)
		if err != nil {
			return nil, err
		}
		method = strings.ToUpper(strings.TrimSpace(m))
		if !validMethod(method) {
			return nil, failure(ErrorNameInvalidInput, "unknown method %q", m)
		}
	}
	urlTemplate, err := parseTemplate(c.URL)
	if err != nil {
		return nil, failure(ErrorNameInvalidConfig, "url: %v", err)
	}
	rawURL, err := urlTemplate.expandEscaped(inv.Context, escapeURLValue)
	if err != nil {
		return nil, err
	}
	u, err := h.checkURL(rawURL)
	if err != nil {
		var ae *AddressNotAllowedError
		if errors.As(err, &ae) {
			return nil, &workflow.NonRetryableError{Name: ErrorNameAddressNotAllowed, Err: ae}
		}
		return nil, failure(ErrorNameInvalidInput, "%v", err)
	}
	var body io.Reader
	contentType := ""
	if c.Body != nil {
		v, err := inv.Select(c.Body)
		if err != nil {
			return nil, err
		}
		if s, ok := v.(string); ok {
			body, contentType = strings.NewReader(s), "text/plain; charset=utf-8"
		} else {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, failure(ErrorNameInvalidInput, "encoding body: %v", err)
			}
			body, contentType = strings.NewReader(string(b)), "application/json"
		}
	}
	timeout := cmp.Or(c.Timeout.Std(), h.cfg.DefaultTimeout)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, u.String(), body)
	if err != nil {
		return nil, failure(ErrorNameInvalidInput, "building request: %v", err)
	}
	req.Header.Set("User-Agent", h.cfg.UserAgent)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, name := range sortedKeys(c.Headers) {
		v, err := inv.Expand(c.Headers[name])
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(v, "\r\n") {
			return nil, failure(ErrorNameInvalidInput, "header %s: a value cannot contain a line break", name)
		}
		req.Header.Set(name, v)
	}

	resp, err := h.client.Do(req)
	if err != nil {
		return nil, h.requestError(ctx, method, u, timeout, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, h.cfg.MaxResponseBytes+1))
	if err != nil {
		return nil, retryable(ErrorNameHTTPRequest, fmt.Errorf("%s %s: reading the response: %w", method, redact(u), err))
	}
	if int64(len(data)) > h.cfg.MaxResponseBytes {
		return nil, failure(ErrorNameResponseTooLarge, "%s %s: the response body is larger than %d bytes", method, redact(u), h.cfg.MaxResponseBytes)
	}
	res := HTTPResult{Status: resp.StatusCode, Headers: map[string]string{}}
	for name, vals := range resp.Header {
		res.Headers[strings.ToLower(name)] = strings.Join(vals, ", ")
	}
	res.Body, res.BodyEncoding = responseBody(resp.Header.Get("Content-Type"), data)
	if resp.StatusCode/100 != 2 && !c.AcceptAnyStatus {
		err := fmt.Errorf("%s %s answered %s: %s", method, redact(resp.Request.URL), resp.Status, snippet(data))
		switch {
		case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
			return nil, retryable(ErrorNameHTTP, err)
		default:
			return nil, &workflow.NonRetryableError{Name: ErrorNameHTTP, Err: err}
		}
	}
	return res, nil
}

func (h *HTTPHandler) requestError(attemptCtx context.Context, method string, u *url.URL, timeout time.Duration, err error) error {
	var ae *AddressNotAllowedError
	switch {
	case errors.As(err, &ae):
		return &workflow.NonRetryableError{Name: ErrorNameAddressNotAllowed, Err: ae}
	case errors.Is(err, errTooManyRedirects):
		return failure(ErrorNameTooManyRedirects, "%s %s: more than %d redirects", method, redact(u), h.cfg.MaxRedirects)
	case attemptCtx.Err() != nil:
		return attemptCtx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return retryable(ErrorNameHTTPRequest, fmt.Errorf("%s %s: no response within %s", method, redact(u), dftype.FormatDuration(timeout)))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return retryable(ErrorNameHTTPRequest, fmt.Errorf("%s %s: %w", method, redact(u), err))
}

// responseBody parses a JSON body and keeps any other as text.
func responseBody(contentType string, data []byte) (any, string) {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && len(data) > 0 &&
		(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		if v, err := decodeValue(data); err == nil {
			return v, ""
		}
	}
	if !utf8.Valid(data) {
		return base64.StdEncoding.EncodeToString(data), "base64"
	}
	return string(data), ""
}

// redact drops the user info and query of a URL for messages, which may hold
// secrets.
func redact(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery, c.ForceQuery, c.Fragment = "", false, ""
	return c.String()
}

func snippet(b []byte) string {
	const limit = 256
	s := strings.ToValidUTF8(string(b), "?")
	if len(s) > limit {
		return s[:limit] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// dialContext resolves the host, refuses internal addresses the allowlist
// does not permit, and dials the first address that connects.
func (h *HTTPHandler) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	hostOK := h.policy.HostAllowed(host)
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		lookup := "ip"
		switch network {
		case "tcp4":
			lookup = "ip4"
		case "tcp6":
			lookup = "ip6"
		}
		ips, err = h.cfg.Resolver.LookupNetIP(ctx, lookup, host)
		if err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("%s has no addresses", host)
		}
	}
	var firstErr error
	for _, ip := range ips {
		ip = ip.Unmap()
		if !hostOK {
			if err := h.policy.Check(host, ip); err != nil {
				firstErr = cmp.Or(firstErr, err)
				continue
			}
		}
		conn, err := h.dial(ctx, network, net.JoinHostPort(ip.String(), port), host, hostOK)
		if err == nil {
			return conn, nil
		}
		firstErr = cmp.Or(firstErr, err)
	}
	return nil, firstErr
}

func (h *HTTPHandler) dial(ctx context.Context, network, address, host string, hostOK bool) (net.Conn, error) {
	if h.cfg.DialContextFunc != nil {
		return h.cfg.DialContextFunc(ctx, network, address)
	}
	d := &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		// The socket's own address, checked once more right before connect.
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			if hostOK {
				return nil
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("refusing to connect to %q: %w", address, err)
			}
			return h.policy.Check(host, ap.Addr())
		},
	}
	return d.DialContext(ctx, network, address)
}
