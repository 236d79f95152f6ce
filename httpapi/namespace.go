package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

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

// AllNamespaces is what RequestNamespace answers, whatever the request
// selects, for a request to a route that acts on or reads every namespace
// at once: the lifecycle events (GET /events, /events/stream), the
// workers, the queues, the schedules, applying flows and the tick (and
// /metrics behind Guard). It is no valid namespace name, so an
// AuthorizeFunc that allows a caller only the namespaces it lists refuses
// such a route to a caller limited to some, as the built-in tokens are
// refused it.
const AllNamespaces = "*"

// routeNamespaceKey holds (in a request's context) the namespace the
// route of the request acts in, when the route decides it rather than the
// request: AllNamespaces, or a trigger's namespace.
type routeNamespaceKey struct{}

// withRouteNamespace returns r with ns as the namespace its route acts in,
// which RequestNamespace answers.
func withRouteNamespace(r *http.Request, ns string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), routeNamespaceKey{}, ns))
}

// RequestNamespace returns the namespace a request acts in, for an
// AuthorizeFunc to limit callers to some namespaces as the built-in
// tokens do: AllNamespaces for a route that acts on every namespace; the
// trigger's namespace (Trigger.Namespace) for a trigger; else the one the
// request selects with its "namespace" query parameter or its
// Duraflow-Namespace header, "" when it selects none (the route then acts
// in workflow.DefaultNamespace). Both given and different, or a name that
// breaks the naming rules, is workflow.ErrInvalidRequest.
//
// An AuthorizeFunc that limits a caller compares the answer with the
// caller's namespaces and refuses anything else, AllNamespaces included:
//
//	ns, err := httpapi.RequestNamespace(r)
//	if err != nil {
//		return err
//	}
//	if ns == "" {
//		ns = workflow.DefaultNamespace
//	}
//	if caller.limited && !slices.Contains(caller.namespaces, ns) {
//		return fmt.Errorf("%w: namespace %q", httpapi.ErrForbidden, ns)
//	}
func RequestNamespace(r *http.Request) (string, error) {
	if ns, ok := r.Context().Value(routeNamespaceKey{}).(string); ok {
		return ns, nil
	}
	return selectedNamespace(r)
}

// selectedNamespace is the namespace a request selects, "" for none (see
// RequestNamespace).
func selectedNamespace(r *http.Request) (string, error) {
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

// routeScope says which namespaces a route acts in, when it is not the one
// the request selects (the instance routes, registered without one).
type routeScope int

// everyNamespace is a route that acts on or reads every namespace at once
// (the fleet: workers, queues, schedules, lifecycle events, flows, the
// tick): a caller limited to namespaces may not call it (403 FORBIDDEN),
// and an AuthorizeFunc sees AllNamespaces.
const everyNamespace routeScope = 1

// routeFunc registers a route in New: its method, path, handler, the
// action a caller needs, and everyNamespace for a route of every
// namespace.
type routeFunc func(method, path string, h echo.HandlerFunc, action Action, scope ...routeScope)

// resolveRouteNamespace is resolveNamespace for a route whose namespace
// the route decides (ns: AllNamespaces, or a trigger's): a token limited
// to namespaces may act only in one of them, never in AllNamespaces (403
// FORBIDDEN); then a request that selects another namespace than a
// trigger's is 400 INVALID_REQUEST. A selector on a route of every
// namespace is ignored, as a GET /workers of an API client scoped to one
// sends it; such a route records no namespace (it uses none).
func resolveRouteNamespace(c echo.Context, ns string, allowed []string, tokenName string) error {
	selected, err := selectedNamespace(c.Request())
	if err != nil {
		return err
	}
	switch {
	case ns == AllNamespaces && len(allowed) > 0:
		return fmt.Errorf("%w: token %q is limited to namespaces and may not call a route that acts on every namespace (workers, queues, schedules, lifecycle events)", ErrForbidden, tokenName)
	case ns != AllNamespaces && len(allowed) > 0 && !slices.Contains(allowed, ns):
		return fmt.Errorf("%w: token %q may not use namespace %q", ErrForbidden, tokenName, ns)
	case ns != AllNamespaces && selected != "" && selected != ns:
		return fmt.Errorf("%w: this route acts in namespace %q; the request selects %q", workflow.ErrInvalidRequest, ns, selected)
	}
	if ns != AllNamespaces {
		c.Set(namespaceKey, ns)
	}
	return nil
}

// everyNamespaceAllowed reports whether the caller of the request may act
// in every namespace, as the routes of every namespace need: always
// without authentication (the request came to a loopback host); with
// tokens when the token is limited to none; else when the AuthorizeFunc
// allows action with RequestNamespace answering AllNamespaces.
func (s *Server) everyNamespaceAllowed(c echo.Context, action Action) bool {
	switch {
	case s.authorize == nil:
		return true
	case s.tokens != nil:
		_, limited := c.Get(limitedTokenKey).(string)
		return !limited
	default:
		return s.authorize(withRouteNamespace(c.Request(), AllNamespaces), action) == nil
	}
}

// creating returns the management client of a create route: scoped to
// the request's namespace, and, for a caller who may not act in every
// namespace, checking that its creates name only the queues and
// priorities its namespace allows (Config.NamespaceQueues,
// NamespaceMaxPriority).
func (s *Server) creating(c echo.Context) *client.Client {
	return s.scoped(c).WithPlacementCheck(func(_ context.Context, p client.Placement) error {
		queueAllowed := p.Queue == p.DefaultQueue || slices.Contains(s.cfg.NamespaceQueues[p.Namespace], p.Queue)
		priorityAllowed := p.Priority <= s.cfg.NamespaceMaxPriority
		if queueAllowed && priorityAllowed {
			return nil
		}
		// Asked only now: an AuthorizeFunc is called again only for a
		// create that names what a limited caller may not.
		if s.everyNamespaceAllowed(c, ActionCreate) {
			return nil
		}
		if !queueAllowed {
			allowed := append([]string{p.DefaultQueue}, s.cfg.NamespaceQueues[p.Namespace]...)
			return fmt.Errorf("%w: a caller limited to namespaces may put instances of %s in namespace %q on %s, not on queue %q",
				ErrForbidden, p.WorkflowName, p.Namespace, strings.Join(allowed, ", "), p.Queue)
		}
		return fmt.Errorf("%w: a caller limited to namespaces may ask for a priority of at most %d, not %d",
			ErrForbidden, s.cfg.NamespaceMaxPriority, p.Priority)
	})
}

// scoped returns the management client scoped to the request's namespace.
func (s *Server) scoped(c echo.Context) *client.Client {
	ns, _ := c.Get(namespaceKey).(string)
	if ns == "" {
		ns = workflow.DefaultNamespace
	}
	return s.client.Namespace(ns)
}
