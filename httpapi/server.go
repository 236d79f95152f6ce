package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/propagation"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

// Server is the HTTP API over one management client. Its Handler is safe for
// concurrent use.
type Server struct {
	cfg       *Config
	client    *client.Client
	log       *slog.Logger
	authorize AuthorizeFunc // nil when authentication is off
	tokens    tokenSet      // the built-in tokens, when they authorize
	tickSlots chan struct{}
	handler   http.Handler
	// routes are the registered routes, triggers the compiled triggers and
	// openAPI the served OpenAPI document (see Routes and OpenAPI).
	routes   []Route
	actions  map[string]Action // by "METHOD path", as registered
	triggers []*compiledTrigger
	openAPI  []byte
	// everyNamespace holds the routes (by "METHOD path") that act on every
	// namespace (see routeScope).
	everyNamespace map[string]bool
}

// New returns a server for cfg; see Config for the defaults.
func New(cfg *Config) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("httpapi: Config is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		client:    cfg.Client,
		log:       cfg.Logger,
		tickSlots: make(chan struct{}, cfg.MaxConcurrentTicks),
		actions:   map[string]Action{},

		everyNamespace: map[string]bool{},
	}
	switch {
	case cfg.Authorize != nil:
		s.authorize = cfg.Authorize
	case len(cfg.Tokens) > 0:
		set, err := newTokenSet(cfg.Tokens)
		if err != nil {
			return nil, err
		}
		s.authorize, s.tokens = set.authorize, set
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(recoverPanics, extractTraceContext)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	prefix := cfg.Prefix
	if prefix == "/" {
		prefix = ""
	}
	g := e.Group(prefix)
	route := func(method, path string, h echo.HandlerFunc, action Action, scope ...routeScope) {
		ns := ""
		if slices.Contains(scope, everyNamespace) {
			ns = AllNamespaces
			s.everyNamespace[method+" "+prefix+path] = true
		}
		g.Add(method, path, h, s.authMiddleware(action, ns), retryReads)
		s.actions[method+" "+prefix+path] = action
	}
	// The document of the API, under the prefix and behind the read scope
	// like the rest of it (on loopback it needs no token when
	// authentication is off).
	route(http.MethodGet, "/openapi.json", s.serveOpenAPI, ActionRead)
	// The index, at the prefix itself (the URL dev prints), with and
	// without its trailing slash.
	if prefix != "" {
		route(http.MethodGet, "", s.serveIndex, ActionRead)
	}
	route(http.MethodGet, "/", s.serveIndex, ActionRead)
	route(http.MethodGet, "/workflows", s.listWorkflows, ActionRead)
	route(http.MethodGet, "/instances", s.listAllInstances, ActionRead)
	route(http.MethodGet, "/workflows/:name/instances", s.listInstances, ActionRead)
	route(http.MethodPost, "/workflows/:name/instances", s.createInstance, ActionCreate)
	route(http.MethodPost, "/workflows/:name/instances/batch", s.createBatch, ActionCreate)
	route(http.MethodGet, "/workflows/:name/instances/:id", s.getInstance, ActionRead)
	// echo prefers the static "batch" segment over :id whatever the method,
	// so an instance named "batch" needs its GET spelled out.
	route(http.MethodGet, "/workflows/:name/instances/batch", s.getBatchInstance, ActionRead)
	route(http.MethodPost, "/workflows/:name/instances/:id/pause", s.change((*client.Client).Pause), ActionManage)
	route(http.MethodPost, "/workflows/:name/instances/:id/resume", s.change((*client.Client).Resume), ActionManage)
	route(http.MethodPost, "/workflows/:name/instances/:id/terminate", s.change((*client.Client).Terminate), ActionManage)
	route(http.MethodPost, "/workflows/:name/instances/:id/restart", s.change((*client.Client).Restart), ActionManage)
	route(http.MethodPost, "/workflows/:name/instances/:id/compensate", s.change((*client.Client).Compensate), ActionManage)
	route(http.MethodPost, "/workflows/:name/instances/:id/events", s.sendEvent, ActionEvents)
	route(http.MethodGet, "/workflows/:name/instances/:id/history", s.history, ActionRead)
	if cfg.Tick != nil {
		route(http.MethodPost, "/_runner/tick", s.tick, ActionTick, everyNamespace)
	}
	s.addScheduleRoutes(route)
	s.addQueueRoutes(route)
	s.addFlowRoutes(route)
	s.addWorkerRoutes(route)
	s.addLifecycleRoutes(route)
	// Triggers go last: they are checked against every route above.
	if err := s.addTriggers(e); err != nil {
		return nil, err
	}
	s.routes = routesOf(e, s.actions, s.everyNamespace)
	var err error
	if s.openAPI, err = s.buildOpenAPI(); err != nil {
		return nil, err
	}

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		closeUnread(w)
		writeError(w, http.StatusForbidden, apiclient.CodeForbidden, "forbidden: cross-origin request refused")
	}))
	s.handler = cop.Handler(e)
	return s, nil
}

