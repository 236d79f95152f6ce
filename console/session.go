package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/duraflow/duraflow/httpapi"
)

// Cookie names. The session cookie holds a random 256-bit id; the login
// cookie a random value the login form must repeat (a double-submit CSRF
// token for the one form sent before a session exists).
const (
	sessionCookie = "duraflow_console"
	loginCookie   = "duraflow_console_login"
)

// session is one logged-in browser (or, without authentication, one
// loopback browser): who it acts as and its CSRF token. It lives in
// memory only.
type session struct {
	principal *httpapi.Principal
	csrf      string
	expires   time.Time
}

// sessions maps session ids to sessions, bounded and expiring.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	ttl time.Duration
	max int
}

func newSessions(ttl time.Duration, maxSessions int) *sessions {
	return &sessions{m: map[string]*session{}, ttl: ttl, max: maxSessions}
}

// randomToken returns 256 random bits, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create stores a new session for p and returns its id.
func (s *sessions) create(p *httpapi.Principal) (string, *session) {
	now := time.Now()
	id := randomToken()
	sess := &session{principal: p, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		s.evictLocked(now)
	}
	s.m[id] = sess
	return id, sess
}

// evictLocked drops the expired sessions, and when none had expired the
// one closest to its expiry.
func (s *sessions) evictLocked(now time.Time) {
	var (
		oldestID string
		oldest   time.Time
	)
	for id, sess := range s.m {
		if !sess.expires.After(now) {
			delete(s.m, id)
			continue
		}
		if oldestID == "" || sess.expires.Before(oldest) {
			oldestID, oldest = id, sess.expires
		}
	}
	if len(s.m) >= s.max && oldestID != "" {
		delete(s.m, oldestID)
	}
}

// get returns the live session of id, or nil.
func (s *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.m[id]
	if sess == nil {
		return nil
	}
	if !sess.expires.After(time.Now()) {
		delete(s.m, id)
		return nil
	}
	return sess
}

// remove ends the session of id.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// setCookie writes a console cookie: HttpOnly, SameSite=Strict, on Path,
// Secure over TLS; maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: Path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// sessionID returns the session cookie's value, or "".
func sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	return c.Value
}

// sameToken compares two CSRF tokens in constant time; an empty one never
// matches.
func sameToken(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
