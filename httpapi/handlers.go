package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/paging"
	"github.com/duraflow/duraflow/workflow"
)

// DefaultHistoryPageSize is the page size of GET …/history when the request
// names none; MaxPageSize bounds every page size.
const (
	DefaultHistoryPageSize = 100
	MaxPageSize            = paging.MaxPageSize
)

func (s *Server) healthz(c echo.Context) error {
	return reply(c, http.StatusOK, apiclient.HealthStatus{Status: "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(c.Request().Context()); err != nil {
			return fmt.Errorf("%w: %v", apiclient.ErrNotReady, err)
		}
	}
	return reply(c, http.StatusOK, apiclient.HealthStatus{Status: "ok"})
}

func (s *Server) listWorkflows(c echo.Context) error {
	if _, err := query(c, nil); err != nil {
		return err
	}
	out := apiclient.WorkflowList{Workflows: []apiclient.WorkflowSummary{}}
	var latest map[string]string
	if s.cfg.Flows != nil {
		var err error
		if latest, err = s.cfg.Flows.LatestVersions(c.Request().Context()); err != nil {
			return err
		}
	}
	for _, n := range s.client.WorkflowNames() {
		w := apiclient.WorkflowSummary{Name: n, Kind: apiclient.KindGo}
		if s.cfg.Flows != nil && s.cfg.Flows.IsFlow(n) {
			w.Kind, w.Version = apiclient.KindFlow, latest[n]
		}
		out.Workflows = append(out.Workflows, w)
	}
	return reply(c, http.StatusOK, out)
}

func (s *Server) listInstances(c echo.Context) error {
	name, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: empty workflow name", workflow.ErrInvalidWorkflowName)
	}
	return s.list(c, name)
}

// listAllInstances lists the instances of every workflow stored, registered
// here or not, in one order (newest update first) with one cursor.
func (s *Server) listAllInstances(c echo.Context) error { return s.list(c, "") }

// list answers a list of the instances of workflow name, or of every
// workflow for "".
func (s *Server) list(c echo.Context, name string) error {
	q, err := query(c, []string{"status", "pageSize", "cursor", "queue"}, "status")
	if err != nil {
		return err
	}
	p := client.ListParams{WorkflowName: name, Cursor: q.Get("cursor"), Queue: q.Get("queue")}
	if p.PageSize, err = s.pageSize(q, "pageSize", 0); err != nil {
		return err
	}
	for _, v := range q["status"] {
		for st := range strings.SplitSeq(v, ",") {
			if st = strings.TrimSpace(st); st != "" {
				p.Statuses = append(p.Statuses, dftype.InstanceStatus(st))
			}
		}
	}
	res, err := s.scoped(c).List(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, apiclient.NewInstancePage(res))
}

func (s *Server) createInstance(c echo.Context) error {
	name, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	var req apiclient.CreateRequest
	if err := s.decodeBody(c, &req, true); err != nil {
		return err
	}
	if err := s.checkCreate(-1, &req); err != nil {
		return err
	}
	prov := s.provenance(c, dftype.TriggerAPI, http.MethodPost+" "+c.Path())
	info, err := s.creating(c).Create(c.Request().Context(), name, dftype.CreateRequest{
		ID: req.ID, Params: req.Params, Metadata: prov.Metadata(),
		Queue: req.Queue, Priority: req.Priority, DedupeKey: req.DedupeKey, Deadline: req.DeadlineTime(),
	})
	if err != nil {
		return err
	}
	c.Response().Header().Set("Location", s.instancePath(info))
	if info.Deduplicated {
		// Nothing was created: the answer is the instance that holds the key.
		return reply(c, http.StatusOK, apiclient.NewInstance(info))
	}
	return reply(c, http.StatusCreated, apiclient.NewInstance(info))
}

func (s *Server) createBatch(c echo.Context) error {
	name, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	var req apiclient.CreateBatchRequest
	if err := s.decodeBody(c, &req, false); err != nil {
		return err
	}
	if max := s.cfg.Limits.MaxBatchSize; len(req.Instances) > max {
		return fmt.Errorf("%w: a batch of %d instances; the limit is %d", workflow.ErrInvalidRequest, len(req.Instances), max)
	}
	for i := range req.Instances {
		if err := s.checkCreate(i, &req.Instances[i]); err != nil {
			return err
		}
	}
	meta := s.provenance(c, dftype.TriggerAPI, http.MethodPost+" "+c.Path()).Metadata()
	reqs := make([]dftype.CreateRequest, len(req.Instances))
	for i, r := range req.Instances {
		reqs[i] = dftype.CreateRequest{
			ID: r.ID, Params: r.Params, Metadata: meta,
			Queue: r.Queue, Priority: r.Priority, DedupeKey: r.DedupeKey, Deadline: r.DeadlineTime(),
		}
	}
	created, err := s.creating(c).CreateBatch(c.Request().Context(), name, reqs)
	if err != nil {
		return err
	}
	return reply(c, http.StatusCreated, apiclient.InstanceBatch{Instances: apiclient.NewInstances(created)})
}

func (s *Server) getInstance(c echo.Context) error {
	name, id, err := s.instanceRef(c)
	if err != nil {
		return err
	}
	return s.get(c, name, id)
}

// getBatchInstance is GET of the instance whose id is "batch", whose path
// echo routes to the static batch segment rather than to :id.
func (s *Server) getBatchInstance(c echo.Context) error {
	name, err := s.workflowParam(c)
	if err != nil {
		return err
	}
	return s.get(c, name, "batch")
}

