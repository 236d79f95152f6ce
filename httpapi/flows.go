package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/flowreg"
	"github.com/duraflow/duraflow/workflow"
)

// The flow registry routes, present when Config.Flows is set:
//
//	POST /flows                              flows  a flow definition → 201 (200 when stored already)
//	GET  /flows?pageSize=&cursor=            read   flows at their latest version, by id
//	GET  /flows/:id                          read   the latest version, with its definition
//	GET  /flows/:id/versions                 read   every version, lowest first
//	GET  /flows/:id/versions/:version        read   one version, with its definition
//
// A flow's instances are created and driven by the workflow routes under
// its id (/workflows/:id/instances…), like a Go workflow's.

// FlowApplied is the answer of POST /flows.
type FlowApplied = flowreg.ApplyResult

// FlowInfo is a stored flow version, the answer of GET /flows/:id and
// GET /flows/:id/versions/:version.
type FlowInfo = flowreg.Info

// FlowList is the answer of GET /flows: a page of flows at their latest
// versions, and the cursor of the next page.
type FlowList = flowreg.ListResult

// FlowVersionList is the answer of GET /flows/:id/versions.
type FlowVersionList = flowreg.VersionList

// addFlowRoutes registers the flow routes with route, the registration
// function of New.
func (s *Server) addFlowRoutes(route func(method, path string, h echo.HandlerFunc, action Action)) {
	if s.cfg.Flows == nil {
		return
	}
	route(http.MethodPost, "/flows", s.applyFlow, ActionFlows)
	route(http.MethodGet, "/flows", s.listFlows, ActionRead)
	route(http.MethodGet, "/flows/:id", s.getFlow, ActionRead)
	route(http.MethodGet, "/flows/:id/versions", s.flowVersions, ActionRead)
	route(http.MethodGet, "/flows/:id/versions/:version", s.getFlow, ActionRead)
}

// applyFlow stores the body, a flow definition, as it was sent: the
// registry keeps it byte for byte.
func (s *Server) applyFlow(c echo.Context) error {
	if _, err := query(c, nil); err != nil {
		return err
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return fmt.Errorf("%w: the request body is empty; it must be a flow definition", workflow.ErrInvalidRequest)
	}
	res, err := s.cfg.Flows.Apply(c.Request().Context(), body)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Location", s.flowPath(res.ID, res.Version))
	status := http.StatusCreated
	if !res.Created {
		status = http.StatusOK
	}
	return reply(c, status, res)
}

func (s *Server) listFlows(c echo.Context) error {
	q, err := query(c, []string{"pageSize", "cursor"})
	if err != nil {
		return err
	}
	p := flowreg.ListParams{Cursor: q.Get("cursor")}
	if p.PageSize, err = queryInt(q, "pageSize", 0, 1, flowreg.MaxPageSize); err != nil {
		return err
	}
	res, err := s.cfg.Flows.List(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, res)
}

// getFlow serves the latest version (GET /flows/:id) and one version (GET
// /flows/:id/versions/:version).
func (s *Server) getFlow(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	version, err := pathParam(c, "version")
	if err != nil {
		return err
	}
	if _, err := query(c, nil); err != nil {
		return err
	}
	info, err := s.cfg.Flows.Get(c.Request().Context(), id, version)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, info)
}

func (s *Server) flowVersions(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if _, err := query(c, nil); err != nil {
		return err
	}
	res, err := s.cfg.Flows.Versions(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, res)
}

// flowPath is the API path of a flow version, for the Location header.
func (s *Server) flowPath(id, version string) string {
	prefix := s.cfg.Prefix
	if prefix == "/" {
		prefix = ""
	}
	return prefix + "/flows/" + url.PathEscape(id) + "/versions/" + url.PathEscape(version)
}

// rawBody is a request body the client sends as it is, not encoded as
// JSON by do: a flow definition must reach the server byte for byte.
type rawBody []byte

// ApplyFlow applies a flow definition (POST /flows), sending it byte for
// byte. A definition that does not validate fails with an *APIError whose
// code is INVALID_FLOW and whose Problems list what is wrong; a version
// stored with another definition fails with FLOW_VERSION_CONFLICT.
func (c *Client) ApplyFlow(ctx context.Context, definition []byte) (*FlowApplied, error) {
	if len(bytes.TrimSpace(definition)) == 0 {
		return nil, fmt.Errorf("%w: the flow definition is empty", workflow.ErrInvalidRequest)
	}
	var out FlowApplied
	return &out, c.do(ctx, http.MethodPost, c.api("/flows"), nil, rawBody(definition), &out)
}

// ListFlows returns a page of flows at their latest versions, ordered by id
// (GET /flows).
func (c *Client) ListFlows(ctx context.Context, p flowreg.ListParams) (*FlowList, error) {
	q := url.Values{}
	if p.PageSize != 0 {
		q.Set("pageSize", strconv.Itoa(p.PageSize))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	var out FlowList
	return &out, c.do(ctx, http.MethodGet, c.api("/flows"), q, nil, &out)
}

// GetFlow returns a version of a flow with its definition, or the latest
// when version is empty (GET /flows/:id, GET /flows/:id/versions/:version).
func (c *Client) GetFlow(ctx context.Context, id, version string) (*FlowInfo, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty flow id", workflow.ErrInvalidRequest)
	}
	path := c.api("/flows/" + url.PathEscape(id))
	if version != "" {
		path += "/versions/" + url.PathEscape(version)
	}
	var out FlowInfo
	return &out, c.do(ctx, http.MethodGet, path, nil, nil, &out)
}

// FlowVersions returns every version of a flow, lowest first (GET
// /flows/:id/versions).
func (c *Client) FlowVersions(ctx context.Context, id string) (*FlowVersionList, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty flow id", workflow.ErrInvalidRequest)
	}
	var out FlowVersionList
	return &out, c.do(ctx, http.MethodGet, c.api("/flows/"+url.PathEscape(id)+"/versions"), nil, nil, &out)
}
