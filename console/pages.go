package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// pageSize is the length of the console's list pages.
const pageSize = 50

// throughputMax bounds the ended instances one overview counts (one
// index-backed query, db.StatsStore.StatsEnded): counts at the bound are
// shown with a "+".
const throughputMax = 100000

// statuses are the instance statuses in the order the console shows them.
var statuses = []dftype.InstanceStatus{
	dftype.StatusQueued, dftype.StatusRunning, dftype.StatusWaiting, dftype.StatusWaitingForPause,
	dftype.StatusPaused, dftype.StatusComplete, dftype.StatusErrored, dftype.StatusTerminated,
}

// scoped is the management client of the request's namespace.
func (c *Console) scoped(rq *request) *client.Client { return c.cfg.Client.Namespace(rq.namespace) }

// pageSize is the length of a page the console reads: want, within the
// API's Limits.MaxPageSize.
func (c *Console) pageSize(want int) int { return c.cfg.Limits.PageSize(want) }

// instanceRef returns the workflow name and instance id of the request's
// path, held to the API's limits.
func (c *Console) instanceRef(rq *request) (wf, id string, err error) {
	wf, id = rq.PathValue("workflow"), rq.PathValue("id")
	if err := c.cfg.Limits.CheckWorkflowName(wf); err != nil {
		return "", "", err
	}
	if err := c.cfg.Limits.CheckInstanceID(id); err != nil {
		return "", "", err
	}
	return wf, id, nil
}

// query reads the console's query parameters: each at most once.
func query(rq *request, names ...string) (url.Values, error) {
	q := rq.URL.Query()
	for k, v := range q {
		if len(v) > 1 {
			return nil, fmt.Errorf("%w: query parameter %q is given %d times", workflow.ErrInvalidRequest, k, len(v))
		}
		if k != "namespace" && !slices.Contains(names, k) {
			return nil, fmt.Errorf("%w: unknown query parameter %q", workflow.ErrInvalidRequest, k)
		}
	}
	return q, nil
}

// ---- overview ----

type workflowRow struct {
	Name    string
	Kind    string // "go" or "flow"
	Version string // a flow's latest version
	Counts  map[dftype.InstanceStatus]int64
	Total   int64
	// Ended counts the instances that ended in the last hour (complete,
	// errored, terminated); AtLeast marks a count cut at throughputMax.
	Ended, Completed, Errored int64
	AtLeast                   bool
}

type bucket struct {
	Label     string
	Completed int64
	Errored   int64
	Height    int64 // of the completed bar, in px (0 to 100)
	ErrHeight int64
	Y, ErrY   int64
}

type overviewView struct {
	Statuses   []dftype.InstanceStatus
	Rows       []*workflowRow
	HasCounts  bool
	CountsNote string
	Buckets    []*bucket
	Ended      int64
	AtLeast    bool
	// NoThroughput says that the server reads no counts (Config.Stats
	// is nil): the throughput is not shown.
	NoThroughput bool
	Since, Now   time.Time
	TasksReady   int64
	TasksLeased  int64
	Workers      int64
}

