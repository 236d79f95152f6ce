package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// Trigger is an HTTP route that starts a workflow: a request to Method Path
// creates an instance of Workflow whose params are built from the request,
// and is answered 202 with {"instanceId":"…"} and a Location header. The
// instance records its provenance in its metadata:
//
//	{"trigger":{"type":"http","source":"POST /hooks/orders","receivedAt":"…","requestId":"…"}}
//
// where requestId is the request's X-Request-Id, or one the server makes up
// (and answers in X-Request-Id). Triggers are mounted at the server's root,
// outside Prefix, and ask for ActionCreate, like the create route of the
// API; bodies are bounded by Config.MaxBodyBytes and errors have the API's
// shape.
type Trigger struct {
	// Method is the HTTP method: POST, PUT, PATCH, GET or DELETE.
	//
	// Defaults to POST.
	Method string `json:"method,omitempty"`
	// Path is the route, in echo's syntax: "/hooks/orders" or
	// "/hooks/orders/:id" (a path parameter). Its first segment must not be
	// one of the API's (the prefix's, healthz, readyz).
	Path string `json:"path"`
	// Workflow names the workflow to start; a flow registered in the
	// registry is started by its id the same way.
	Workflow string `json:"workflow"`
	// Namespace is the namespace the trigger creates its instances in. A
	// token limited to namespaces may call the trigger only when this is
	// one of them (403 FORBIDDEN otherwise), an AuthorizeFunc sees it as
	// RequestNamespace, and a request that selects another namespace is
	// 400 INVALID_REQUEST. In the command-line form it follows the
	// workflow after "@": "POST /hooks/orders=orders@acme".
	//
	// Defaults to workflow.DefaultNamespace.
	Namespace string `json:"namespace,omitempty"`
	// Params maps keys of the params object to sources in the request. A
	// key is a dot path ("order.id" makes {"order":{"id":…}}); a source is
	// one of
	//
	//	body            the whole JSON body
	//	body.a.b.0      a value in the JSON body (a number indexes an array)
	//	query.name      a query parameter (a string; the first value)
	//	header.Name     a request header (a string)
	//	path.name       a path parameter (a string)
	//
	// A source the request lacks leaves its key out. Mapping is data, never
	// code: nothing in a request is evaluated.
	//
	// Defaults to none: the JSON body is the params (null when empty).
	Params map[string]string `json:"params,omitempty"`
	// AllowCredentialHeaders lets Params copy credentials into the params:
	// credential headers (Authorization, Proxy-Authorization, Cookie,
	// Set-Cookie, and any header whose name holds auth, cookie, token,
	// secret, password, passwd, session, credential, api-key or apikey) and
	// query parameters whose names hold the same (token, access_token,
	// api_key, password, …; "_" counts as "-"). Params are stored and shown
	// to every token with the read scope, so a trigger that maps such a
	// source is refused unless it sets this; set it only when the workflow
	// needs the caller's credential and every reader may see it. In the
	// command-line form it is the item "allowCredentialHeaders".
	//
	// Defaults to false.
	AllowCredentialHeaders bool `json:"allowCredentialHeaders,omitempty"`
}

// allowCredentialHeadersItem is the command-line form of
// Trigger.AllowCredentialHeaders.
const allowCredentialHeadersItem = "allowCredentialHeaders"

// credentialWords are the parts of header and query parameter names that
// mark a credential (compared in lower case, "_" read as "-").
var credentialWords = []string{"auth", "cookie", "token", "secret", "password", "passwd", "session", "credential", "api-key", "apikey"}

// isCredentialName reports whether a header or query parameter typically
// carries a credential: Authorization, Proxy-Authorization, Cookie,
// Set-Cookie, X-Api-Key, X-Auth-Token, X-Amz-Security-Token, token,
// access_token, api_key, password and the like.
func isCredentialName(name string) bool {
	lower := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	for _, w := range credentialWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// TriggerResponse is the answer of a trigger route.
type TriggerResponse struct {
	InstanceID string `json:"instanceId"`
}

// triggerMethods are the methods a trigger may use.
var triggerMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodGet, http.MethodDelete}

// maxRequestIDLength bounds an X-Request-Id the server records as is.
const maxRequestIDLength = 200

