package httpapi

import (
	"cmp"
	_ "embed" // the OpenAPI document
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// openAPIDocument is the OpenAPI 3.1 document of the API with the default
// prefix (/api) and no triggers. It is generated (make generate runs
// TestOpenAPIDocument with -update) from the route table in
// openapi_spec_test.go, and the tests check both that it is in sync and that
// the server answers what it says.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPIPrefix is the prefix the paths of OpenAPIDocument start with:
// Config.Prefix's default.
const openAPIPrefix = "/api"

// OpenAPIDocument returns the OpenAPI 3.1 document of the API as the
// repository holds it (httpapi/openapi.json): every route under
// the default prefix (/api), with no triggers. A Server serves its own version at GET
// <prefix>/openapi.json, with its prefix and triggers (Server.OpenAPI).
func OpenAPIDocument() []byte { return slices.Clone(openAPIDocument) }

// Route is a route the server registered.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Path is the route in echo's syntax, with the prefix:
	// "/api/workflows/:name/instances".
	Path string
	// Action is what a token needs to call it; empty for /healthz and
	// /readyz, which need nothing.
	Action Action
	// EveryNamespace marks a route that acts on or reads every namespace
	// at once (workers, queues, schedules, lifecycle events, applying
	// flows, the tick): a caller limited to namespaces may not call it,
	// and an AuthorizeFunc sees RequestNamespace answer AllNamespaces.
	EveryNamespace bool
}

// Routes returns the routes of the server, as its router holds them,
// sorted by path and method: the API, /healthz, /readyz and the triggers.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// routesOf lists the routes of e with the action each was registered with
// (none for a route registered without one: /healthz and /readyz), and
// whether it acts on every namespace.
func routesOf(e *echo.Echo, actions map[string]Action, every map[string]bool) []Route {
	var out []Route
	for _, r := range e.Routes() {
		key := r.Method + " " + r.Path
		out = append(out, Route{Method: r.Method, Path: r.Path, Action: actions[key], EveryNamespace: every[key]})
	}
	slices.SortFunc(out, func(a, b Route) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Method, b.Method))
	})
	return out
}

// OpenAPI returns the OpenAPI document the server serves at GET
// <prefix>/openapi.json: OpenAPIDocument with the paths under the server's
// prefix, without the routes the server does not serve (schedules without
// Config.Schedules, flows without Config.Flows, the tick without
// Config.Tick), and with one operation per trigger.
func (s *Server) OpenAPI() []byte { return slices.Clone(s.openAPI) }

// serveOpenAPI answers GET <prefix>/openapi.json.
func (s *Server) serveOpenAPI(c echo.Context) error {
	if _, err := query(c, nil); err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.openAPI)
	return nil
}

// buildOpenAPI derives the served document from OpenAPIDocument for the
// routes the server registered.
func (s *Server) buildOpenAPI() ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		return nil, fmt.Errorf("httpapi: the embedded OpenAPI document: %w", err)
	}
	paths, _ := doc["paths"].(map[string]any)
	registered := map[string]bool{}
	for _, r := range s.routes {
		registered[r.Method+" "+openAPIPath(r.Path)] = true
	}
	out := map[string]any{}
	for p, item := range paths {
		ops, _ := item.(map[string]any)
		served := p
		if rest, ok := strings.CutPrefix(p, openAPIPrefix+"/"); ok {
			served = s.prefixed("/" + rest)
		} else if p == openAPIPrefix {
			served = strings.TrimSuffix(s.prefixed(""), "/")
		}
		kept := map[string]any{}
		for k, v := range ops {
			method := strings.ToUpper(k)
			if !slices.Contains(openAPIMethods, method) {
				kept[k] = v // parameters, summary…
				continue
			}
			if registered[method+" "+served] {
				kept[k] = v
			}
		}
		if len(kept) > 0 {
			out[served] = kept
		}
	}
	for _, t := range s.triggers {
		p := openAPIPath(t.Path)
		item, _ := out[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			out[p] = item
		}
		item[strings.ToLower(t.Method)] = triggerOperation(t)
	}
	doc["paths"] = out
	return json.Marshal(doc)
}

// openAPIMethods are the operation keys of an OpenAPI path item, upper case.
var openAPIMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodOptions, http.MethodHead, http.MethodPatch, http.MethodTrace}

// prefixed is path under the server's prefix.
func (s *Server) prefixed(path string) string {
	if s.cfg.Prefix == "/" {
		return path
	}
	return s.cfg.Prefix + path
}

// openAPIPath turns echo's path syntax (/a/:id) into OpenAPI's (/a/{id}).
func openAPIPath(path string) string {
	segs := strings.Split(path, "/")
	for i, seg := range segs {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// triggerOperation is the OpenAPI operation of a trigger route.
func triggerOperation(t *compiledTrigger) map[string]any {
	var params []any
	for seg := range strings.SplitSeq(t.Path, "/") {
		if name, ok := strings.CutPrefix(seg, ":"); ok {
			params = append(params, map[string]any{
				"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"},
			})
		}
	}
	op := map[string]any{
		"tags":        []any{"triggers"},
		"operationId": "trigger " + t.source,
		"summary":     "Start " + t.Workflow + " (an HTTP trigger)",
		"description": "A trigger of the host: creates an instance of " + t.Workflow + " in the namespace " + t.Namespace +
			" whose params are built from the request, and answers its id. A token limited to other namespaces may not call it. See the Trigger description at the top.",
		"security": []any{map[string]any{"bearer": []any{string(ActionCreate)}}},
		"responses": map[string]any{
			"202": map[string]any{
				"description": "The instance was created; Location names it and X-Request-Id is the request id recorded in its provenance.",
				"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/TriggerResponse"}}},
			},
			"default": map[string]any{"$ref": "#/components/responses/TriggerError"},
		},
	}
	if len(params) > 0 {
		op["parameters"] = params
	}
	if t.Method != http.MethodGet && t.Method != http.MethodDelete {
		op["requestBody"] = map[string]any{
			"required":    false,
			"description": "Any JSON value (or nothing): the params, or what the trigger's mapping reads.",
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/JSONValue"}}},
		}
	}
	return op
}