// Handler returns the server's HTTP handler: the API under Config.Prefix and
// /healthz and /readyz at the root. It refuses unsafe cross-origin requests
// from browsers (403 FORBIDDEN), so a web page cannot drive the API with a
// visitor's network position.
func (s *Server) Handler() http.Handler { return s.handler }

// Register mounts the server's API routes on g, a group of a host
// program's own echo server whose prefix is Config.Prefix: the host chooses
// where the API lives by setting Config.Prefix, and its group must have
// that prefix (else Register returns an error, and the host should stop:
// the routes are registered all the same). Requests under the group are
// served by Handler, so they answer exactly as on a server of their
// own: the same authentication, the same JSON errors (whatever the host's
// HTTPErrorHandler), the same cross-origin protection; the host's group
// middleware runs first. /healthz, /readyz and the triggers live at the
// root, outside any group: a host that wants them routes those paths to
// Handler too.
//
// In a net/http server, mount Handler at Config.Prefix instead, without
// stripping the prefix (the API builds its Location headers from it):
//
//	mux.Handle(cfg.Prefix+"/", srv.Handler())
func (s *Server) Register(g *echo.Group) error {
	routes := g.Any("/*", echo.WrapHandler(s.handler))
	prefix := strings.TrimSuffix(routes[0].Path, "/*")
	want := s.cfg.Prefix
	if want == "/" {
		want = ""
	}
	if prefix != want {
		return fmt.Errorf("httpapi: Register: the group's prefix %q is not Config.Prefix %q", prefix, s.cfg.Prefix)
	}
	return nil
}

// HTTPServer returns an *http.Server that serves Handler with the
// configured timeouts: ReadHeaderTimeout, ReadTimeout (ReadHeaderTimeout +
// BodyTimeout, for the whole request), WriteTimeout and IdleTimeout. Serve
// it with Serve(listener), or set Addr; set ErrorLog as needed.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadHeaderTimeout + s.cfg.BodyTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
	}
}

// Limits returns the limits the server applies, its zero fields filled:
// what a handler served beside the API (the web console) applies too.
func (s *Server) Limits() Limits { return s.cfg.Limits }

// MaxBodyBytes returns the bound of a request body the server applies
// (Config.MaxBodyBytes, or its default).
func (s *Server) MaxBodyBytes() int64 { return s.cfg.MaxBodyBytes }

// AuthConfigured reports whether the server authenticates requests (it has
// tokens or an AuthorizeFunc). Pass it to CheckListenAddr.
func (s *Server) AuthConfigured() bool { return s.authorize != nil }

// authMiddleware checks that the request may do action in the namespace
// it acts in, and records that namespace: for ns "" the one the request
// selects (resolveNamespace); else ns, which the route decides
// (AllNamespaces for a route of every namespace, or a trigger's), and
// which an AuthorizeFunc sees as RequestNamespace. Without authentication
// it accepts only requests addressed to a loopback host.
func (s *Server) authMiddleware(action Action, ns string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if ns != "" {
				r = withRouteNamespace(r, ns)
				c.SetRequest(r)
			}
			var (
				namespaces []string // the token's, when it is limited to some
				tokenName  string
			)
			if s.authorize == nil {
				if !isLoopbackHost(r.Host) {
					return fmt.Errorf("%w: authentication is off, so only loopback hosts are served (Host %q)", ErrForbidden, r.Host)
				}
			} else if s.tokens != nil {
				tok, err := s.tokens.match(r, action)
				if err != nil {
					return err
				}
				namespaces, tokenName = tok.Namespaces, tok.Name
				c.Set(tokenScopesKey, tok.Scopes)
			} else if err := s.authorize(r, action); err != nil {
				if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden) {
					return err
				}
				return fmt.Errorf("authorizing %s: %w", action, err)
			}
			var err error
			if ns == "" {
				err = resolveNamespace(c, namespaces, tokenName)
			} else {
				err = resolveRouteNamespace(c, ns, namespaces, tokenName)
			}
			if err != nil {
				return err
			}
			if len(namespaces) > 0 {
				c.Set(limitedTokenKey, tokenName)
			}
			// Authorized: from now on the body must arrive within BodyTimeout.
			if r.ContentLength != 0 {
				_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
			}
			return next(c)
		}
	}
}

