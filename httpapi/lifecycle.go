package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/backoff"
	"github.com/duraflow/duraflow/workflow"
)

// The lifecycle event routes (the log of what happened to instances, see
// docs/events.md; not the workflow events sent to instances):
//
//	GET /events?workflow=&instance=&worker=&type=&since=&until=&pageSize=&cursor=   read, every namespace
//	GET /events/stream?workflow=&instance=&worker=&type=&after=                     read, server-sent events
//	GET /workflows/:name/instances/:id/lifecycle?type=&since=&until=&pageSize=&cursor=   read
//
// type may be given several times. since and until are RFC 3339 times
// (since <= at < until). The two routes of every namespace refuse a token
// limited to namespaces (403). A bad filter, time, cursor or id is 400
// INVALID_REQUEST (an id: INVALID_INSTANCE_ID).
//
// The stream sends each event as an SSE message whose id is the event's
// and whose data is its JSON; it resumes after the Last-Event-ID header
// (or after=), else starts after the newest event. It reads the log when
// Config.LifecycleWakeups signals (the notifications the runners use) and
// at least every StreamPollInterval, sends each event once every lower row
// of the log has been read (db.LifecycleFollows; or after StreamGapGrace),
// sends a comment line every StreamHeartbeat, reads
// one page at a time (bounded memory) and ends when the client goes away.

// StreamPollInterval is how often GET /events/stream looks for new events.
const StreamPollInterval = 500 * time.Millisecond

// StreamGapGrace is how long GET /events/stream holds back the events
// after an id it has not read, waiting for the transaction that took it
// to commit; past it, the id is taken as one that never comes (its
// transaction rolled back).
const StreamGapGrace = 5 * time.Second

// StreamHeartbeat is how often GET /events/stream sends a comment line
// when it has nothing to send, so proxies keep the connection.
const StreamHeartbeat = 15 * time.Second

// addLifecycleRoutes registers the lifecycle event routes with route, the
// registration function of New.
func (s *Server) addLifecycleRoutes(route routeFunc) {
	route(http.MethodGet, "/events", s.listLifecycle, ActionRead, everyNamespace)
	route(http.MethodGet, "/events/stream", s.streamLifecycle, ActionRead, everyNamespace)
	route(http.MethodGet, "/workflows/:name/instances/:id/lifecycle", s.instanceLifecycle, ActionRead)
}

// lifecycleFilters reads the filters common to the lifecycle routes.
func (s *Server) lifecycleFilters(q url.Values, p *client.LifecycleListParams, instance bool) error {
	p.Types = q["type"]
	var err error
	if p.Since, err = queryTime(q, "since"); err != nil {
		return err
	}
	if p.Until, err = queryTime(q, "until"); err != nil {
		return err
	}
	if instance {
		return nil
	}
	p.WorkflowName, p.InstanceID, p.WorkerID = q.Get("workflow"), q.Get("instance"), q.Get("worker")
	if max := s.cfg.Limits.MaxWorkflowNameLength; len(p.WorkflowName) > max {
		return fmt.Errorf("%w: workflow name longer than %d bytes", workflow.ErrInvalidRequest, max)
	}
	if p.InstanceID != "" {
		if err := s.checkID(p.InstanceID); err != nil {
			return err
		}
	}
	return nil
}

// queryTime parses an optional RFC 3339 time parameter.
func queryTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s must be an RFC 3339 time, got %q", workflow.ErrInvalidRequest, name, v)
	}
	return t, nil
}

func (s *Server) listLifecycle(c echo.Context) error {
	q, err := query(c, []string{"workflow", "instance", "worker", "type", "since", "until", "pageSize", "cursor"}, "type")
	if err != nil {
		return err
	}
	p := client.LifecycleListParams{Cursor: q.Get("cursor")}
	if err := s.lifecycleFilters(q, &p, false); err != nil {
		return err
	}
	if p.PageSize, err = s.pageSize(q, "pageSize", 0); err != nil {
		return err
	}
	res, err := s.client.ListLifecycleEvents(c.Request().Context(), p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, res)
}

func (s *Server) instanceLifecycle(c echo.Context) error {
	name, id, err := s.instanceRef(c)
	if err != nil {
		return err
	}
	q, err := query(c, []string{"type", "since", "until", "pageSize", "cursor"}, "type")
	if err != nil {
		return err
	}
	p := client.LifecycleListParams{Cursor: q.Get("cursor")}
	if err := s.lifecycleFilters(q, &p, true); err != nil {
		return err
	}
	if p.PageSize, err = s.pageSize(q, "pageSize", 0); err != nil {
		return err
	}
	res, err := s.scoped(c).InstanceLifecycle(c.Request().Context(), name, id, p)
	if err != nil {
		return err
	}
	return reply(c, http.StatusOK, res)
}

