package httpapi

import (
	"cmp"
	_ "embed" // the OpenAPI document
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

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
// repository holds it (httpapi/openapi.json): every route under the
// default prefix (/api), with the engine's limits and bearer
// authentication, and no triggers. A Server serves its own version at GET
// <prefix>/openapi.json, made to follow its configuration
// (Server.OpenAPI).
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
// <prefix>/openapi.json: OpenAPIDocument made to follow the server's
// configuration. Its paths are under the server's prefix; it leaves out
// the routes the server does not serve (schedules without
// Config.Schedules, flows without Config.Flows, the tick without
// Config.Tick) and the schemas, parameters and tags only they use; it has
// one operation per trigger; its bounds of ids, event types, workflow
// names, batches and pages are Config.Limits'; and a server without
// authentication (no tokens and no Authorize) serves it without security
// requirements and 401 answers.
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
// routes the server registered (see OpenAPI).
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
			served = cmp.Or(s.prefixed(""), "/")
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
	ids := map[string]bool{}
	for _, t := range s.triggers {
		p := openAPIPath(t.Path)
		item, _ := out[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			out[p] = item
		}
		op := triggerOperation(t)
		id := op["operationId"].(string)
		for n := 2; ids[id]; n++ {
			id = op["operationId"].(string) + "_" + strconv.Itoa(n)
		}
		ids[id], op["operationId"] = true, id
		item[strings.ToLower(t.Method)] = op
	}
	doc["paths"] = out
	s.applyLimits(doc)
	if s.authorize == nil {
		withoutAuthentication(doc)
	}
	pruneOpenAPI(doc)
	return json.Marshal(doc)
}

// applyLimits sets the bounds of the document that Config.Limits moves:
// the longest instance id, event type and workflow name, the largest batch
// and page.
func (s *Server) applyLimits(doc map[string]any) {
	l := s.cfg.Limits.WithDefaults()
	for _, b := range []struct {
		v    int
		path []string
	}{
		{l.MaxIDLength, []string{"components", "schemas", "InstanceId", "maxLength"}},
		{l.MaxEventTypeLength, []string{"components", "schemas", "EventType", "maxLength"}},
		{l.MaxWorkflowNameLength, []string{"components", "parameters", "workflowName", "schema", "maxLength"}},
		{l.MaxWorkflowNameLength, []string{"components", "parameters", "lifecycleWorkflow", "schema", "maxLength"}},
		{l.MaxBatchSize, []string{"components", "schemas", "CreateBatchRequest", "properties", "instances", "maxItems"}},
		{l.MaxPageSize, []string{"components", "parameters", "pageSize", "schema", "maximum"}},
	} {
		setIn(doc, b.v, b.path...)
	}
	// The page sizes an operation spells out itself (the history's, the
	// workers' deprecated limit).
	for _, item := range objects(doc["paths"]) {
		for _, op := range objects(item) {
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				p, _ := p.(map[string]any)
				if p["in"] == "query" && (p["name"] == "pageSize" || p["name"] == "limit") {
					setIn(p, l.MaxPageSize, "schema", "maximum")
				}
			}
		}
	}
}

// withoutAuthentication makes the document that of a server without
// authentication, which answers requests without credentials (on
// loopback only): every operation's security requirements are none (an
// empty list, as /healthz's), there is no security scheme and no 401
// answer.
func withoutAuthentication(doc map[string]any) {
	for _, item := range objects(doc["paths"]) {
		for _, op := range objects(item) {
			op["security"] = []any{}
			if responses, ok := op["responses"].(map[string]any); ok {
				delete(responses, strconv.Itoa(http.StatusUnauthorized))
			}
		}
	}
	if comps, ok := doc["components"].(map[string]any); ok {
		delete(comps, "securitySchemes")
	}
	if info, ok := doc["info"].(map[string]any); ok {
		desc, _ := info["description"].(string)
		info["description"] = desc + "\n\n**This server** has no tokens: it answers requests without credentials, only those whose Host is a loopback name or address."
	}
}

// pruneOpenAPI drops the components no operation refers to, directly or
// through other components, and the tags no operation has.
func pruneOpenAPI(doc map[string]any) {
	comps, _ := doc["components"].(map[string]any)
	reached := map[string]bool{} // "#/components/schemas/Instance"
	var queue []any
	queue = append(queue, doc["paths"])
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok && !reached[ref] {
				reached[ref] = true
				if rest, ok := strings.CutPrefix(ref, "#/components/"); ok {
					if section, name, ok := strings.Cut(rest, "/"); ok {
						if sec, ok := comps[section].(map[string]any); ok {
							queue = append(queue, sec[name])
						}
					}
				}
			}
			for _, child := range v {
				queue = append(queue, child)
			}
		case []any:
			queue = append(queue, v...)
		}
	}
	for section, v := range comps {
		sec, ok := v.(map[string]any)
		if !ok || section == "securitySchemes" {
			continue
		}
		for name := range sec {
			if !reached["#/components/"+section+"/"+name] {
				delete(sec, name)
			}
		}
		if len(sec) == 0 {
			delete(comps, section)
		}
	}

	used := map[string]bool{}
	for _, item := range objects(doc["paths"]) {
		for _, op := range objects(item) {
			tags, _ := op["tags"].([]any)
			for _, t := range tags {
				if name, ok := t.(string); ok {
					used[name] = true
				}
			}
		}
	}
	if tags, ok := doc["tags"].([]any); ok {
		doc["tags"] = slices.DeleteFunc(tags, func(t any) bool {
			tag, _ := t.(map[string]any)
			name, _ := tag["name"].(string)
			return !used[name]
		})
	}
}

// objects are the values of the JSON object v that are objects themselves.
func objects(v any) []map[string]any {
	m, _ := v.(map[string]any)
	var out []map[string]any
	for _, child := range m {
		if c, ok := child.(map[string]any); ok {
			out = append(out, c)
		}
	}
	return out
}

// setIn sets the member at path of the JSON object m to v, when every
// object on the way is there.
func setIn(m map[string]any, v any, path ...string) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return
		}
		m = next
	}
	if _, ok := m[path[len(path)-1]]; ok {
		m[path[len(path)-1]] = v
	}
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

// triggerOperationID is the operationId of a trigger route, of letters,
// digits and '_' only (client generators make names of it):
// "trigger_POST_hooks_orders_id" for POST /hooks/orders/:id.
func triggerOperationID(t *compiledTrigger) string {
	id := "trigger_" + t.Method + "_" + strings.Trim(t.Path, "/")
	return strings.Map(func(r rune) rune {
		switch {
		case r == ':':
			return -1
		case r < utf8.RuneSelf && (r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'):
			return r
		}
		return '_'
	}, id)
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
		"operationId": triggerOperationID(t),
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