func (s *Server) get(c echo.Context, name, id string) error {
	if _, err := query(c, nil); err != nil {
		return err
	}
	info, err := s.scoped(c).Get(c.Request().Context(), name, id)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, apiclient.NewInstance(info))
}

// change returns the handler of a life-cycle route: pause, resume, terminate
// or restart. The body, if any, must be an empty JSON object.
func (s *Server) change(f func(cl *client.Client, ctx context.Context, workflowName, id string) (*dftype.InstanceInfo, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		name, id, err := s.instanceRef(c)
		if err != nil {
			return err
		}
		var empty struct{}
		if err := s.decodeBody(c, &empty, true); err != nil {
			return err
		}
		info, err := f(s.scoped(c), c.Request().Context(), name, id)
		if err != nil {
			return err
		}
		return reply(c, http.StatusOK, apiclient.NewInstance(info))
	}
}

func (s *Server) sendEvent(c echo.Context) error {
	name, id, err := s.instanceRef(c)
	if err != nil {
		return err
	}
	var req apiclient.SendEventRequest
	if err := s.decodeBody(c, &req, false); err != nil {
		return err
	}
	if err := s.cfg.Limits.CheckEventType(req.Type); err != nil {
		return err
	}
	if err := s.checkPayload("the event payload", req.Payload); err != nil {
		return err
	}
	cl := s.scoped(c)
	delivery, err := cl.SendEventDelivery(c.Request().Context(), name, id, req.Type, req.Payload)
	if err != nil {
		return err
	}
	// The event is stored: the answer is the instance's status from now on
	// (a workflow woken by the event may have moved it on already).
	info, err := cl.Get(c.Request().Context(), name, id)
	if err != nil {
		return err
	}
	out := apiclient.EventSent{Status: apiclient.DetailsOf(info), Delivery: apiclient.EventBuffered, Step: delivery.Step}
	if delivery.Delivered {
		out.Delivery = apiclient.EventDelivered
	}
	if !s.mayRead(c) {
		// The events scope sends events and reads nothing: the instance's
		// error, output and steps are for a caller that may read it.
		out.Status.Error, out.Status.Output, out.Step = nil, nil, ""
	}
	return reply(c, http.StatusAccepted, out)
}

// mayRead reports whether the request may also read instances
// (ActionRead): always without authentication (the request reached the
// route from a loopback host); with tokens when the token that authorized
// it has the scope; else when the AuthorizeFunc allows ActionRead too.
func (s *Server) mayRead(c echo.Context) bool {
	switch {
	case s.authorize == nil:
		return true
	case s.tokens != nil:
		scopes, _ := c.Get(tokenScopesKey).([]Action)
		return slices.Contains(scopes, ActionRead)
	default:
		return s.authorize(c.Request(), ActionRead) == nil
	}
}

func (s *Server) history(c echo.Context) error {
	name, id, err := s.instanceRef(c)
	if err != nil {
		return err
	}
	q, err := query(c, []string{"run", "pageSize", "cursor"})
	if err != nil {
		return err
	}
	p := client.HistoryParams{Cursor: q.Get("cursor")}
	if p.Run, err = queryInt(q, "run", 0, 0, 1<<31-1); err != nil {
		return err
	}
	if p.PageSize, err = s.pageSize(q, "pageSize", DefaultHistoryPageSize); err != nil {
		return err
	}
	h, err := s.scoped(c).History(c.Request().Context(), name, id, p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, apiclient.NewHistoryPage(h))
}

func (s *Server) tick(c echo.Context) error {
	var req apiclient.TickRequest
	if err := s.decodeBody(c, &req, true); err != nil {
		return err
	}
	if req.MaxInstances < 0 || req.MaxInstances > MaxTickInstances {
		return fmt.Errorf("%w: maxInstances must be between 0 and %d, got %d", workflow.ErrInvalidRequest, MaxTickInstances, req.MaxInstances)
	}
	if req.MaxSteps < 0 {
		return fmt.Errorf("%w: maxSteps must not be negative, got %d", workflow.ErrInvalidRequest, req.MaxSteps)
	}
	select {
	case s.tickSlots <- struct{}{}:
		defer func() { <-s.tickSlots }()
	default:
		return fmt.Errorf("%w; try again later", apiclient.ErrTickBusy)
	}
	// A tick may run longer than WriteTimeout: no write deadline while it
	// works (over HTTP/2 a passing one resets the stream at once), then
	// WriteTimeout for its answer.
	rc := http.NewResponseController(c.Response())
	_ = rc.SetWriteDeadline(time.Time{})
	n, err := s.cfg.Tick(c.Request().Context(), req.MaxInstances, req.MaxSteps)
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if err != nil {
		return fmt.Errorf("ticking: %w", err)
	}
	return reply(c, http.StatusOK, apiclient.TickResult{Processed: n, MaxInstances: req.MaxInstances, MaxSteps: req.MaxSteps})
}

// instancePath is the API path of an instance, for the Location header.
func (s *Server) instancePath(info *dftype.InstanceInfo) string {
	prefix := s.cfg.Prefix
	if prefix == "/" {
		prefix = ""
	}
	return prefix + "/workflows/" + url.PathEscape(info.WorkflowName) + "/instances/" + url.PathEscape(info.ID)
}