// overview shows the counts by status per workflow and the instances that
// ended in the last hour, in five-minute buckets.
func (c *Console) overview(w http.ResponseWriter, rq *request) {
	if _, err := query(rq); err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	ctx := rq.Context()
	rows, err := c.workflowRows(rq)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	byName := map[string]*workflowRow{}
	for _, row := range rows {
		byName[row.Name] = row
	}
	v := &overviewView{Statuses: statuses, Rows: rows, Now: c.cfg.Clock.Now().UTC()}
	v.Since = v.Now.Add(-time.Hour)
	switch p := rq.sess.principal; {
	case c.cfg.Stats == nil:
		v.CountsNote = "Counts are not available on this server."
	case !p.CanEveryNamespace(rq.Request, httpapi.ActionMetrics):
		// The counts span every namespace, as the metrics do.
		v.CountsNote = "Counts by status span every namespace: they need a token with the metrics scope that is not limited to namespaces."
	default:
		st, err := c.cfg.Stats.StatsGet(ctx, &db.StatsGetParams{Now: v.Now})
		if err != nil {
			c.renderError(w, rq.Request, rq.sess, fmt.Errorf("reading counts: %w", err))
			return
		}
		v.HasCounts, v.TasksReady, v.TasksLeased, v.Workers = true, st.TasksReady, st.TasksLeased, st.WorkersOnline
		for _, sc := range st.Instances {
			row := byName[sc.WorkflowName]
			if row == nil {
				row = &workflowRow{Name: sc.WorkflowName, Kind: "unregistered"}
				byName[sc.WorkflowName] = row
				v.Rows = append(v.Rows, row)
			}
			if row.Counts == nil {
				row.Counts = map[dftype.InstanceStatus]int64{}
			}
			row.Counts[sc.Status] += sc.Count
			row.Total += sc.Count
		}
	}
	const slots = 12
	for i := range slots {
		v.Buckets = append(v.Buckets, &bucket{Label: v.Since.Add(time.Duration(i) * 5 * time.Minute).Format("15:04")})
	}
	if c.cfg.Stats == nil {
		v.NoThroughput = true
	} else {
		// One index-backed count of the session's namespace: no instance
		// is read, let alone its payloads.
		ended, err := c.cfg.Stats.StatsEnded(ctx, &db.StatsEndedParams{
			Namespace: rq.namespace, Since: v.Since, Until: v.Now, Bucket: 5 * time.Minute, Max: throughputMax,
		})
		if err != nil {
			c.renderError(w, rq.Request, rq.sess, fmt.Errorf("counting ended instances: %w", err))
			return
		}
		for _, e := range ended {
			row := byName[e.WorkflowName]
			if row == nil {
				row = &workflowRow{Name: e.WorkflowName, Kind: "unregistered"}
				byName[e.WorkflowName] = row
				v.Rows = append(v.Rows, row)
			}
			i := min(max(e.Bucket, 0), slots-1)
			row.Ended += e.Count
			if e.Status == dftype.StatusComplete {
				row.Completed += e.Count
				v.Buckets[i].Completed += e.Count
			} else {
				row.Errored += e.Count
				v.Buckets[i].Errored += e.Count
			}
			v.Ended += e.Count
		}
		if v.Ended >= throughputMax {
			v.AtLeast = true
			for _, row := range v.Rows {
				row.AtLeast = true
			}
		}
	}
	highest := int64(1)
	for _, b := range v.Buckets {
		highest = max(highest, b.Completed+b.Errored)
	}
	for _, b := range v.Buckets {
		b.Height, b.ErrHeight = b.Completed*100/highest, b.Errored*100/highest
		b.Y = 110 - b.Height
		b.ErrY = b.Y - b.ErrHeight
	}
	sort.Slice(v.Rows, func(i, j int) bool { return v.Rows[i].Name < v.Rows[j].Name })
	c.render(w, rq, "overview", "Overview", v)
}

