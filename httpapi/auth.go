package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/duraflow/duraflow/workflow"
)

// Action is what a route does, for authorization: every route asks for
// exactly one action, and a token must carry it as a scope.
type Action string

// Actions, one per kind of route.
const (
	// ActionRead lists workflows and instances, and reads an instance and
	// its history.
	ActionRead Action = "read"
	// ActionCreate creates instances, one or a batch.
	ActionCreate Action = "create"
	// ActionManage pauses, resumes, compensates, terminates and restarts
	// instances.
	ActionManage Action = "manage"
	// ActionEvents sends events to instances.
	ActionEvents Action = "events"
	// ActionFlows applies flow definitions (POST /flows). It is a scope of
	// its own, apart from manage, because a flow is code-like: its http
	// steps make requests from the server's network position. Reading flows
	// needs ActionRead.
	ActionFlows Action = "flows"
	// ActionSchedules creates, changes, enables, disables and deletes
	// schedules. It is a scope of its own, apart from manage and create,
	// because a schedule starts its workflow with its params again and
	// again, without further requests: it is more than either. Reading
	// schedules needs ActionRead.
	ActionSchedules Action = "schedules"
	// ActionTick drives the runner through POST /_runner/tick. The scope "*"
	// does not include it: a token that may tick names it.
	ActionTick Action = "tick"
	// ActionMetrics reads the Prometheus metrics the duraflow command
	// serves at /metrics (see Guard). It is a scope of its own so that a
	// scraper's token reads no instance; "*" includes it. It acts outside
	// any namespace.
	ActionMetrics Action = "metrics"
)

// Scopes returns every scope a token may carry, in the order the
// documentation lists them: each Action, then "*", which grants all of them
// but tick. Help texts and error messages are built from it, so they list
// what ParseToken accepts.
func Scopes() []string {
	out := make([]string, 0, len(allActions)+1)
	for _, a := range allActions {
		out = append(out, string(a))
	}
	return append(out, "*")
}

