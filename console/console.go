package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/workflow"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// contentSecurityPolicy allows nothing but the console's own origin: no
// inline script or style, no frames, forms posting only to itself.
const contentSecurityPolicy = "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Console serves the web console. Its Handler is safe for concurrent use.
type Console struct {
	cfg      *Config
	auth     *httpapi.Authenticator
	sessions *sessions
	throttle *loginThrottle
	pages    map[string]*template.Template
	log      *slog.Logger
	handler  http.Handler
}

// New returns a console for cfg; see Config for the defaults.
func New(cfg *Config) (*Console, error) {
	if cfg == nil {
		return nil, errors.New("console: Config is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	auth, err := httpapi.NewAuthenticator(cfg.Tokens, cfg.Authorize)
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: cfg, auth: auth, log: cfg.Logger,
		sessions: newSessions(cfg.SessionTTL, cfg.MaxSessions, cfg.MaxSessionsPerCredential, cfg.Clock),
		throttle: newLoginThrottle(cfg.LoginFailures, cfg.LoginFailureInterval),
	}
	if c.pages, err = parseTemplates(); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET "+Path+"/static/", http.StripPrefix(Path+"/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Path+"/login", c.loginPage)
	mux.HandleFunc("POST "+Path+"/login", c.login)
	mux.HandleFunc("POST "+Path+"/logout", c.authed(c.logout))
	mux.HandleFunc("GET "+Path+"/{$}", c.authed(c.overview))
	mux.HandleFunc("GET "+Path+"/workflows", c.authed(c.workflows))
	mux.HandleFunc("GET "+Path+"/workflows/{name}", c.authed(c.workflowPage))
	mux.HandleFunc("GET "+Path+"/instances", c.authed(c.instances))
	mux.HandleFunc("GET "+Path+"/instances/{workflow}/{id}", c.authed(c.instancePage))
	mux.HandleFunc("GET "+Path+"/instances/{workflow}/{id}/lifecycle", c.authed(c.instanceLifecycle))
	mux.HandleFunc("GET "+Path+"/instances/{workflow}/{id}/confirm", c.authed(c.confirmPage))
	mux.HandleFunc("POST "+Path+"/instances/{workflow}/{id}/action", c.authed(c.action))
	mux.HandleFunc("GET "+Path+"/schedules", c.authed(c.schedules))
	mux.HandleFunc("GET "+Path+"/workers", c.authed(c.workers))
	mux.HandleFunc(Path+"/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, fmt.Errorf("%w: no console page at %s", apiclient.ErrRouteNotFound, r.URL.Path))
	})

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, fmt.Errorf("%w: cross-origin request refused", httpapi.ErrForbidden))
	}))
	c.handler = c.secure(cop.Handler(mux))
	return c, nil
}

// Handler returns the console's handler. Mount it at Path without
// stripping the prefix: in a ServeMux, mux.Handle(console.Path+"/", h).
// A request for Path itself is redirected to Path + "/".
func (c *Console) Handler() http.Handler { return c.handler }

// secure sets the security headers of every answer, recovers panics into
// a 500 page, and redirects Path to Path + "/".
func (c *Console) secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				c.renderError(w, r, nil, fmt.Errorf("panic serving %s %s: %v\n%s", r.Method, r.URL.Path, v, debug.Stack()))
			}
		}()
		if r.URL.Path == Path {
			http.Redirect(w, r, Path+"/", http.StatusFound)
			return
		}
		if r.Method == http.MethodPost {
			if r.ContentLength > c.cfg.MaxBodyBytes {
				c.renderError(w, r, nil, fmt.Errorf("%w: the form is %d bytes, the limit is %d", workflow.ErrPayloadTooLarge, r.ContentLength, c.cfg.MaxBodyBytes))
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, c.cfg.MaxBodyBytes)
		}
		next.ServeHTTP(w, r)
	})
}

// request is what an authorized page handler gets: the session and the
// namespace the request acts in.
type request struct {
	*http.Request
	sess      *session
	namespace string
}

// can reports whether the session may do action.
func (rq *request) can(a httpapi.Action) bool { return rq.sess.principal.Can(rq.Request, a) }

type handlerFunc func(w http.ResponseWriter, rq *request)

// authed resolves the request's session before h: the session cookie's,
// or without authentication (loopback only) a new anonymous one. A request
// without a session is sent to the login page (GET) or refused (POST);
// every request needs the read scope, and every POST the session's CSRF
// token and a same-origin Origin or Referer.
func (c *Console) authed(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if !c.auth.Enabled() {
			p, err := c.auth.Loopback(r)
			if err != nil {
				c.renderError(w, r, nil, err)
				return
			}
			if sess = c.sessions.get(sessionID(r)); sess == nil {
				var id string
				id, sess = c.sessions.create(p, credentialOf(""))
				c.setCookie(w, r, sessionCookie, id, 0)
			}
		} else if sess = c.sessions.get(sessionID(r)); sess == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Path+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.renderError(w, r, nil, fmt.Errorf("%w: log in first", httpapi.ErrUnauthorized))
			return
		}
		if r.Method == http.MethodPost {
			if err := checkOrigin(r); err != nil {
				c.renderError(w, r, sess, err)
				return
			}
			if err := c.parseForm(r); err != nil {
				c.renderError(w, r, sess, err)
				return
			}
			if !sameToken(r.PostForm.Get("csrf"), sess.csrf) {
				c.renderError(w, r, sess, fmt.Errorf("%w: the form's CSRF token is missing or wrong (reload the page and try again)", httpapi.ErrForbidden))
				return
			}
		}
		if err := sess.principal.Allow(r, httpapi.ActionRead); err != nil {
			c.renderError(w, r, sess, err)
			return
		}
		ns, err := sess.principal.Namespace(r)
		if err != nil {
			c.renderError(w, r, sess, err)
			return
		}
		rq := &request{Request: r, sess: sess, namespace: ns}
		if r.Method != http.MethodGet {
			h(w, rq)
			return
		}
		retryReads(w, rq, h)
	}
}