// workflowRows lists the registered workflows, flows marked with their
// latest version.
func (c *Console) workflowRows(rq *request) ([]*workflowRow, error) {
	var latest map[string]string
	if c.cfg.Flows != nil {
		var err error
		if latest, err = c.cfg.Flows.LatestVersions(rq.Context()); err != nil {
			return nil, err
		}
	}
	var rows []*workflowRow
	for _, n := range c.cfg.Client.WorkflowNames() {
		row := &workflowRow{Name: n, Kind: "go"}
		if c.cfg.Flows != nil && c.cfg.Flows.IsFlow(n) {
			row.Kind, row.Version = "flow", latest[n]
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ---- workflows ----

// workflows lists the workflows, Go and flow.
func (c *Console) workflows(w http.ResponseWriter, rq *request) {
	if _, err := query(rq); err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	rows, err := c.workflowRows(rq)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	c.render(w, rq, "workflows", "Workflows", rows)
}

type workflowView struct {
	Name       string
	Kind       string
	Versions   []*flow.Info
	Selected   *flow.Info
	Definition string
}

// workflowPage shows one workflow: a flow's versions and the definition of
// the chosen one (the latest by default).
func (c *Console) workflowPage(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "version")
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	name := rq.PathValue("name")
	if err := c.cfg.Limits.CheckWorkflowName(name); err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	if !slices.Contains(c.cfg.Client.WorkflowNames(), name) {
		c.renderError(w, rq.Request, rq.sess, fmt.Errorf("%w: %q", workflow.ErrWorkflowNotFound, name))
		return
	}
	v := &workflowView{Name: name, Kind: "go"}
	if c.cfg.Flows != nil && c.cfg.Flows.IsFlow(name) {
		v.Kind = "flow"
		list, err := c.cfg.Flows.Versions(rq.Context(), name)
		if err != nil {
			c.renderError(w, rq.Request, rq.sess, err)
			return
		}
		v.Versions = list.Versions
		if v.Selected, err = c.cfg.Flows.Get(rq.Context(), name, q.Get("version")); err != nil {
			c.renderError(w, rq.Request, rq.sess, err)
			return
		}
		v.Definition = prettyJSON(v.Selected.Definition)
	} else if q.Has("version") {
		c.renderError(w, rq.Request, rq.sess, fmt.Errorf("%w: %q is a Go workflow: it has no versions", workflow.ErrInvalidRequest, name))
		return
	}
	c.render(w, rq, "workflow", name, v)
}

// ---- instances ----

type instancesView struct {
	Workflows  []string
	Statuses   []dftype.InstanceStatus
	Workflow   string
	Status     string
	ID         string
	Instances  []*dftype.InstanceInfo
	NextCursor string
	Searched   bool
}

// instances lists instances (newest update first) with a workflow and a
// status filter and cursor pages; an id search opens the instance, or
// lists the instances of that id across workflows.
func (c *Console) instances(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "workflow", "status", "id", "cursor")
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v := &instancesView{
		Workflows: c.cfg.Client.WorkflowNames(), Statuses: statuses,
		Workflow: q.Get("workflow"), Status: q.Get("status"), ID: strings.TrimSpace(q.Get("id")),
		Instances: []*dftype.InstanceInfo{},
	}
	if v.Workflow != "" {
		if err := c.cfg.Limits.CheckWorkflowName(v.Workflow); err != nil {
			c.renderError(w, rq.Request, rq.sess, err)
			return
		}
	}
	sc := c.scoped(rq)
	if v.ID != "" {
		if err := c.cfg.Limits.CheckInstanceID(v.ID); err != nil {
			c.renderError(w, rq.Request, rq.sess, err)
			return
		}
		v.Searched = true
		names := v.Workflows
		if v.Workflow != "" {
			names = []string{v.Workflow}
		}
		for _, n := range names {
			info, err := sc.Get(rq.Context(), n, v.ID)
			if errors.Is(err, workflow.ErrInstanceNotFound) {
				continue
			}
			if err != nil {
				c.renderError(w, rq.Request, rq.sess, err)
				return
			}
			v.Instances = append(v.Instances, info)
		}
		if len(v.Instances) == 1 {
			http.Redirect(w, rq.Request, instanceURL(v.Instances[0], rq.namespace), http.StatusSeeOther)
			return
		}
		c.render(w, rq, "instances", "Instances", v)
		return
	}
	// The list shows no params, output or error message: none is read.
	p := client.ListParams{WorkflowName: v.Workflow, Cursor: q.Get("cursor"), PageSize: c.pageSize(pageSize), OmitPayloads: true}
	if v.Status != "" {
		p.Statuses = []dftype.InstanceStatus{dftype.InstanceStatus(v.Status)}
	}
	res, err := sc.List(rq.Context(), p)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v.Instances, v.NextCursor = res.Instances, res.NextCursor
	c.render(w, rq, "instances", "Instances", v)
}

// instanceURL is the console page of an instance.
func instanceURL(in *dftype.InstanceInfo, namespace string) string {
	u := Path + "/instances/" + url.PathEscape(in.WorkflowName) + "/" + url.PathEscape(in.ID)
	if namespace != "" && namespace != workflow.DefaultNamespace {
		u += "?namespace=" + url.QueryEscape(namespace)
	}
	return u
}

// instanceView is everything the instance page shows. loadInstance gathers
// it in one place, so a section is added there.
type instanceView struct {
	Info      *dftype.InstanceInfo
	History   *client.History
	Run       int
	Runs      []int
	Timeline  *timeline
	Truncated bool
	Params    string
	Output    string
	Metadata  string
	Events    []*eventRow
	// Lifecycle are the instance's newest lifecycle events (every run's),
	// newest first; MoreLifecycle says that older ones exist (the
	// lifecycle page lists them all), NoLifecycle that the store keeps no
	// lifecycle log.
	Lifecycle     []*dftype.LifecycleEvent
	MoreLifecycle bool
	NoLifecycle   bool
	CanManage     bool
	CanEvents     bool
	Actions       []string
	Terminal      bool
	NamespaceQ    string
}

type eventRow struct {
	*client.EventInfo
	PayloadText string
}

// historyPageSize bounds the steps and events the instance page reads.
const historyPageSize = 1000

// loadInstance gathers the instance page's data: the instance, the run's
// history (steps with attempts, running steps, received events), its
// timeline, its newest lifecycle events, and what the session may do to
// it.
func (c *Console) loadInstance(rq *request, wf, id string, run int) (*instanceView, error) {
	sc := c.scoped(rq)
	h, err := sc.History(rq.Context(), wf, id, client.HistoryParams{Run: run, PageSize: c.pageSize(historyPageSize)})
	if err != nil {
		return nil, err
	}
	info := h.Instance
	v := &instanceView{
		Info: info, History: h, Run: h.RunNumber, Truncated: h.NextCursor != "",
		Params: prettyJSON(info.Params), Output: prettyJSON(info.Output), Metadata: prettyJSON(info.Metadata),
		CanManage: rq.can(httpapi.ActionManage), CanEvents: rq.can(httpapi.ActionEvents),
		Terminal: info.Status.Terminal(),
	}
	for r := info.RunNumber; r >= 1; r-- {
		v.Runs = append(v.Runs, r)
	}
	if rq.namespace != workflow.DefaultNamespace {
		v.NamespaceQ = rq.namespace
	}
	for _, e := range h.Events {
		v.Events = append(v.Events, &eventRow{EventInfo: e, PayloadText: prettyJSON(e.Payload)})
	}
	v.Lifecycle, v.MoreLifecycle, err = sc.NewestInstanceLifecycle(rq.Context(), wf, id, c.pageSize(pageSize))
	switch {
	case errors.Is(err, client.ErrNoLifecycleLog):
		v.NoLifecycle = true
	case err != nil:
		return nil, err
	}
	if v.CanManage {
		v.Actions = availableActions(info.Status)
	}
	v.Timeline = buildTimeline(info, h, c.cfg.Clock.Now())
	return v, nil
}

// availableActions are the management actions that make sense for an
// instance of status s.
func availableActions(s dftype.InstanceStatus) []string {
	switch {
	case s.Terminal():
		return []string{"restart"}
	case s == dftype.StatusPaused:
		return []string{"resume", "terminate", "restart"}
	default:
		return []string{"pause", "terminate", "restart"}
	}
}

// instancePage shows one instance.
func (c *Console) instancePage(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "run")
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	run := 0
	if s := q.Get("run"); s != "" {
		if run, err = strconv.Atoi(s); err != nil || run < 1 {
			c.renderError(w, rq.Request, rq.sess, fmt.Errorf("%w: run must be a positive number", workflow.ErrInvalidRequest))
			return
		}
	}
	wf, id, err := c.instanceRef(rq)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v, err := c.loadInstance(rq, wf, id, run)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	c.render(w, rq, "instance", v.Info.WorkflowName+" / "+v.Info.ID, v)
}