// extractTraceContext puts the W3C trace context of a request that carries
// one (a traceparent header) into the request's context, as the remote
// parent span: a create then stores it with the instance when the client
// traces (client.Config.TracerProvider), and the instance's runs descend
// from the caller's trace. A request without the header is left as it is.
func extractTraceContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Header.Get("traceparent") != "" {
			ctx := propagation.TraceContext{}.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
			c.SetRequest(req.WithContext(ctx))
		}
		return next(c)
	}
}

// retryReads runs a read (GET, HEAD) again, with backoff
// (backoff.Request), while it fails because the database is unavailable
// and has written nothing, up to backoff.RequestAttempts tries in all: a
// short outage, such as a restart's moment or a connection the restart
// broke, then costs the caller a little time instead of an error. A write
// is never repeated (its answer may have been lost after its commit): it
// answers 503 DATABASE_UNAVAILABLE at once, and the caller decides.
func retryReads(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if m := c.Request().Method; m != http.MethodGet && m != http.MethodHead {
			return next(c)
		}
		b := backoff.Request.New()
		for attempt := 1; ; attempt++ {
			err := next(c)
			if err == nil || attempt == backoff.RequestAttempts || c.Response().Committed || !errors.Is(err, db.ErrUnavailable) {
				return err
			}
			if !backoff.Sleep(c.Request().Context(), b.Next()) {
				return err
			}
		}
	}
}

func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				err = fmt.Errorf("panic serving %s %s: %v\n%s", c.Request().Method, c.Request().URL.Path, v, debug.Stack())
			}
		}()
		return next(c)
	}
}

// handleError is echo's HTTPErrorHandler: every error, the handlers' and
// echo's own, is answered here in the one JSON shape.
func (s *Server) handleError(err error, c echo.Context) {
	r := c.Request()
	var he *echo.HTTPError
	if errors.As(err, &he) {
		err = echoError(he, r)
	}
	status, code, msg, known := errorStatus(err)
	if !known {
		s.log.ErrorContext(r.Context(), "httpapi: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if c.Response().Committed {
		return
	}
	w := c.Response()
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="duraflow"`)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	if r.ContentLength != 0 && c.Get(bodyReadKey) == nil {
		closeUnread(w)
	}
	writeJSON(w, status, apiclient.ErrorResponse{Error: newAPIError(err, code, msg)})
}

// bodyReadKey marks (in the echo context) a request whose body was read to
// its end.
const bodyReadKey = "duraflow.bodyRead"

// closeUnread makes a refusal close its connection without reading what is
// left of the request body: a request refused before its body was read (no
// credentials, the wrong ones, an unknown route) or whose body is too slow
// or too large must not hold the connection while the server drains a body
// that may never come. net/http drains an unread body before the answer
// unless the answer closes the connection, and after it until its read
// deadline, which is set to now.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

func writeError(w http.ResponseWriter, status int, code apiclient.Code, msg string) {
	writeJSON(w, status, apiclient.ErrorResponse{Error: &apiclient.APIError{Code: code, Message: msg}})
}

// writeJSON writes v without HTML escaping, so raw params and payloads come
// back as they were sent (compacted).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(&buf).Encode(apiclient.ErrorResponse{Error: &apiclient.APIError{Code: apiclient.CodeInternal, Message: internalMessage}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// reply writes a successful answer.
func reply(c echo.Context, status int, v any) error {
	writeJSON(c.Response(), status, v)
	return nil
}