// retryMark is in the context of a try of a page that may be tried again:
// renderError notes an unavailable database in it instead of answering.
type retryMark struct{ unavailable bool }

type retryMarkKey struct{}

// retryReads renders a page (a GET, which changes nothing) again, with
// backoff (backoff.Request), while it fails because the database is
// unavailable, up to backoff.RequestAttempts tries in all; the last try
// answers what it meets, the database unavailable page included.
func retryReads(w http.ResponseWriter, rq *request, h handlerFunc) {
	b := backoff.Request.New()
	for range backoff.RequestAttempts - 1 {
		mark := &retryMark{}
		h(w, &request{Request: rq.WithContext(context.WithValue(rq.Context(), retryMarkKey{}, mark)), sess: rq.sess, namespace: rq.namespace})
		if !mark.unavailable {
			return
		}
		if !backoff.Sleep(rq.Context(), b.Next()) {
			return
		}
	}
	h(w, rq)
}

// parseForm reads a POSTed form, at most Config.MaxBodyBytes: a larger one
// is workflow.ErrPayloadTooLarge (413), as a body past the API's bound.
func (c *Console) parseForm(r *http.Request) error {
	err := r.ParseForm()
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return fmt.Errorf("%w: the form is larger than %d bytes", workflow.ErrPayloadTooLarge, c.cfg.MaxBodyBytes)
	}
	if err != nil {
		return fmt.Errorf("%w: reading the form: %v", workflow.ErrInvalidRequest, err)
	}
	return nil
}

// checkOrigin refuses a POST whose Origin, or without one whose Referer,
// is not the console's own origin, and one with neither.
func checkOrigin(r *http.Request) error {
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	if from == "" {
		return fmt.Errorf("%w: a console form must come with an Origin or Referer header", httpapi.ErrForbidden)
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("%w: cross-origin form refused", httpapi.ErrForbidden)
	}
	return nil
}

// page is what every template gets.
type page struct {
	Title     string
	Nav       string
	User      string
	CanLogout bool
	CSRF      string
	Namespace string
	Data      any
}

// render writes the named page with status 200.
func (c *Console) render(w http.ResponseWriter, rq *request, name, title string, data any) {
	c.renderStatus(w, rq.Request, rq.sess, http.StatusOK, name, title, data)
}

func (c *Console) renderStatus(w http.ResponseWriter, r *http.Request, sess *session, status int, name, title string, data any) {
	p := page{Title: title, Nav: name, Data: data}
	if sess != nil {
		p.User, p.CSRF, p.CanLogout = sess.principal.Name, sess.csrf, c.auth.Enabled()
		p.Namespace, _ = sess.principal.Namespace(r)
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.ErrorContext(r.Context(), "console: rendering a page failed", "page", name, "error", err)
		status, buf = http.StatusInternalServerError, *bytes.NewBufferString("<!doctype html><title>Error</title><p>internal error</p>")
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorView is the data of the error page.
type errorView struct {
	Status  int
	Code    apiclient.Code
	Message string
	Login   bool
	// Unavailable is set for DATABASE_UNAVAILABLE: the page says that the
	// database does not answer and that reloading later will do.
	Unavailable bool
}

// renderError answers err as an error page, with the status, code and
// message the API would answer it with; an error the API does not know is
// logged and shown as an internal error, without its text. An unavailable
// database answers 503 with Retry-After and a page that says so, unless
// the page is to be tried again (retryReads).
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, sess *session, err error) {
	status, code, known := apiclient.ErrorCode(err)
	if !known {
		if errors.Is(err, context.Canceled) {
			return
		}
		status, code = http.StatusInternalServerError, apiclient.CodeInternal
		c.log.ErrorContext(r.Context(), "console: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	msg := "internal error (see the server's log)"
	if known {
		msg = apiclient.ErrorMessage(err)
	}
	title := http.StatusText(status)
	if code == apiclient.CodeDatabaseUnavailable {
		if mark, _ := r.Context().Value(retryMarkKey{}).(*retryMark); mark != nil {
			mark.unavailable = true
			return
		}
		title = "Database unavailable"
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	c.renderStatus(w, r, sess, status, "error", title, errorView{
		Status: status, Code: code, Message: msg, Login: status == http.StatusUnauthorized,
		Unavailable: code == apiclient.CodeDatabaseUnavailable,
	})
}

func isForbidden(err error) bool    { return errors.Is(err, httpapi.ErrForbidden) }
func isUnauthorized(err error) bool { return errors.Is(err, httpapi.ErrUnauthorized) }