type lifecycleView struct {
	WorkflowName string
	ID           string
	Events       []*dftype.LifecycleEvent
	NextCursor   string
	NoLog        bool
	NamespaceQ   string
}

// instanceLifecycle lists every lifecycle event of an instance, every
// run's, oldest first, a page at a time.
func (c *Console) instanceLifecycle(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "cursor")
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	wf, id, err := c.instanceRef(rq)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v := &lifecycleView{WorkflowName: wf, ID: id}
	if rq.namespace != workflow.DefaultNamespace {
		v.NamespaceQ = rq.namespace
	}
	res, err := c.scoped(rq).InstanceLifecycle(rq.Context(), v.WorkflowName, v.ID, client.LifecycleListParams{PageSize: c.pageSize(pageSize), Cursor: q.Get("cursor")})
	switch {
	case errors.Is(err, client.ErrNoLifecycleLog):
		v.NoLog = true
	case err != nil:
		c.renderError(w, rq.Request, rq.sess, err)
		return
	default:
		v.Events, v.NextCursor = res.Events, res.NextCursor
	}
	c.render(w, rq, "lifecycle", v.WorkflowName+" / "+v.ID+" · lifecycle", v)
}

// actionScopes are the actions of the instance page and the scope each
// needs.
var actionScopes = map[string]httpapi.Action{
	"pause": httpapi.ActionManage, "resume": httpapi.ActionManage,
	"terminate": httpapi.ActionManage, "restart": httpapi.ActionManage,
	"event": httpapi.ActionEvents,
}

type confirmView struct {
	Info       *dftype.InstanceInfo
	Action     string
	EventType  string
	Payload    string
	NamespaceQ string
}