// ParseTrigger parses the command-line form of a trigger:
//
//	[METHOD ]PATH=WORKFLOW[@NAMESPACE][,KEY=SOURCE...][,allowCredentialHeaders]
//
// such as "POST /hooks/orders=orders" (the body as params),
// "POST /hooks/acme/orders=orders@acme" (instances in the namespace acme) or
// "/hooks/orders/:id=orders,order.id=path.id,order.lines=body.lines,source=header.X-Source".
// The method defaults to POST. See Trigger for keys and sources; the result
// is checked as New checks Config.Triggers.
func ParseTrigger(spec string) (Trigger, error) {
	var t Trigger
	spec = strings.TrimSpace(spec)
	if method, rest, ok := strings.Cut(spec, " "); ok {
		t.Method, spec = method, strings.TrimSpace(rest)
	}
	parts := strings.Split(spec, ",")
	path, wf, ok := strings.Cut(parts[0], "=")
	if !ok {
		return Trigger{}, fmt.Errorf("trigger %q: want [METHOD ]PATH=WORKFLOW[,KEY=SOURCE...]", spec)
	}
	t.Path, t.Workflow = strings.TrimSpace(path), strings.TrimSpace(wf)
	if wf, ns, ok := strings.Cut(t.Workflow, "@"); ok {
		t.Workflow, t.Namespace = strings.TrimSpace(wf), strings.TrimSpace(ns)
		if t.Namespace == "" {
			return Trigger{}, fmt.Errorf("trigger %q: an empty namespace after %q", spec, "@")
		}
	}
	for _, part := range parts[1:] {
		if strings.TrimSpace(part) == allowCredentialHeadersItem {
			t.AllowCredentialHeaders = true
			continue
		}
		key, source, ok := strings.Cut(part, "=")
		if !ok {
			return Trigger{}, fmt.Errorf("trigger %q: mapping %q: want KEY=SOURCE, such as order.id=body.id", spec, part)
		}
		if t.Params == nil {
			t.Params = map[string]string{}
		}
		key = strings.TrimSpace(key)
		if _, dup := t.Params[key]; dup {
			return Trigger{}, fmt.Errorf("trigger %q: key %q is mapped twice", spec, key)
		}
		t.Params[key] = strings.TrimSpace(source)
	}
	if _, err := compileTrigger(t); err != nil {
		return Trigger{}, err
	}
	return t, nil
}

