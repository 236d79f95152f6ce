package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

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
	// credential names what the session was made with (credentialOf), so
	// that one credential's sessions are bounded apart from the others'.
	credential string
	csrf       string
	expires    time.Time
}

// credentialOf is the key of the credential a login presented: a hash of
// its secret, distinct for every token (the API refuses two tokens with
// one secret) and for every secret an AuthorizeFunc accepts. Without
// authentication it is "" for every loopback browser.
func credentialOf(secret string) string {
	if secret == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(secret))
	return string(sum[:])
}

// sessions maps session ids to sessions, bounded in all and per
// credential, and expiring.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
	// byCredential holds the ids of each credential's sessions, oldest
	// first (every session lasts ttl, so also the first to expire).
	byCredential map[string][]string
	ttl          time.Duration
	max, perCred int
	clock        clock.Clock
}

func newSessions(ttl time.Duration, maxSessions, perCredential int, clk clock.Clock) *sessions {
	return &sessions{
		m: map[string]*session{}, byCredential: map[string][]string{},
		ttl: ttl, max: maxSessions, perCred: perCredential, clock: clk,
	}
}

// randomToken returns 256 random bits, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create stores a new session for p, made with credential, and returns
// its id. Past the credential's bound it ends that credential's oldest
// session; past the bound of all, the expired ones, then the oldest of the
// credential that holds the most.
func (s *sessions) create(p *httpapi.Principal, credential string) (string, *session) {
	now := s.clock.Now()
	id := randomToken()
	sess := &session{principal: p, credential: credential, csrf: randomToken(), expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ids := s.byCredential[credential]; len(ids) >= s.perCred {
		s.removeLocked(ids[0])
	}
	if len(s.m) >= s.max {
		s.evictLocked(now)
	}
	s.m[id] = sess
	s.byCredential[credential] = append(s.byCredential[credential], id)
	return id, sess
}

// evictLocked drops the expired sessions, and when none had expired the
// oldest session of the credential with the most sessions.
func (s *sessions) evictLocked(now time.Time) {
	for id, sess := range s.m {
		if !sess.expires.After(now) {
			s.removeLocked(id)
		}
	}
	if len(s.m) < s.max {
		return
	}
	var most []string
	for _, ids := range s.byCredential {
		if len(ids) > len(most) {
			most = ids
		}
	}
	if len(most) > 0 {
		s.removeLocked(most[0])
	}
}

// removeLocked ends the session of id, if it exists.
func (s *sessions) removeLocked(id string) {
	sess := s.m[id]
	if sess == nil {
		return
	}
	delete(s.m, id)
	ids := slices.DeleteFunc(s.byCredential[sess.credential], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(s.byCredential, sess.credential)
	} else {
		s.byCredential[sess.credential] = ids
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
	if !sess.expires.After(s.clock.Now()) {
		s.removeLocked(id)
		return nil
	}
	return sess
}

// remove ends the session of id.
func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeLocked(id)
}

// setCookie writes a console cookie: HttpOnly, SameSite=Strict, on Path,
// Secure when the request came over TLS (see Console.overTLS); maxAge < 0
// deletes it.
func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: Path, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.overTLS(r),
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
