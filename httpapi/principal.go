package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/duraflow/duraflow/workflow"
)

// Authenticator checks credentials exactly as the API does (the same
// tokens, scopes and namespaces, or the same AuthorizeFunc), for a handler
// served beside the API that keeps sessions of its own, such as the web
// console: the secret is checked once, at login, and the Principal it
// returns answers every later request.
type Authenticator struct {
	tokens    tokenSet
	authorize AuthorizeFunc
}

// NewAuthenticator returns an authenticator over authorize when it is set,
// else over tokens; with neither, authentication is off and only loopback
// requests are served (see Principal). Tokens are checked as Config.Tokens
// are, and an error is returned for a set the API would refuse.
func NewAuthenticator(tokens []Token, authorize AuthorizeFunc) (*Authenticator, error) {
	a := &Authenticator{authorize: authorize}
	if authorize == nil && len(tokens) > 0 {
		set, err := newTokenSet(tokens)
		if err != nil {
			return nil, err
		}
		a.tokens = set
	}
	return a, nil
}

// Enabled reports whether requests need credentials (tokens or an
// AuthorizeFunc are configured).
func (a *Authenticator) Enabled() bool { return a.authorize != nil || a.tokens != nil }

// Loopback returns the principal of a request when authentication is off:
// every action the scope "*" grants, in every namespace, for a request
// addressed to a loopback host, and ErrForbidden for any other. With
// authentication on it returns ErrUnauthorized: the caller must log in.
func (a *Authenticator) Loopback(r *http.Request) (*Principal, error) {
	if a.Enabled() {
		return nil, fmt.Errorf("%w: log in with a token", ErrUnauthorized)
	}
	if !isLoopbackHost(r.Host) {
		return nil, fmt.Errorf("%w: authentication is off, so only loopback hosts are served (Host %q)", ErrForbidden, r.Host)
	}
	return &Principal{Name: "", scopes: slices.Clone(wildcardActions)}, nil
}

// Login checks secret, a token's secret as a client sends it after
// "Bearer", and returns its principal. A secret that matches no token is
// ErrUnauthorized; one whose token lacks ActionRead is ErrForbidden (a
// console session reads before it does anything else). r is the login
// request: an AuthorizeFunc sees it with the secret as its bearer token.
func (a *Authenticator) Login(r *http.Request, secret string) (*Principal, error) {
	switch {
	case a.tokens != nil:
		r2 := withBearer(r, secret)
		tok, err := a.tokens.match(r2, ActionRead)
		if err != nil {
			return nil, err
		}
		return &Principal{Name: tok.Name, Namespaces: slices.Clone(tok.Namespaces), scopes: slices.Clone(tok.Scopes)}, nil
	case a.authorize != nil:
		if err := a.authorize(withBearer(r, secret), ActionRead); err != nil {
			return nil, wrapAuthorizeError(ActionRead, err)
		}
		return &Principal{Name: "token", secret: secret, authorize: a.authorize}, nil
	}
	return nil, fmt.Errorf("%w: authentication is off", ErrForbidden)
}

// Principal is who a console session acts as: a token's name, scopes and
// namespaces, or a secret an AuthorizeFunc accepted. It keeps no secret
// for the built-in tokens.
type Principal struct {
	// Name is the token's name; empty for a loopback request without
	// authentication.
	Name string
	// Namespaces are the namespaces the token is limited to; empty allows
	// every namespace.
	Namespaces []string
	scopes     []Action
	// secret and authorize are set for a principal an AuthorizeFunc
	// accepted: every check asks it again, with the secret as the bearer
	// token of the request checked.
	secret    string
	authorize AuthorizeFunc
}

// Allow reports whether p may do action in the request r: nil, or an error
// wrapping ErrForbidden (or ErrUnauthorized, from an AuthorizeFunc).
func (p *Principal) Allow(r *http.Request, action Action) error {
	if p.authorize != nil {
		return wrapAuthorizeError(action, p.authorize(withBearer(r, p.secret), action))
	}
	if !slices.Contains(p.scopes, action) {
		if p.Name == "" {
			return fmt.Errorf("%w: the %q scope is not granted", ErrForbidden, action)
		}
		return fmt.Errorf("%w: token %q lacks the %q scope", ErrForbidden, p.Name, action)
	}
	return nil
}

// Can is Allow as a boolean, to decide what a page shows.
func (p *Principal) Can(r *http.Request, action Action) bool { return p.Allow(r, action) == nil }

// AllowEveryNamespace is Allow for what acts on or reads every namespace
// at once, as the API's routes of every namespace do (workers, queues,
// schedules, lifecycle events, counts): a token limited to namespaces is
// refused (ErrForbidden), and an AuthorizeFunc is asked with
// RequestNamespace answering AllNamespaces.
func (p *Principal) AllowEveryNamespace(r *http.Request, action Action) error {
	if p.authorize != nil {
		return wrapAuthorizeError(action, p.authorize(withRouteNamespace(withBearer(r, p.secret), AllNamespaces), action))
	}
	if len(p.Namespaces) > 0 {
		return fmt.Errorf("%w: token %q is limited to namespaces and may not see what spans every namespace", ErrForbidden, p.Name)
	}
	return p.Allow(r, action)
}

// CanEveryNamespace is AllowEveryNamespace as a boolean.
func (p *Principal) CanEveryNamespace(r *http.Request, action Action) bool {
	return p.AllowEveryNamespace(r, action) == nil
}

// Namespace returns the namespace r acts in, as the API decides it: the
// one r selects (its "namespace" query parameter or Duraflow-Namespace
// header), else the first of the principal's namespaces, else
// workflow.DefaultNamespace. A principal limited to namespaces may select
// only those (ErrForbidden); a malformed name is workflow.ErrInvalidRequest.
func (p *Principal) Namespace(r *http.Request) (string, error) {
	return namespaceFor(r, p.Namespaces, p.Name)
}

// withBearer returns a shallow copy of r whose only Authorization header is
// "Bearer secret".
func withBearer(r *http.Request, secret string) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+secret)
	return r2
}

// wrapAuthorizeError keeps the refusals of an AuthorizeFunc as they are
// and wraps any other error, as the API's middleware does.
func wrapAuthorizeError(action Action, err error) error {
	if err == nil || isAuthError(err) {
		return err
	}
	return fmt.Errorf("authorizing %s: %w", action, err)
}

// namespaceFor is the rule of resolveNamespace for a plain request.
func namespaceFor(r *http.Request, allowed []string, tokenName string) (string, error) {
	ns, err := RequestNamespace(r)
	if err != nil {
		return "", err
	}
	switch {
	case ns == "" && len(allowed) > 0:
		ns = allowed[0]
	case ns == "":
		ns = workflow.DefaultNamespace
	case len(allowed) > 0 && !slices.Contains(allowed, ns):
		return "", fmt.Errorf("%w: token %q may not use namespace %q", ErrForbidden, tokenName, ns)
	}
	return ns, nil
}

// isAuthError reports whether err is a refusal: ErrUnauthorized or
// ErrForbidden, wrapped or not.
func isAuthError(err error) bool {
	return errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden)
}
