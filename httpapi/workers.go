package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// The worker routes (the registry of runners, see client.ListWorkers):
//
//	GET  /workers?status=&queue=&pageSize=&cursor=   read   (limit= is a deprecated alias of pageSize, for one more release)
//	GET  /workers/:id                                read
//	POST /workers/:id/drain                          manage → the worker, draining
//
// A drain needs ActionManage, as pausing or terminating instances does: it
// moves work, and changes no data. An unknown id is 404 WORKER_NOT_FOUND, a
// drain of an offline worker 409 WORKER_OFFLINE. Workers serve every
// namespace: a caller limited to namespaces is refused every route (403).

// addWorkerRoutes registers the worker routes with route, the registration
// function of New.
func (s *Server) addWorkerRoutes(route routeFunc) {
	route(http.MethodGet, "/workers", s.listWorkers, ActionRead, everyNamespace)
	route(http.MethodGet, "/workers/:id", s.getWorker, ActionRead, everyNamespace)
	route(http.MethodPost, "/workers/:id/drain", s.drainWorker, ActionManage, everyNamespace)
}

func (s *Server) listWorkers(c echo.Context) error {
	q, err := query(c, []string{"status", "queue", "pageSize", "limit", "cursor"})
	if err != nil {
		return err
	}
	p := client.WorkerListParams{Status: dftype.WorkerStatus(q.Get("status")), Queue: q.Get("queue"), Cursor: q.Get("cursor")}
	if q.Has("pageSize") && q.Has("limit") {
		return fmt.Errorf("%w: give pageSize or limit, not both", workflow.ErrInvalidRequest)
	}
	size := "pageSize"
	if q.Has("limit") {
		size = "limit"
	}
	if p.PageSize, err = s.pageSize(q, size, 0); err != nil {
		return err
	}
	res, err := s.client.ListWorkers(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, res)
}

func (s *Server) getWorker(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	if _, err := query(c, nil); err != nil {
		return err
	}
	info, err := s.client.GetWorker(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, info)
}

func (s *Server) drainWorker(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var empty struct{}
	if err := s.decodeBody(c, &empty, true); err != nil {
		return err
	}
	info, err := s.client.DrainWorker(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, info)
}
