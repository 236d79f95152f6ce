package httpapi

import (
	"errors"
	"fmt"
	"net/http"
)

// Guard protects a handler served beside the API, such as the duraflow
// command's /metrics, exactly as the API's routes of every namespace are
// protected: with authorize (an AuthorizeFunc) when it is set, which sees
// RequestNamespace answer AllNamespaces, else with tokens, each request
// needing action as a scope (a token limited to namespaces is refused);
// with neither, only requests addressed to a loopback host are served
// (403 otherwise). A refusal is answered in
// the API's JSON error shape (401 UNAUTHORIZED, 403 FORBIDDEN). Tokens are
// checked as Config.Tokens are (names, hashes and scopes), and an error is
// returned for a set the API would refuse.
func Guard(tokens []Token, authorize AuthorizeFunc, action Action, next http.Handler) (http.Handler, error) {
	if authorize == nil && len(tokens) > 0 {
		set, err := newTokenSet(tokens)
		if err != nil {
			return nil, err
		}
		authorize = func(r *http.Request, action Action) error {
			tok, err := set.match(r, action)
			if err == nil && len(tok.Namespaces) > 0 {
				err = fmt.Errorf("%w: token %q is limited to namespaces and may not read what spans every namespace", ErrForbidden, tok.Name)
			}
			return err
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		switch {
		case authorize == nil:
			if !isLoopbackHost(r.Host) {
				err = fmt.Errorf("%w: authentication is off, so only loopback hosts are served (Host %q)", ErrForbidden, r.Host)
			}
		default:
			if err = authorize(withRouteNamespace(r, AllNamespaces), action); err != nil && !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrForbidden) {
				err = fmt.Errorf("authorizing %s: %w", action, err)
			}
		}
		if err != nil {
			status, code, msg, _ := errorStatus(err)
			writeError(w, status, code, msg)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}
