package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// Client calls the HTTP API of a Duraflow server. Its errors are *APIError
// values for answers of the server, which match the workflow sentinels with
// errors.Is, so code written against client.Client reads the same over HTTP.
// It implements workflow.Engine: a registry bound to it (Registry.Bind)
// creates and controls instances on the remote server through its typed
// bindings. A Client is safe for concurrent use.
type Client struct {
	baseURL string
	prefix  string
	token   string
	hc      *http.Client
	// namespace is sent in NamespaceHeader on every request; "" sends none.
	namespace string
}

// NamespaceHeader is the request header that selects the namespace an
// instance route acts in (the "namespace" query parameter does the same;
// given both, they must agree). Without either a request acts in
// workflow.DefaultNamespace, or for a token limited to namespaces in its
// first one.
const NamespaceHeader = "Duraflow-Namespace"

// WithNamespace returns a copy of the client whose requests act in the
// namespace ns (NamespaceHeader): its creates go there, and it sees and
// touches only that namespace's instances. An instance of another
// namespace is ErrInstanceNotFound to it.
func (c *Client) WithNamespace(ns string) *Client {
	out := *c
	out.namespace = ns
	return &out
}

var _ workflow.Engine = (*Client)(nil)

// New returns a client for the server at baseURL (scheme and host,
// such as "http://127.0.0.1:8080", without the API prefix). token is sent as
// "Authorization: Bearer <token>" unless it is empty. hc nil means
// http.DefaultClient; deadlines come from the contexts of the calls.
func New(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), prefix: "/api", token: token, hc: hc}
}

// WithPrefix returns a copy of the client for a server whose API is mounted
// under prefix (httpapi.Config.Prefix) instead of "/api"; "/" or "" means
// the root.
func (c *Client) WithPrefix(prefix string) *Client {
	out := *c
	out.prefix = strings.TrimRight(prefix, "/")
	if out.prefix != "" && !strings.HasPrefix(out.prefix, "/") {
		out.prefix = "/" + out.prefix
	}
	return &out
}

// Workflows returns the registered workflows (GET /workflows).
func (c *Client) Workflows(ctx context.Context) (*WorkflowList, error) {
	var out WorkflowList
	return &out, c.do(ctx, http.MethodGet, c.api("/workflows"), nil, nil, &out)
}

// List returns a page of the instances of p.WorkflowName (GET
// /workflows/:name/instances), or with no name of every workflow stored, in
// one order with one cursor (GET /instances).
func (c *Client) List(ctx context.Context, p client.ListParams) (*InstanceList, error) {
	path := "/instances"
	if p.WorkflowName != "" {
		path = "/workflows/" + url.PathEscape(p.WorkflowName) + "/instances"
	}
	q := url.Values{}
	for _, st := range p.Statuses {
		q.Add("status", string(st)) // repeated, as the OpenAPI document says
	}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Queue != "" {
		q.Set("queue", p.Queue)
	}
	if p.Namespace != "" {
		q.Set("namespace", p.Namespace)
	}
	var page InstancePage
	if err := c.do(ctx, http.MethodGet, c.api(path), q, nil, &page); err != nil {
		return nil, err
	}
	return &InstanceList{Instances: infosOf(page.Instances), NextCursor: page.Cursor}, nil
}

// Create creates one instance (POST /workflows/:name/instances).
func (c *Client) Create(ctx context.Context, workflowName string, req dftype.CreateRequest) (*dftype.InstanceInfo, error) {
	if workflowName == "" {
		return nil, fmt.Errorf("%w: empty workflow name", workflow.ErrInvalidWorkflowName)
	}
	var out Instance
	body := CreateRequest{ID: req.ID, Params: req.Params, Queue: req.Queue, Priority: req.Priority, DedupeKey: req.DedupeKey, Deadline: deadlineOf(req.Deadline)}
	if err := c.do(ctx, http.MethodPost, c.api("/workflows/"+url.PathEscape(workflowName)+"/instances"), namespaceQuery(req.Namespace), body, &out); err != nil {
		return nil, err
	}
	return out.Info(), nil
}

// CreateBatch creates up to the server's batch limit (workflow.MaxBatchSize,
// 100, by default) instances and returns those it created; existing ids
// are skipped (POST /workflows/:name/instances/batch).
func (c *Client) CreateBatch(ctx context.Context, workflowName string, reqs []dftype.CreateRequest) ([]*dftype.InstanceInfo, error) {
	if workflowName == "" {
		return nil, fmt.Errorf("%w: empty workflow name", workflow.ErrInvalidWorkflowName)
	}
	body := CreateBatchRequest{Instances: make([]CreateRequest, len(reqs))}
	ns := ""
	for i, r := range reqs {
		body.Instances[i] = CreateRequest{ID: r.ID, Params: r.Params, Queue: r.Queue, Priority: r.Priority, DedupeKey: r.DedupeKey, Deadline: deadlineOf(r.Deadline)}
		if i == 0 {
			ns = r.Namespace
		} else if r.Namespace != ns {
			return nil, fmt.Errorf("%w: instance %d: the instances of a batch share one namespace", workflow.ErrInvalidRequest, i)
		}
	}
	var out InstanceBatch
	if err := c.do(ctx, http.MethodPost, c.api("/workflows/"+url.PathEscape(workflowName)+"/instances/batch"), namespaceQuery(ns), body, &out); err != nil {
		return nil, err
	}
	return infosOf(out.Instances), nil
}

// Get returns one instance (GET /workflows/:name/instances/:id).
func (c *Client) Get(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	path, err := c.instancePath(workflowName, id, "")
	if err != nil {
		return nil, err
	}
	return c.instance(ctx, http.MethodGet, path)
}

