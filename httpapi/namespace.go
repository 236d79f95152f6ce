package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/workflow"
)

// NamespaceHeader is the request header that selects the namespace of an
// instance route, as the query parameter "namespace" does.
const NamespaceHeader = apiclient.NamespaceHeader

// namespaceKey holds (in the echo context) the namespace a request acts in.
const namespaceKey = "duraflow.namespace"

// RequestNamespace returns the namespace a request selects: its
// "namespace" query parameter or its Duraflow-Namespace header, "" when it
// names none. Both given and different, or a name that breaks the naming
// rules, is workflow.ErrInvalidRequest. An AuthorizeFunc may call it to
// limit callers to some namespaces, as the built-in tokens do.
func RequestNamespace(r *http.Request) (string, error) {
	fromQuery := r.URL.Query()["namespace"]
	if len(fromQuery) > 1 {
		return "", fmt.Errorf("%w: query parameter %q is given %d times", workflow.ErrInvalidRequest, "namespace", len(fromQuery))
	}
	fromHeader := r.Header.Values(NamespaceHeader)
	if len(fromHeader) > 1 {
		return "", fmt.Errorf("%w: more than one %s header", workflow.ErrInvalidRequest, NamespaceHeader)
	}
	var ns string
	switch {
	case len(fromQuery) == 1 && len(fromHeader) == 1 && fromQuery[0] != fromHeader[0]:
		return "", fmt.Errorf("%w: the namespace query parameter %q and the %s header %q differ", workflow.ErrInvalidRequest, fromQuery[0], NamespaceHeader, fromHeader[0])
	case len(fromQuery) == 1:
		ns = fromQuery[0]
	case len(fromHeader) == 1:
		ns = fromHeader[0]
	default:
		return "", nil
	}
	if err := workflow.ValidateNamespace(ns); err != nil {
		return "", err
	}
	return ns, nil
}

// resolveNamespace decides the namespace a request acts in and records it in
// the echo context: the one it selects, or without a selector the first of
// the token's namespaces (for a token limited to some) or
// workflow.DefaultNamespace. A token limited to namespaces may select only
// those (403 FORBIDDEN otherwise).
func resolveNamespace(c echo.Context, allowed []string, tokenName string) error {
	ns, err := namespaceFor(c.Request(), allowed, tokenName)
	if err != nil {
		return err
	}
	c.Set(namespaceKey, ns)
	return nil
}

// limitedTokenKey holds (in the echo context) the name of the token that
// authorized the request when it is limited to namespaces.
const limitedTokenKey = "duraflow.limitedToken"

// tokenScopesKey holds (in the echo context) the scopes of the built-in
// token that authorized the request.
const tokenScopesKey = "duraflow.tokenScopes"

// fleetWide wraps the handler of a route that acts outside any namespace on
// the whole fleet (a queue's limits, a worker's drain): a token limited to
// namespaces may not call it (403 FORBIDDEN), whatever its scopes, as it
// may not hold the flows, schedules and tick scopes.
func fleetWide(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if name, ok := c.Get(limitedTokenKey).(string); ok {
			return fmt.Errorf("%w: token %q is limited to namespaces and may not change what acts outside them (queues, workers)", ErrForbidden, name)
		}
		return h(c)
	}
}

// scoped returns the management client scoped to the request's namespace.
func (s *Server) scoped(c echo.Context) *client.Client {
	ns, _ := c.Get(namespaceKey).(string)
	if ns == "" {
		ns = workflow.DefaultNamespace
	}
	return s.client.Namespace(ns)
}
