package console

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/duraflow/duraflow/httpapi"
)

// loginView is the data of the login page.
type loginView struct {
	Next  string
	Token string // the login cookie's value, repeated by the form
	Error string
}

// safeNext keeps a post-login destination only when it is a console path:
// a path alone (no scheme, host or fragment) that, its dot segments
// resolved as a browser resolves them ("%2e" is a dot), still lies under
// Path. Anything else is the overview.
func safeNext(next string) string {
	const home = Path + "/"
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil {
		return home
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if clean != Path && !strings.HasPrefix(clean, Path+"/") {
		return home
	}
	out := u.EscapedPath()
	if clean != u.Path {
		// Dot segments or doubled slashes: the cleaned path, escaped anew.
		out = (&url.URL{Path: clean}).EscapedPath()
	}
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out
}

// loginPage shows the login form (without authentication: the overview).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if !c.auth.Enabled() {
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
		return
	}
	c.showLogin(w, r, http.StatusOK, "")
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	tok := randomToken()
	c.setCookie(w, r, loginCookie, tok, 600)
	c.renderStatus(w, r, nil, status, "login", "Log in", loginView{Next: safeNext(r.FormValue("next")), Token: tok, Error: msg})
}

// login exchanges a token for a session: the form must repeat the login
// cookie and come from the console's origin; the client address must not
// be throttled (loginThrottle); the token must match and carry the read
// scope. An unknown token spends one try of the address's budget.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.auth.Enabled() {
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
		return
	}
	if err := checkOrigin(r); err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	if err := c.parseForm(r); err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(ck.Value, r.PostForm.Get("csrf")) {
		c.renderError(w, r, nil, fmt.Errorf("%w: the login form's CSRF token is missing or wrong (reload the page and try again)", httpapi.ErrForbidden))
		return
	}
	addr := c.clientAddr(r)
	if wait := c.throttle.wait(addr, c.cfg.Clock.Now()); wait > 0 {
		secs := retryAfter(wait)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		c.showLogin(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many failed logins from your address: try again in %d seconds.", secs))
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if secret == "" {
		c.showLogin(w, r, http.StatusBadRequest, "Enter a token.")
		return
	}
	p, err := c.auth.Login(r, secret)
	if err != nil {
		status := http.StatusUnauthorized
		msg := "Unknown token."
		if isForbidden(err) {
			status, msg = http.StatusForbidden, "This token may not read: it lacks the read scope."
		} else if !isUnauthorized(err) {
			c.renderError(w, r, nil, err)
			return
		}
		if status == http.StatusUnauthorized {
			c.throttle.fail(addr, c.cfg.Clock.Now())
		}
		c.showLogin(w, r, status, msg)
		return
	}
	if old := sessionID(r); old != "" {
		c.sessions.remove(old)
	}
	id, _ := c.sessions.create(p, credentialOf(secret))
	c.setCookie(w, r, sessionCookie, id, 0)
	c.setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, rq *request) {
	c.sessions.remove(sessionID(rq.Request))
	c.setCookie(w, rq.Request, sessionCookie, "", -1)
	target := Path + "/login"
	if !c.auth.Enabled() {
		target = Path + "/"
	}
	http.Redirect(w, rq.Request, target, http.StatusSeeOther)
}