// ParseTriggersJSON reads triggers from JSON: an array of Trigger objects,
// or an object {"triggers":[…]}. Unknown fields are errors.
func ParseTriggersJSON(data []byte) ([]Trigger, error) {
	data = bytes.TrimSpace(data)
	var list []Trigger
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var err error
	if len(data) > 0 && data[0] == '[' {
		err = dec.Decode(&list)
	} else {
		var doc struct {
			Triggers []Trigger `json:"triggers"`
		}
		err = dec.Decode(&doc)
		list = doc.Triggers
	}
	if err != nil {
		return nil, fmt.Errorf("reading triggers: %s", describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("reading triggers: unexpected data after the JSON document")
	}
	for i, t := range list {
		if _, err := compileTrigger(t); err != nil {
			return nil, fmt.Errorf("trigger %d: %w", i, err)
		}
	}
	return list, nil
}

// compiledTrigger is a checked trigger, ready to serve.
type compiledTrigger struct {
	Trigger
	// source names the route in provenance: "POST /hooks/orders".
	source string
	// fields are the mappings, by key; nil means the body is the params.
	fields []fieldMapping
}

// fieldMapping puts one source into the params at a key path.
type fieldMapping struct {
	key  []string
	kind string // body, query, header, path
	// path is the dot path in the body, or the name of the query
	// parameter, header or path parameter.
	path []string
	name string
}

func compileTrigger(t Trigger) (*compiledTrigger, error) {
	if t.Method == "" {
		t.Method = http.MethodPost
	}
	t.Method = strings.ToUpper(t.Method)
	name := t.Method + " " + t.Path
	if !slices.Contains(triggerMethods, t.Method) {
		return nil, fmt.Errorf("trigger %s: method must be one of %s", name, strings.Join(triggerMethods, ", "))
	}
	if !strings.HasPrefix(t.Path, "/") || t.Path == "/" || strings.ContainsAny(t.Path, "*?#{} \t") || strings.Contains(t.Path, "//") {
		return nil, fmt.Errorf("trigger %s: path must be a plain path below / such as /hooks/orders (path parameters as :name)", name)
	}
	params := map[string]bool{}
	for seg := range strings.SplitSeq(t.Path[1:], "/") {
		if p, ok := strings.CutPrefix(seg, ":"); ok {
			if p == "" || params[p] {
				return nil, fmt.Errorf("trigger %s: path parameter %q is empty or repeated", name, seg)
			}
			params[p] = true
		}
	}
	if err := workflow.ValidateWorkflowName(t.Workflow); err != nil {
		return nil, fmt.Errorf("trigger %s: %w", name, err)
	}
	if t.Namespace == "" {
		t.Namespace = workflow.DefaultNamespace
	}
	if err := workflow.ValidateNamespace(t.Namespace); err != nil {
		return nil, fmt.Errorf("trigger %s: %w", name, err)
	}
	ct := &compiledTrigger{Trigger: t, source: name}
	keys := make([]string, 0, len(t.Params))
	for k := range t.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		key := strings.Split(k, ".")
		if slices.Contains(key, "") {
			return nil, fmt.Errorf("trigger %s: key %q must be a dot path of names, such as order.id", name, k)
		}
		if i > 0 && strings.HasPrefix(k, keys[i-1]+".") {
			return nil, fmt.Errorf("trigger %s: keys %q and %q overlap", name, keys[i-1], k)
		}
		src := t.Params[k]
		kind, rest, _ := strings.Cut(src, ".")
		m := fieldMapping{key: key, kind: kind}
		switch kind {
		case "body":
			if rest != "" {
				m.path = strings.Split(rest, ".")
				if slices.Contains(m.path, "") {
					return nil, fmt.Errorf("trigger %s: source %q has an empty path segment", name, src)
				}
			}
		case "query", "header", "path":
			if rest == "" {
				return nil, fmt.Errorf("trigger %s: source %q names no %s parameter", name, src, kind)
			}
			if kind == "path" && !params[rest] {
				return nil, fmt.Errorf("trigger %s: source %q: the path has no parameter :%s", name, src, rest)
			}
			if kind != "path" && !t.AllowCredentialHeaders && isCredentialName(rest) {
				what := map[string]string{"header": "header", "query": "query parameter"}[kind]
				return nil, fmt.Errorf("trigger %s: source %q copies a credential %s into the params, where every token with the read scope sees it; "+
					"map another %s, or set \"allowCredentialHeaders\": true on the trigger (%s in the command-line form) if the workflow needs it",
					name, src, what, what, allowCredentialHeadersItem)
			}
			m.name = rest
		default:
			return nil, fmt.Errorf("trigger %s: source %q must start with body, query., header. or path.", name, src)
		}
		ct.fields = append(ct.fields, m)
	}
	return ct, nil
}

// addTriggers mounts the configured triggers on e, at the root.
func (s *Server) addTriggers(e *echo.Echo) error {
	reserved := map[string]bool{"healthz": true, "readyz": true}
	for _, r := range e.Routes() {
		if s.cfg.Prefix == "/" || !strings.HasPrefix(r.Path, s.cfg.Prefix+"/") {
			reserved[firstSegment(r.Path)] = true
		}
	}
	if s.cfg.Prefix != "/" {
		reserved[firstSegment(s.cfg.Prefix)] = true
	}
	seen := map[string]bool{}
	for i, t := range s.cfg.Triggers {
		ct, err := compileTrigger(t)
		if err != nil {
			return fmt.Errorf("httpapi: Triggers[%d]: %w", i, err)
		}
		if seg := firstSegment(ct.Path); reserved[seg] || strings.HasPrefix(seg, ":") {
			return fmt.Errorf("httpapi: trigger %s: the first path segment %q belongs to the API; choose another, such as /hooks/…", ct.source, seg)
		}
		if seen[ct.source] {
			return fmt.Errorf("httpapi: trigger %s is configured twice", ct.source)
		}
		seen[ct.source] = true
		if _, ok := wfcore.Lookup(s.client.Registry(), ct.Workflow); !ok {
			s.log.Warn("httpapi: a trigger names a workflow that is not registered (yet); its requests answer 404 until it is",
				"trigger", ct.source, "workflow", ct.Workflow)
		}
		e.Add(ct.Method, ct.Path, s.trigger(ct), s.authMiddleware(ActionCreate, ct.Namespace))
		s.actions[ct.Method+" "+ct.Path] = ActionCreate
		s.triggers = append(s.triggers, ct)
	}
	return nil
}

func firstSegment(path string) string {
	seg, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return seg
}