// parseAction reads and authorizes the action of a confirmation or of its
// POST, and for an event its type and payload, held to the API's limits.
func (c *Console) parseAction(rq *request, form url.Values) (*confirmView, error) {
	v := &confirmView{Action: form.Get("action"), EventType: strings.TrimSpace(form.Get("type")), Payload: strings.TrimSpace(form.Get("payload"))}
	scope, ok := actionScopes[v.Action]
	if !ok {
		return nil, fmt.Errorf("%w: unknown action %q (want pause, resume, terminate, restart or event)", workflow.ErrInvalidRequest, v.Action)
	}
	if err := rq.sess.principal.Allow(rq.Request, scope); err != nil {
		return nil, err
	}
	if v.Action == "event" {
		if v.EventType == "" {
			return nil, fmt.Errorf("%w: an event needs a type", workflow.ErrInvalidRequest)
		}
		if err := c.cfg.Limits.CheckEventType(v.EventType); err != nil {
			return nil, err
		}
		if v.Payload == "" {
			v.Payload = "null"
		}
		if err := c.cfg.Limits.CheckPayload("the event payload", []byte(v.Payload)); err != nil {
			return nil, err
		}
		if !json.Valid([]byte(v.Payload)) {
			return nil, fmt.Errorf("%w: the event payload is not valid JSON", workflow.ErrInvalidRequest)
		}
	}
	if rq.namespace != workflow.DefaultNamespace {
		v.NamespaceQ = rq.namespace
	}
	return v, nil
}

// confirmPage asks to confirm an action.
func (c *Console) confirmPage(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "action", "type", "payload")
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	wf, id, err := c.instanceRef(rq)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v, err := c.parseAction(rq, q)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	if v.Info, err = c.scoped(rq).Get(rq.Context(), wf, id); err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	c.render(w, rq, "confirm", "Confirm "+v.Action, v)
}

// action does a confirmed action and goes back to the instance.
func (c *Console) action(w http.ResponseWriter, rq *request) {
	wf, id, err := c.instanceRef(rq)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v, err := c.parseAction(rq, rq.PostForm)
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	sc := c.scoped(rq)
	ctx := rq.Context()
	switch v.Action {
	case "pause":
		_, err = sc.Pause(ctx, wf, id)
	case "resume":
		_, err = sc.Resume(ctx, wf, id)
	case "terminate":
		_, err = sc.Terminate(ctx, wf, id)
	case "restart":
		_, err = sc.Restart(ctx, wf, id)
	case "event":
		err = sc.SendEvent(ctx, wf, id, v.EventType, json.RawMessage(v.Payload))
	}
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	http.Redirect(w, rq.Request, instanceURL(&dftype.InstanceInfo{WorkflowName: wf, ID: id}, rq.namespace), http.StatusSeeOther)
}

// ---- schedules and workers ----

type schedulesView struct {
	Off        bool
	Schedules  []*schedule.Info
	NextCursor string
}

// schedules lists the schedules, a page at a time. Schedules belong to no
// namespace: a session limited to namespaces may not see them, as the API
// refuses it GET /schedules.
func (c *Console) schedules(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "cursor")
	if err == nil {
		err = rq.sess.principal.AllowEveryNamespace(rq.Request, httpapi.ActionRead)
	}
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	v := &schedulesView{Off: c.cfg.Schedules == nil}
	if !v.Off {
		res, err := c.cfg.Schedules.List(rq.Context(), schedule.ListParams{PageSize: c.pageSize(pageSize), Cursor: q.Get("cursor")})
		if err != nil {
			c.renderError(w, rq.Request, rq.sess, err)
			return
		}
		v.Schedules, v.NextCursor = res.Schedules, res.NextCursor
	}
	c.render(w, rq, "schedules", "Schedules", v)
}

type workersView struct {
	Workers    []*dftype.WorkerInfo
	NextCursor string
}

// workers lists the registered workers, a page at a time. Workers serve
// every namespace: a session limited to namespaces may not see them, as
// the API refuses it GET /workers.
func (c *Console) workers(w http.ResponseWriter, rq *request) {
	q, err := query(rq, "cursor")
	if err == nil {
		err = rq.sess.principal.AllowEveryNamespace(rq.Request, httpapi.ActionRead)
	}
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	res, err := c.cfg.Client.ListWorkers(rq.Context(), client.WorkerListParams{PageSize: c.pageSize(pageSize), Cursor: q.Get("cursor")})
	if err != nil {
		c.renderError(w, rq.Request, rq.sess, err)
		return
	}
	c.render(w, rq, "workers", "Workers", &workersView{Workers: res.Workers, NextCursor: res.NextCursor})
}

// prettyJSON indents raw JSON for a <pre>; "" for none.
func prettyJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
