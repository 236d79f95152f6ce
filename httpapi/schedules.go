package httpapi

import (
	"context"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/schedule"
)

// The schedule routes, present when Config.Schedules is set:
//
//	GET    /schedules?workflow=&pageSize=&cursor=   read
//	POST   /schedules                               schedules  schedule.CreateRequest → 201
//	GET    /schedules/:id                           read
//	PATCH  /schedules/:id                           schedules  schedule.UpdateRequest
//	DELETE /schedules/:id                           schedules  → 204
//	POST   /schedules/:id/enable|disable            schedules
//
// Changes need ActionSchedules, not ActionManage: a schedule starts any
// workflow with any params, which manage alone must not allow. Schedules
// belong to no namespace (their instances are created in the default
// one): a caller limited to namespaces is refused every route (403),
// reads included.

// addScheduleRoutes registers the schedule routes with route, the
// registration function of New.
func (s *Server) addScheduleRoutes(route routeFunc) {
	if s.cfg.Schedules == nil {
		return
	}
	route(http.MethodGet, "/schedules", s.listSchedules, ActionRead, everyNamespace)
	route(http.MethodPost, "/schedules", s.createSchedule, ActionSchedules, everyNamespace)
	route(http.MethodGet, "/schedules/:id", s.getSchedule, ActionRead, everyNamespace)
	route(http.MethodPatch, "/schedules/:id", s.updateSchedule, ActionSchedules, everyNamespace)
	route(http.MethodDelete, "/schedules/:id", s.deleteSchedule, ActionSchedules, everyNamespace)
	route(http.MethodPost, "/schedules/:id/enable", s.toggleSchedule(s.cfg.Schedules.Enable), ActionSchedules, everyNamespace)
	route(http.MethodPost, "/schedules/:id/disable", s.toggleSchedule(s.cfg.Schedules.Disable), ActionSchedules, everyNamespace)
}

func (s *Server) listSchedules(c echo.Context) error {
	q, err := query(c, []string{"workflow", "pageSize", "cursor"})
	if err != nil {
		return err
	}
	p := schedule.ListParams{WorkflowName: q.Get("workflow"), Cursor: q.Get("cursor")}
	if p.PageSize, err = s.pageSize(q, "pageSize", 0); err != nil {
		return err
	}
	res, err := s.cfg.Schedules.List(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, res)
}

func (s *Server) createSchedule(c echo.Context) error {
	var req schedule.CreateRequest
	if err := s.decodeBody(c, &req, false); err != nil {
		return err
	}
	if err := s.checkPayload("params", req.Params); err != nil {
		return err
	}
	info, err := s.cfg.Schedules.Create(c.Request().Context(), req)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Location", s.schedulePath(info.ID))
	return reply(c, http.StatusCreated, info)
}

func (s *Server) getSchedule(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if _, err := query(c, nil); err != nil {
		return err
	}
	info, err := s.cfg.Schedules.Get(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, info)
}

func (s *Server) updateSchedule(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var req schedule.UpdateRequest
	if err := s.decodeBody(c, &req, false); err != nil {
		return err
	}
	if err := s.checkPayload("params", req.Params); err != nil {
		return err
	}
	info, err := s.cfg.Schedules.Update(c.Request().Context(), id, req)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, info)
}

func (s *Server) deleteSchedule(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.cfg.Schedules.Delete(c.Request().Context(), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// toggleSchedule returns the handler of enable or disable. The body, if
// any, must be an empty JSON object.
func (s *Server) toggleSchedule(f func(ctx context.Context, id string) (*schedule.Info, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := pathParam(c, "id")
		if err != nil {
			return err
		}
		var empty struct{}
		if err := s.decodeBody(c, &empty, true); err != nil {
			return err
		}
		info, err := f(c.Request().Context(), id)
		if err != nil {
			return err
		}
		return reply(c, http.StatusOK, info)
	}
}

// schedulePath is the API path of a schedule, for the Location header.
func (s *Server) schedulePath(id string) string {
	prefix := s.cfg.Prefix
	if prefix == "/" {
		prefix = ""
	}
	return prefix + "/schedules/" + url.PathEscape(id)
}