// scopeList is Scopes as prose: "read, create, ..., metrics or *".
func scopeList() string {
	s := Scopes()
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// allActions are the actions a token may name; wildcardActions are those
// "*" grants; unscopedActions act outside any namespace, so a token limited
// to namespaces may not carry them.
var (
	unscopedActions = []Action{ActionFlows, ActionSchedules, ActionTick, ActionMetrics}
	allActions      = []Action{ActionRead, ActionCreate, ActionManage, ActionEvents, ActionFlows, ActionSchedules, ActionTick, ActionMetrics}
	wildcardActions = []Action{ActionRead, ActionCreate, ActionManage, ActionEvents, ActionFlows, ActionSchedules, ActionMetrics}
)

// AuthorizeFunc decides whether a request may do action. It is called by
// every route except /healthz and /readyz, before the request body is read.
// The events route asks it a second time, for ActionRead, once the event is
// stored: a refusal there only leaves the instance's error and output out
// of the answer.
// It returns nil to allow the request; ErrUnauthorized (401) or ErrForbidden
// (403), wrapped or not, to refuse it with that status and the error's text
// as the message; any other error answers 500 INTERNAL and is logged.
type AuthorizeFunc func(r *http.Request, action Action) error

// Token is a bearer token the server accepts. Only the SHA-256 hash of its
// secret is kept, so a configuration may hold hashes and never secrets.
type Token struct {
	// Name identifies the token in logs and errors; it is not secret.
	Name string
	// Hash is the SHA-256 of the secret the client sends as
	// "Authorization: Bearer <secret>".
	Hash [32]byte
	// Scopes are the actions the token allows.
	Scopes []Action
	// Namespaces, when set, limits the token to instances of these
	// namespaces: a request may select only them (403 otherwise), one that
	// selects none acts in the first, and an instance of any other is not
	// found (404), as one that does not exist. Empty allows every
	// namespace. A token limited to namespaces may not carry the flows,
	// schedules or tick scopes, which act outside any namespace.
	Namespaces []string
}

// NewToken returns a token for secret with the given scopes. The secret
// itself is not kept.
func NewToken(name, secret string, scopes ...Action) Token {
	return Token{Name: name, Hash: sha256.Sum256([]byte(secret)), Scopes: slices.Clone(scopes)}
}

var tokenNameRE = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]*$`)

// ParseToken parses a token spec "name:secret:scopes", such as
// "ci:s3cret:read,create,events", or "name:sha256=<64 hex digits>:scopes",
// which names the secret by its SHA-256 so the spec holds no secret. The
// scopes may end in "@" and a comma-separated list of namespaces, which
// limits the token to them (Token.Namespaces): "acme:s3cret:read,create@acme". Scopes
// are a comma-separated list of actions (read, create, manage, events,
// flows, schedules, tick, metrics); "*" stands for every action except tick, which is always named:
// "cron:…:tick", "admin:…:*,tick". The secret may contain colons; the name
// is letters, digits, '_', '.' and '-'.
func ParseToken(spec string) (Token, error) {
	first := strings.IndexByte(spec, ':')
	last := strings.LastIndexByte(spec, ':')
	if first < 0 || first == last {
		return Token{}, errors.New(`httpapi: a token spec is "name:secret:scopes" or "name:sha256=<hex>:scopes"`)
	}
	name, secret, scopeList := spec[:first], spec[first+1:last], spec[last+1:]
	if !tokenNameRE.MatchString(name) || len(name) > 64 {
		return Token{}, fmt.Errorf("httpapi: token name %q must be 1 to 64 letters, digits, '_', '.' or '-'", name)
	}
	if secret == "" {
		return Token{}, fmt.Errorf("httpapi: token %q has an empty secret", name)
	}
	tok := Token{Name: name}
	if hexHash, ok := strings.CutPrefix(secret, "sha256="); ok {
		b, err := hex.DecodeString(hexHash)
		if err != nil || len(b) != len(tok.Hash) {
			return Token{}, fmt.Errorf("httpapi: token %q: sha256= needs 64 hex digits", name)
		}
		copy(tok.Hash[:], b)
	} else {
		tok.Hash = sha256.Sum256([]byte(secret))
	}
	scopeList, nsList, limited := strings.Cut(scopeList, "@")
	scopes, err := parseScopes(scopeList)
	if err != nil {
		return Token{}, fmt.Errorf("httpapi: token %q: %w", name, err)
	}
	tok.Scopes = scopes
	if limited {
		if strings.Contains(scopeList, "*") {
			// "*" of a namespaced token grants what acts in namespaces.
			tok.Scopes = slices.DeleteFunc(tok.Scopes, func(a Action) bool { return slices.Contains(unscopedActions, a) })
		}
		for _, a := range tok.Scopes {
			if slices.Contains(unscopedActions, a) {
				return Token{}, fmt.Errorf("httpapi: token %q is limited to namespaces and cannot have the %q scope, which acts outside them", name, a)
			}
		}
		for ns := range strings.SplitSeq(nsList, ",") {
			ns = strings.TrimSpace(ns)
			if err := workflow.ValidateNamespace(ns); err != nil {
				return Token{}, fmt.Errorf("httpapi: token %q: %w", name, err)
			}
			if !slices.Contains(tok.Namespaces, ns) {
				tok.Namespaces = append(tok.Namespaces, ns)
			}
		}
	}
	return tok, nil
}

func parseScopes(list string) ([]Action, error) {
	var out []Action
	add := func(a Action) {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "*":
			for _, a := range wildcardActions {
				add(a)
			}
		case slices.Contains(allActions, Action(s)):
			add(Action(s))
		case s == "":
			return nil, errors.New("empty scope")
		default:
			return nil, fmt.Errorf("unknown scope %q (want %s)", s, scopeList())
		}
	}
	return out, nil
}

// tokenSet checks bearer tokens against the configured hashes.
type tokenSet []Token

func newTokenSet(tokens []Token) (tokenSet, error) {
	set := make(tokenSet, 0, len(tokens))
	for i, t := range tokens {
		if t.Name == "" {
			return nil, fmt.Errorf("httpapi: token %d has no name", i)
		}
		if t.Hash == ([32]byte{}) {
			return nil, fmt.Errorf("httpapi: token %q has no hash", t.Name)
		}
		if len(t.Scopes) == 0 {
			return nil, fmt.Errorf("httpapi: token %q has no scopes", t.Name)
		}
		for _, s := range t.Scopes {
			if !slices.Contains(allActions, s) {
				return nil, fmt.Errorf("httpapi: token %q has unknown scope %q", t.Name, s)
			}
			if len(t.Namespaces) > 0 && slices.Contains(unscopedActions, s) {
				return nil, fmt.Errorf("httpapi: token %q is limited to namespaces and cannot have the %q scope, which acts outside them", t.Name, s)
			}
		}
		for _, ns := range t.Namespaces {
			if err := workflow.ValidateNamespace(ns); err != nil {
				return nil, fmt.Errorf("httpapi: token %q: %w", t.Name, err)
			}
		}
		for _, o := range set {
			if o.Name == t.Name {
				return nil, fmt.Errorf("httpapi: two tokens are named %q", t.Name)
			}
			if o.Hash == t.Hash {
				return nil, fmt.Errorf("httpapi: tokens %q and %q have the same secret", o.Name, t.Name)
			}
		}
		t.Scopes = slices.Clone(t.Scopes)
		t.Namespaces = slices.Clone(t.Namespaces)
		set = append(set, t)
	}
	return set, nil
}

// authorize is the built-in AuthorizeFunc over the token set. It hashes the
// presented secret and compares it with every configured hash, so the time
// it takes does not depend on which token, if any, matched.
func (set tokenSet) authorize(r *http.Request, action Action) error {
	_, err := set.match(r, action)
	return err
}

// match is authorize that returns the token that allowed the request.
func (set tokenSet) match(r *http.Request, action Action) (Token, error) {
	secret, err := bearer(r)
	if err != nil {
		return Token{}, err
	}
	sum := sha256.Sum256([]byte(secret))
	match := -1
	for i := range set {
		eq := subtle.ConstantTimeCompare(sum[:], set[i].Hash[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return Token{}, fmt.Errorf("%w: unknown bearer token", ErrUnauthorized)
	}
	t := set[match]
	if !slices.Contains(t.Scopes, action) {
		return Token{}, fmt.Errorf("%w: token %q lacks the %q scope", ErrForbidden, t.Name, action)
	}
	return t, nil
}

// bearer returns the secret of an "Authorization: Bearer <secret>" header.
func bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	if len(values) == 0 {
		return "", fmt.Errorf("%w: missing bearer token (send \"Authorization: Bearer <token>\")", ErrUnauthorized)
	}
	if len(values) > 1 {
		return "", fmt.Errorf("%w: more than one Authorization header", ErrUnauthorized)
	}
	scheme, secret, ok := strings.Cut(values[0], " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || strings.ContainsAny(secret, " \t") {
		return "", fmt.Errorf("%w: malformed Authorization header (want \"Bearer <token>\")", ErrUnauthorized)
	}
	return secret, nil
}