// Pause pauses an instance (POST …/:id/pause) and returns it as it is after.
func (c *Client) Pause(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, "pause")
}

// Resume resumes a paused instance (POST …/:id/resume).
func (c *Client) Resume(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, "resume")
}

// Terminate terminates a non-terminal instance (POST …/:id/terminate).
func (c *Client) Terminate(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, "terminate")
}

// Restart starts a new run of an instance (POST …/:id/restart).
func (c *Client) Restart(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, "restart")
}

// Compensate asks for the compensation of a live instance (POST
// …/:id/compensate): it stops at its next step boundary and the
// compensations of its completed steps run in reverse order (see
// workflow.Compensate).
func (c *Client) Compensate(ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error) {
	return c.change(ctx, workflowName, id, "compensate")
}

func (c *Client) change(ctx context.Context, workflowName, id, verb string) (*dftype.InstanceInfo, error) {
	path, err := c.instancePath(workflowName, id, "/"+verb)
	if err != nil {
		return nil, err
	}
	return c.instance(ctx, http.MethodPost, path)
}

// instance calls a route that answers an Instance.
func (c *Client) instance(ctx context.Context, method, path string) (*dftype.InstanceInfo, error) {
	var out Instance
	if err := c.do(ctx, method, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Info(), nil
}

// SendEvent sends an event to an instance (POST …/:id/events). An empty
// payload is stored as null.
func (c *Client) SendEvent(ctx context.Context, workflowName, id, eventType string, payload json.RawMessage) error {
	_, err := c.SendEventStatus(ctx, workflowName, id, eventType, payload)
	return err
}

// SendEventStatus is SendEvent that returns the status of the instance
// once the event was stored, as the server answers it.
func (c *Client) SendEventStatus(ctx context.Context, workflowName, id, eventType string, payload json.RawMessage) (*InstanceDetails, error) {
	out, err := c.SendEventAnswer(ctx, workflowName, id, eventType, payload)
	if err != nil {
		return nil, err
	}
	return &out.Status, nil
}

// SendEventAnswer is SendEvent that returns the server's whole answer: the
// instance's status, and whether a waiting step took the event or it was
// buffered (EventSent.Delivery).
func (c *Client) SendEventAnswer(ctx context.Context, workflowName, id, eventType string, payload json.RawMessage) (*EventSent, error) {
	path, err := c.instancePath(workflowName, id, "/events")
	if err != nil {
		return nil, err
	}
	var out EventSent
	if err := c.do(ctx, http.MethodPost, path, nil, SendEventRequest{Type: eventType, Payload: payload}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// History returns a page of the steps and events of a run of an instance
// (GET …/:id/history). Unlike client.Client, PageSize 0 means the server's
// default page of httpapi.DefaultHistoryPageSize, not everything: follow
// NextCursor.
func (c *Client) History(ctx context.Context, workflowName, id string, p client.HistoryParams) (*History, error) {
	path, err := c.instancePath(workflowName, id, "/history")
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if p.Run != 0 {
		q.Set("run", strconv.Itoa(p.Run))
	}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	var page HistoryPage
	if err := c.do(ctx, http.MethodGet, path, q, nil, &page); err != nil {
		return nil, err
	}
	return page.history(), nil
}

// Tick asks the server to run due work once (POST /_runner/tick) and returns
// what it did.
func (c *Client) Tick(ctx context.Context, req TickRequest) (*TickResult, error) {
	var out TickResult
	if err := c.do(ctx, http.MethodPost, c.api("/_runner/tick"), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Health calls GET /healthz and returns nil when the server answers 200.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Ready calls GET /readyz and returns nil when the server is ready; a server
// that is not answers a 503 *APIError with code NOT_READY and the reason.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// Index calls GET <prefix>: the server's version, its routes and where its
// OpenAPI document and documentation are.
func (c *Client) Index(ctx context.Context) (*APIIndex, error) {
	var out APIIndex
	return &out, c.do(ctx, http.MethodGet, cmp.Or(c.prefix, "/"), nil, nil, &out)
}

func (c *Client) api(path string) string { return c.prefix + path }

// namespaceQuery is the query of a create that names its namespace.
func namespaceQuery(ns string) url.Values {
	if ns == "" {
		return nil
	}
	return url.Values{"namespace": {ns}}
}

func (c *Client) instancePath(workflowName, id, suffix string) (string, error) {
	if workflowName == "" {
		return "", fmt.Errorf("%w: empty workflow name", workflow.ErrInvalidWorkflowName)
	}
	if id == "" {
		return "", fmt.Errorf("%w: empty instance id", workflow.ErrInvalidInstanceID)
	}
	return c.api("/workflows/" + url.PathEscape(workflowName) + "/instances/" + url.PathEscape(id) + suffix), nil
}

// do sends one request and decodes a 2xx answer into out (unless out is nil)
// or any other answer into an *APIError.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	u := c.baseURL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var body io.Reader
	if raw, ok := in.(rawBody); ok {
		body = bytes.NewReader(raw)
	} else if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: encoding the request: %w", workflow.ErrInvalidRequest, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.namespace != "" {
		req.Header.Set(NamespaceHeader, c.namespace)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readAPIError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// readAPIError reads an error answer. One that is not in the API's shape
// (a proxy's error page, say) gets the code HTTP_<status>.
func readAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb ErrorResponse
	if err := json.Unmarshal(b, &eb); err == nil && eb.Error != nil && eb.Error.Code != "" {
		eb.Error.Status = resp.StatusCode
		return eb.Error
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{Status: resp.StatusCode, Code: Code("HTTP_" + strconv.Itoa(resp.StatusCode)), Message: msg}
}
