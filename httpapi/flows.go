package httpapi

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/flow"
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

// addFlowRoutes registers the flow routes with route, the registration
// function of New.
func (s *Server) addFlowRoutes(route routeFunc) {
	if s.cfg.Flows == nil {
		return
	}
	route(http.MethodPost, "/flows", s.applyFlow, ActionFlows, everyNamespace)
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
	p := flow.ListParams{Cursor: q.Get("cursor")}
	if p.PageSize, err = s.pageSize(q, "pageSize", 0); err != nil {
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
