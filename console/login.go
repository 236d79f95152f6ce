package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/workflow"
)

// loginView is the data of the login page.
type loginView struct {
	Next  string
	Token string // the login cookie's value, repeated by the form
	Error string
}

// safeNext keeps a post-login destination only when it is a console path.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Path+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Path + "/"
	}
	return next
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
	setCookie(w, r, loginCookie, tok, 600)
	c.renderStatus(w, r, nil, status, "login", "Log in", loginView{Next: safeNext(r.FormValue("next")), Token: tok, Error: msg})
}

// login exchanges a token for a session: the form must repeat the login
// cookie and come from the console's origin; the token must match and
// carry the read scope.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !c.auth.Enabled() {
		http.Redirect(w, r, Path+"/", http.StatusSeeOther)
		return
	}
	if err := checkOrigin(r); err != nil {
		c.renderError(w, r, nil, err)
		return
	}
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, nil, fmt.Errorf("%w: reading the form: %v", workflow.ErrInvalidRequest, err))
		return
	}
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(ck.Value, r.PostForm.Get("csrf")) {
		c.renderError(w, r, nil, fmt.Errorf("%w: the login form's CSRF token is missing or wrong (reload the page and try again)", httpapi.ErrForbidden))
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
		c.showLogin(w, r, status, msg)
		return
	}
	if old := sessionID(r); old != "" {
		c.sessions.remove(old)
	}
	id, _ := c.sessions.create(p)
	setCookie(w, r, sessionCookie, id, 0)
	setCookie(w, r, loginCookie, "", -1)
	http.Redirect(w, r, safeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, rq *request) {
	c.sessions.remove(sessionID(rq.Request))
	setCookie(w, rq.Request, sessionCookie, "", -1)
	target := Path + "/login"
	if !c.auth.Enabled() {
		target = Path + "/"
	}
	http.Redirect(w, rq.Request, target, http.StatusSeeOther)
}
