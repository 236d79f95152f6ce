package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

// The queue routes (docs/limits.md):
//
//	GET /queues           read     every queue that has limits
//	GET /queues/:name     read     → QUEUE_NOT_FOUND when none were set
//	PUT /queues/:name     manage   apiclient.QueueLimits → the queue
//
// Queues and their running counts span every namespace: a caller limited
// to namespaces is refused every route (403).

func (s *Server) addQueueRoutes(route routeFunc) {
	route(http.MethodGet, "/queues", s.listQueues, ActionRead, everyNamespace)
	route(http.MethodGet, "/queues/:name", s.getQueue, ActionRead, everyNamespace)
	route(http.MethodPut, "/queues/:name", s.setQueue, ActionManage, everyNamespace)
}

func (s *Server) listQueues(c echo.Context) error {
	if _, err := query(c, nil); err != nil {
		return err
	}
	qs, err := s.client.ListQueues(c.Request().Context())
	if err != nil {
		return err
	}
	out := &apiclient.QueueList{Queues: make([]*apiclient.Queue, len(qs))}
	for i, q := range qs {
		out.Queues[i] = wireQueue(q)
	}
	return reply(c, http.StatusOK, out)
}

func (s *Server) getQueue(c echo.Context) error {
	name, err := pathParam(c, "name")
	if err != nil {
		return err
	}
	if _, err := query(c, nil); err != nil {
		return err
	}
	q, err := s.client.GetQueue(c.Request().Context(), name)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, wireQueue(q))
}

func (s *Server) setQueue(c echo.Context) error {
	name, err := pathParam(c, "name")
	if err != nil {
		return err
	}
	var req apiclient.QueueLimits
	if err := s.decodeBody(c, &req, false); err != nil {
		return err
	}
	var l client.QueueLimits
	if req.MaxRunning != nil {
		if *req.MaxRunning <= 0 {
			return fmt.Errorf("%w: maxRunning must be positive, got %d (leave it out for no limit)", workflow.ErrInvalidLimit, *req.MaxRunning)
		}
		l.MaxRunning = *req.MaxRunning
	}
	if req.Rate != nil {
		if req.Rate.Limit <= 0 || req.Rate.Period <= 0 {
			return fmt.Errorf("%w: a rate needs a positive limit and period (leave it out for no limit)", workflow.ErrInvalidLimit)
		}
		l.Rate = workflow.RateLimit{Limit: req.Rate.Limit, Period: time.Duration(req.Rate.Period)}
	}
	q, err := s.client.SetQueueLimits(c.Request().Context(), name, l)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, wireQueue(q))
}

func wireQueue(q *client.QueueInfo) *apiclient.Queue {
	out := &apiclient.Queue{Name: q.Name, MaxRunning: q.MaxRunning, Running: q.Running, UpdatedAt: q.UpdatedAt}
	if q.Rate != nil {
		out.Rate = &apiclient.QueueRate{Limit: q.Rate.Limit, Period: dftype.Duration(q.Rate.Period)}
	}
	return out
}