// trigger returns the handler of one trigger route.
func (s *Server) trigger(t *compiledTrigger) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		prov := s.provenance(c, dftype.TriggerHTTP, t.source)
		body, err := s.readBody(c)
		if err != nil {
			return err
		}
		params, err := t.params(c, body)
		if err != nil {
			return err
		}
		if err := s.checkPayload("params", params); err != nil {
			return err
		}
		info, err := s.client.Namespace(t.Namespace).Create(r.Context(), t.Workflow, dftype.CreateRequest{Params: params, Metadata: prov.Metadata()})
		if err != nil {
			return err
		}
		c.Response().Header().Set("Location", s.instancePath(info))
		return reply(c, http.StatusAccepted, TriggerResponse{InstanceID: info.ID})
	}
}

// provenance returns the provenance of an instance the request creates, and
// answers the request id in X-Request-Id.
func (s *Server) provenance(c echo.Context, typ, source string) *dftype.Provenance {
	prov := &dftype.Provenance{
		Type: typ, Source: source, ReceivedAt: s.cfg.Clock.Now().UTC(), RequestID: requestID(c.Request()),
	}
	c.Response().Header().Set("X-Request-Id", prov.RequestID)
	return prov
}

// readBody reads the request body, at most MaxBodyBytes; empty is nil. The
// body is a payload (params, or a flow definition), so it may nest at most
// workflow.MaxPayloadDepth levels deep.
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	data, err := s.readAll(c, workflow.MaxPayloadDepth)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	return data, nil
}

// params builds the params of an instance from a request.
func (t *compiledTrigger) params(c echo.Context, body []byte) (json.RawMessage, error) {
	usesBody := t.fields == nil
	for _, f := range t.fields {
		usesBody = usesBody || f.kind == "body"
	}
	var doc any
	if usesBody && body != nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			return nil, fmt.Errorf("%w: the request body is not valid JSON: %s", workflow.ErrInvalidRequest, describeJSONError(err))
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("%w: unexpected data after the JSON body", workflow.ErrInvalidRequest)
		}
	}
	if t.fields == nil {
		if body == nil {
			return json.RawMessage("null"), nil
		}
		return body, nil
	}
	out := map[string]any{}
	r := c.Request()
	for _, f := range t.fields {
		var (
			v  any
			ok bool
		)
		switch f.kind {
		case "body":
			v, ok = lookupPath(doc, f.path), body != nil
			if len(f.path) > 0 {
				ok = v != nil || pathHoldsNull(doc, f.path)
			}
		case "query":
			if vs, has := r.URL.Query()[f.name]; has && len(vs) > 0 {
				v, ok = vs[0], true
			}
		case "header":
			if vs := r.Header.Values(f.name); len(vs) > 0 {
				v, ok = vs[0], true
			}
		case "path":
			var err error
			if v, err = pathParam(c, f.name); err != nil {
				return nil, err
			}
			ok = true
		}
		if ok {
			setPath(out, f.key, v)
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding the params: %v", workflow.ErrInvalidRequest, err)
	}
	return b, nil
}

// lookupPath returns the value at a dot path in decoded JSON, or nil.
func lookupPath(doc any, path []string) any {
	v := doc
	for _, seg := range path {
		switch node := v.(type) {
		case map[string]any:
			v = node[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return nil
			}
			v = node[i]
		default:
			return nil
		}
	}
	return v
}

// pathHoldsNull reports whether the value at path exists and is null.
func pathHoldsNull(doc any, path []string) bool {
	parent := lookupPath(doc, path[:len(path)-1])
	last := path[len(path)-1]
	switch node := parent.(type) {
	case map[string]any:
		v, ok := node[last]
		return ok && v == nil
	case []any:
		i, err := strconv.Atoi(last)
		return err == nil && i >= 0 && i < len(node) && node[i] == nil
	}
	return false
}

// setPath sets out[key[0]][key[1]]… = v, making objects on the way. Keys
// never overlap (compileTrigger checks), so every step is an object.
func setPath(out map[string]any, key []string, v any) {
	for _, seg := range key[:len(key)-1] {
		next, ok := out[seg].(map[string]any)
		if !ok {
			next = map[string]any{}
			out[seg] = next
		}
		out = next
	}
	out[key[len(key)-1]] = v
}

// requestID returns the request's X-Request-Id when it is a reasonable one
// (1 to 200 printable ASCII characters), or a new random one.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= maxRequestIDLength && printableASCII(id) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