func (s *Server) streamLifecycle(c echo.Context) error {
	q, err := query(c, []string{"workflow", "instance", "worker", "type", "after"}, "type")
	if err != nil {
		return err
	}
	var p client.LifecycleListParams
	if err := s.lifecycleFilters(q, &p, false); err != nil {
		return err
	}
	after := q.Get("after")
	if h := c.Request().Header.Get("Last-Event-ID"); h != "" {
		after = h // a reconnecting EventSource resumes where it was
	}
	p.AfterID = -1 // the newest event, unless a resume point is given
	if after != "" {
		if p.AfterID, err = strconv.ParseInt(after, 10, 64); err != nil || p.AfterID < 0 {
			return fmt.Errorf("%w: the event id to resume after must be a non-negative integer, got %q", workflow.ErrInvalidRequest, after)
		}
	}
	ctx := c.Request().Context()
	// Check the filters with one empty read before the answer starts, so
	// that bad input is a 400 and not a broken stream.
	check := p
	check.PageSize, check.AfterID = 1, max(p.AfterID, 0)
	if _, err := s.client.ListLifecycleEvents(ctx, check); err != nil {
		return err
	}
	if p.AfterID < 0 {
		if p.AfterID, err = s.client.LastLifecycleEventID(ctx); err != nil {
			return err
		}
	}
	w := c.Response()
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives WriteTimeout
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(": duraflow lifecycle events\n\n"))
	_ = rc.Flush()
	// The stream reads every event in id order and filters here, so that it
	// sees the ids it has not got yet: a Postgres transaction may commit
	// after one that took a later row, and an event is sent only once
	// every lower row has been read (db.LifecycleFollows), or
	// StreamGapGrace has passed (a row a rolled-back transaction took
	// never comes).
	filter := p
	read := client.LifecycleListParams{AfterID: p.AfterID, PageSize: s.cfg.Limits.MaxPageSize}
	var wake <-chan struct{}
	if s.cfg.LifecycleWakeups != nil {
		ch, stop := s.cfg.LifecycleWakeups()
		defer stop()
		wake = ch
	}
	poll := time.NewTicker(cmp.Or(s.cfg.LifecyclePollInterval, StreamPollInterval))
	defer poll.Stop()
	lastWrite := time.Now()
	var (
		buf      bytes.Buffer
		gapSince time.Time // when the first id missing after read.AfterID was seen
		outage   *backoff.Backoff
	)
	for {
		page, err := s.client.ListLifecycleEvents(ctx, read)
		if err != nil && errors.Is(err, db.ErrUnavailable) && ctx.Err() == nil {
			// The stream outlives an outage of the database: an
			// EventSource would not reconnect after the 503 a new request
			// meets meanwhile. It reads again with backoff, and keeps the
			// connection alive with heartbeats.
			if outage == nil {
				outage = backoff.Loop.New()
				s.log.DebugContext(ctx, "httpapi: lifecycle stream: database unavailable; retrying with backoff", "error", err)
			}
			if time.Since(lastWrite) >= StreamHeartbeat {
				if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil || rc.Flush() != nil {
					return nil
				}
				lastWrite = time.Now()
			}
			if !backoff.Sleep(ctx, min(outage.Next(), StreamHeartbeat)) {
				return nil
			}
			continue
		}
		outage = nil
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.WarnContext(ctx, "httpapi: streaming lifecycle events", "error", err)
			return nil // the answer has started: end the stream
		}
		sent, held := false, false
		for _, e := range page.Events {
			if !db.LifecycleFollows(read.AfterID, e.ID) {
				if gapSince.IsZero() {
					gapSince = time.Now()
				}
				if time.Since(gapSince) < StreamGapGrace {
					held = true
					break // wait for the missing id
				}
			}
			gapSince = time.Time{}
			read.AfterID = e.ID
			if !lifecycleMatch(&filter, e) {
				continue
			}
			buf.Reset()
			data, err := json.Marshal(e)
			if err != nil {
				return nil
			}
			fmt.Fprintf(&buf, "id: %d\nevent: lifecycle\ndata: %s\n\n", e.ID, data)
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil // the client went away
			}
			sent = true
		}
		if sent {
			if err := rc.Flush(); err != nil {
				return nil
			}
			lastWrite = time.Now()
		}
		if page.NextCursor != "" && !held {
			continue // more at once
		}
		if time.Since(lastWrite) >= StreamHeartbeat {
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			lastWrite = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C:
		}
	}
}

// lifecycleMatch reports whether e passes the stream's filters (p's
// workflow, instance, worker and types).
func lifecycleMatch(p *client.LifecycleListParams, e *dftype.LifecycleEvent) bool {
	if p.WorkflowName != "" && e.WorkflowName != p.WorkflowName {
		return false
	}
	if p.InstanceID != "" && e.InstanceID != p.InstanceID {
		return false
	}
	if p.WorkerID != "" && e.WorkerID != p.WorkerID {
		return false
	}
	return len(p.Types) == 0 || slices.Contains(p.Types, e.Type)
}
