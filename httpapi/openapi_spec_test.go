package httpapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/internal/flowapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// pagePayload is the byte budget of a page of instances or history, as the
// descriptions say it.
var pagePayload = strconv.Itoa(client.DefaultPagePayloadBytes>>20) + " MiB"

// This file is the source of openapi.json: the table of the API's
// operations below, and the Go types of their bodies (openapi_schema_test.go).
// `make generate` rewrites the file with
//
//	go test ./httpapi -run '^TestOpenAPIDocument$' -update
//
// and TestOpenAPIDocument fails when the committed file differs from what
// the table makes. TestOpenAPIConformance (openapi_test.go) checks the
// server against the file.

var updateOpenAPI = flag.Bool("update", false, "rewrite openapi.json from the operation table")

const openAPIFile = "openapi.json"

// apiOp is one operation of the document.
type apiOp struct {
	method string
	// path is the OpenAPI path: under /api, or at the root.
	path        string
	id          string
	tag         string
	summary     string
	description string
	// scope is the token scope (httpapi.Action) the route needs; "" for a
	// route without authentication.
	scope httpapi.Action
	// params are parameter objects, or names of components/parameters.
	params []any
	// body is a Go value whose type is the request body, or an obj schema;
	// nil for no body.
	body         any
	bodyRequired bool
	bodyExample  any
	ok           []okResp
	// errs are the codes of the route's own errors, beyond the ones every
	// route (or every route with a body) may answer.
	errs []apiclient.Code
	// deprecated marks an operation kept for older callers.
	deprecated bool
	// condition says when the server has the route, "" always.
	condition string
}

// okResp is a successful answer of an operation.
type okResp struct {
	status      int
	description string
	// body is a Go value whose type is the answer, or an obj schema; nil
	// for none.
	body    any
	headers []string // names of components/headers
	example any
	// contentType is the answer's media type; "" is application/json.
	contentType string
}

func init() {
	nameTypes(map[string]any{
		"Instance":              apiclient.Instance{},
		"InstancePage":          apiclient.InstancePage{},
		"HistoryPage":           apiclient.HistoryPage{},
		"StepInfo":              client.StepInfo{},
		"CreateInstanceRequest": apiclient.CreateRequest{},
		"CreateBatchRequest":    apiclient.CreateBatchRequest{},
		"InstanceBatch":         apiclient.InstanceBatch{},
		"Schedule":              schedule.Info{},
		"ScheduleList":          schedule.ListResult{},
		"CreateScheduleRequest": schedule.CreateRequest{},
		"UpdateScheduleRequest": schedule.UpdateRequest{},
		"FlowApplied":           flowapi.ApplyResult{},
		"FlowInfo":              flowapi.Info{},
		"FlowList":              flowapi.ListResult{},
		"FlowVersionList":       flowapi.VersionList{},
		"Worker":                dftype.WorkerInfo{},
		"WorkerList":            apiclient.WorkerList{},
		"Error":                 apiclient.APIError{},
		"ErrorResponse":         apiclient.ErrorResponse{},
		"ErrorCode":             apiclient.Code(""),
		"TriggerResponse":       httpapi.TriggerResponse{},
		"FlowDefinition":        flow.Definition{},
		"FlowStep":              flow.Step{},
		"FlowTransitions":       flow.Transitions{},
		"FlowRetryPolicy":       flow.RetryPolicy{},
		"FlowRate":              flow.Rate{},
		"FlowConcurrency":       flow.Concurrency{},
		"FlowSelector":          flow.Selector{},
	})
	for _, r := range []struct {
		typ    reflect.Type
		fields []string
	}{
		{reflect.TypeFor[apiclient.SendEventRequest](), []string{"type"}},
		{reflect.TypeFor[apiclient.CreateBatchRequest](), []string{"instances"}},
		{reflect.TypeFor[schedule.CreateRequest](), []string{"id", "workflowName", "cron"}},
		{reflect.TypeFor[flow.Definition](), []string{"id", "version", "initialStepId", "steps"}},
		{reflect.TypeFor[flow.Step](), []string{"id", "type"}},
		{reflect.TypeFor[flow.Rate](), []string{"limit", "period"}},
		{reflect.TypeFor[flow.Concurrency](), []string{"key", "max"}},
	} {
		requestRequired[typeKey(r.typ)] = r.fields
	}
	for _, v := range []any{schedule.ListResult{}, flowapi.ListResult{}, apiclient.WorkerList{}, apiclient.LifecycleList{}} {
		pagedTypes[typeKey(reflect.TypeOf(v))] = true
	}

	// The rules of request fields (the checks of workflow, schedule and
	// httpapi), which the Go types do not carry.
	ref := func(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }
	for _, r := range []struct {
		typ   reflect.Type
		field string
		rules obj
	}{
		{reflect.TypeFor[apiclient.CreateRequest](), "ID", ref("InstanceId")},
		{reflect.TypeFor[apiclient.CreateRequest](), "Queue", ref("QueueName")},
		{reflect.TypeFor[apiclient.CreateRequest](), "Priority", obj{"minimum": workflow.MinPriority, "maximum": workflow.MaxPriority}},
		{reflect.TypeFor[apiclient.CreateBatchRequest](), "Instances", obj{"minItems": 1, "maxItems": workflow.MaxBatchSize}},
		{reflect.TypeFor[apiclient.SendEventRequest](), "Type", ref("EventType")},
		{reflect.TypeFor[apiclient.TickRequest](), "MaxInstances", obj{"minimum": 0, "maximum": httpapi.MaxTickInstances}},
		{reflect.TypeFor[apiclient.TickRequest](), "MaxSteps", obj{"minimum": 0}},
		{reflect.TypeFor[apiclient.QueueLimits](), "MaxRunning", obj{"minimum": 1}},
		{reflect.TypeFor[schedule.CreateRequest](), "ID", identSchema(workflow.MaxIDLength)},
		{reflect.TypeFor[schedule.CreateRequest](), "WorkflowName", identSchema(workflow.MaxWorkflowNameLength)},
		{reflect.TypeFor[schedule.CreateRequest](), "MaxCatchup", obj{"minimum": 1, "maximum": schedule.MaxCatchupLimit}},
		{reflect.TypeFor[schedule.UpdateRequest](), "WorkflowName", identSchema(workflow.MaxWorkflowNameLength)},
		{reflect.TypeFor[schedule.UpdateRequest](), "MaxCatchup", obj{"minimum": 1, "maximum": schedule.MaxCatchupLimit}},
		{reflect.TypeFor[flow.Definition](), "ID", identSchema(workflow.MaxWorkflowNameLength)},
		{reflect.TypeFor[flow.Definition](), "Queue", ref("QueueName")},
		{reflect.TypeFor[flow.Step](), "ID", identSchema(flow.MaxStepIDLength)},
	} {
		_, ok := r.typ.FieldByName(r.field)
		if !ok {
			panic(fmt.Sprintf("openapi: %s has no field %s", r.typ, r.field))
		}
		fieldRules[typeKey(r.typ)+"."+r.field] = r.rules
	}

	schemaDocs[typeKey(reflect.TypeFor[flow.Definition]())] = "A flow definition (docs/flows.md): data that compiles into a durable workflow. It is decoded strictly: an unknown field is a problem (400 INVALID_FLOW)."
	schemaDocs[typeKey(reflect.TypeFor[flow.Selector]())] = "A selector picks a value for a step from the flow context: an object with exactly one of its fields. A key or path that is not in the context selects null."

	// A selector is an object with exactly one of its fields
	// (flow.Selector's UnmarshalJSON).
	selfEncoded[typeKey(reflect.TypeFor[flow.Selector]())] = func() obj {
		str := obj{"type": "string"}
		return obj{
			"type": "object", "minProperties": 1, "maxProperties": 1,
			"properties": obj{
				"value":    obj{"$ref": "#/components/schemas/JSONValue", "description": "A static value, as written."},
				"key":      withDoc(str, "A top-level key of the context (dots are part of the key)."),
				"path":     withDoc(str, "A dot path into the context: object keys, and array indexes written as digits."),
				"context":  obj{"type": "boolean", "const": true, "description": "The whole context."},
				"template": withDoc(str, "A string with each ${path} filled from the context (\"$$\" is a \"$\")."),
			},
		}
	}
}

// identPattern is the pattern of instance ids, event types, schedule ids
// and workflow, queue and namespace names (workflow.ValidateInstanceID and
// its kin): letters, digits, '_' and '-', not starting with '-'.
const identPattern = `^[a-zA-Z0-9_][a-zA-Z0-9_-]*$`

// identSchema is the schema of an identifier of 1 to max characters.
func identSchema(max int) obj {
	return obj{"type": "string", "pattern": identPattern, "minLength": 1, "maxLength": max}
}

// withDoc is a copy of schema s with a description.
func withDoc(s obj, doc string) obj {
	out := obj{"description": doc}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// ruleSchemas are the components of the identifiers the rules above and
// the parameters refer to. The server sets the maxLength of InstanceId and
// EventType to its Config.Limits.
func ruleSchemas() obj {
	return obj{
		"InstanceId": withDoc(identSchema(workflow.MaxIDLength),
			"An instance id: letters, digits, '_' and '-', not starting with '-' (else 400 INVALID_INSTANCE_ID)."),
		"EventType": withDoc(identSchema(workflow.MaxIDLength),
			"An event type: letters, digits, '_' and '-', not starting with '-' (else 400 INVALID_EVENT_TYPE)."),
		"QueueName": withDoc(identSchema(workflow.MaxQueueNameLength),
			"A task queue's name: letters, digits, '_' and '-', not starting with '-' (else 400 INVALID_REQUEST)."),
		"Namespace": withDoc(identSchema(workflow.MaxNamespaceLength),
			"A namespace's name: letters, digits, '_' and '-', not starting with '-' (else 400 INVALID_REQUEST)."),
		"LifecycleEventType": lifecycleTypeSchema(),
	}
}

// lifecycleTypeSchema is the enum of the lifecycle event types, which the
// type filters take (an unknown one is 400 INVALID_REQUEST).
func lifecycleTypeSchema() obj {
	var enum []any
	for _, lt := range db.LifecycleEventTypes() {
		enum = append(enum, string(lt))
	}
	return obj{"type": "string", "enum": enum, "description": "A lifecycle event type (docs/events.md)."}
}

// statusFilter is the schema of one value of the status filter of the
// instance lists: a status an instance can have.
func statusFilter() obj {
	var enum []any
	for _, st := range constsOf(reflect.TypeFor[dftype.InstanceStatus]()) {
		if dftype.InstanceStatus(st) != dftype.StatusUnknown {
			enum = append(enum, st)
		}
	}
	return obj{"type": "string", "enum": enum}
}

// Parameters shared by operations (components/parameters).
func sharedParameters() obj {
	str := obj{"type": "string"}
	return obj{
		"workflowName": obj{"name": "name", "in": "path", "required": true, "schema": identSchema(workflow.MaxWorkflowNameLength),
			"description": "The workflow's name (a flow's id for a flow). A name past the length limit is 400 INVALID_REQUEST; one that no workflow has, 404 WORKFLOW_NOT_FOUND."},
		"instanceId": obj{"name": "id", "in": "path", "required": true, "schema": obj{"$ref": "#/components/schemas/InstanceId"},
			"description": "The instance id (else 400 INVALID_INSTANCE_ID)."},
		"pageSize": obj{"name": "pageSize", "in": "query", "schema": obj{"type": "integer", "minimum": 1, "maximum": httpapi.MaxPageSize},
			"description": "The page length; the route's default when absent."},
		"cursor": obj{"name": "cursor", "in": "query", "schema": str,
			"description": "Continues a previous page: the cursor its answer gave."},
		"lifecycleType": obj{"name": "type", "in": "query", "schema": obj{"type": "array", "items": obj{"$ref": "#/components/schemas/LifecycleEventType"}}, "style": "form", "explode": true,
			"description": "Only events of these lifecycle types (repeat the parameter), such as instance.created, step.retrying or worker.offline; an unknown type is 400."},
		"lifecycleWorkflow": obj{"name": "workflow", "in": "query", "schema": obj{"type": "string", "maxLength": workflow.MaxWorkflowNameLength},
			"description": "Only events of this workflow."},
		"lifecycleInstance": obj{"name": "instance", "in": "query", "schema": obj{"$ref": "#/components/schemas/InstanceId"},
			"description": "Only events of this instance (with workflow)."},
		"lifecycleWorker": obj{"name": "worker", "in": "query", "schema": str,
			"description": "Only the events of this worker (worker.online, worker.draining, worker.offline), which name no workflow or instance."},
		"lifecycleSince": obj{"name": "since", "in": "query", "schema": obj{"type": "string", "format": "date-time"},
			"description": "Only events at or after this RFC 3339 time."},
		"lifecycleUntil": obj{"name": "until", "in": "query", "schema": obj{"type": "string", "format": "date-time"},
			"description": "Only events before this RFC 3339 time; it must be after since."},
		"namespaceQuery": obj{"name": "namespace", "in": "query", "schema": obj{"$ref": "#/components/schemas/Namespace"},
			"description": "The namespace the request acts in (as the Duraflow-Namespace header; given both, they must agree). Default: `default`, or the first namespace of a token limited to some."},
		"namespaceHeader": obj{"name": apiclient.NamespaceHeader, "in": "header", "schema": obj{"$ref": "#/components/schemas/Namespace"},
			"description": "The namespace the request acts in (as the namespace query parameter)."},
	}
}

// Response headers shared by operations (components/headers).
func sharedHeaders() obj {
	str := obj{"type": "string"}
	return obj{
		"Location":         obj{"description": "The API path of what was created.", "schema": str},
		"X-Request-Id":     obj{"description": "The request id recorded in the instance's provenance: the request's own X-Request-Id when it sent a reasonable one, else a new one.", "schema": str},
		"WWW-Authenticate": obj{"description": "`Bearer realm=\"duraflow\"`.", "schema": str},
		"Retry-After":      obj{"description": "Seconds to wait before trying again.", "schema": obj{"type": "integer"}},
	}
}

var (
	instanceParams = []any{"workflowName", "instanceId"}
	exInstance     = obj{
		"id": "g-1", "details": obj{"status": "complete", "output": obj{"greeting": "hello, ada"}},
		"workflowName": "greet", "params": obj{"name": "ada"}, "runNumber": 1, "createdAt": "2025-01-02T03:04:05Z",
		"updatedAt": "2025-01-02T03:04:06Z", "startedAt": "2025-01-02T03:04:05Z", "completedAt": "2025-01-02T03:04:06Z",
		"namespace": "default", "queue": "default", "priority": 0,
	}
)

// apiOperations is the table of the API: every route the server can
// register (New with every optional part configured; the triggers are the
// host's, added to the served document per trigger).
func apiOperations() []apiOp {
	change := func(verb, summary, desc string, errs ...apiclient.Code) apiOp {
		return apiOp{
			method: "POST", path: "/api/workflows/{name}/instances/{id}/" + verb, id: verb + "Instance", tag: "instances",
			summary: summary, description: desc + "\n\nThe body, if any, must be an empty JSON object. " + changeRule,
			scope: httpapi.ActionManage, params: instanceParams, body: obj{"type": "object", "additionalProperties": false, "maxProperties": 0},
			ok:   []okResp{{status: 200, description: "The instance after the change.", body: apiclient.Instance{}}},
			errs: append([]apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInstanceNotFound, apiclient.CodeInvalidInstanceID}, errs...),
		}
	}
	return []apiOp{
		{
			method: "GET", path: "/healthz", id: "healthz", tag: "health", summary: "Liveness",
			description: "Answers 200 while the process serves, also while its database is unavailable (the process retries and recovers by itself; see /readyz). At the root, outside the prefix and outside authentication.",
			ok:          []okResp{{status: 200, description: "Serving.", body: apiclient.HealthStatus{}, example: obj{"status": "ok"}}},
		},
		{
			method: "GET", path: "/readyz", id: "readyz", tag: "health", summary: "Readiness",
			description: "Answers 200 when the host's readiness check passes (duraflow serve: its database answers, its migrations are applied and its stored flows are loaded), 503 NOT_READY with the reason otherwise. At the root, outside the prefix and outside authentication.",
			ok:          []okResp{{status: 200, description: "Ready.", body: apiclient.HealthStatus{}, example: obj{"status": "ok"}}},
			errs:        []apiclient.Code{apiclient.CodeNotReady},
		},
		{
			method: "GET", path: "/api/openapi.json", id: "openapi", tag: "health", summary: "This document",
			description: "The OpenAPI document of the server: its prefix, the routes it serves (schedules, flows and the tick only when the host enables them) and one operation per trigger. Behind the read scope like the rest of the API; without authentication (loopback only) it needs no token.",
			scope:       httpapi.ActionRead,
			ok: []okResp{{status: 200, description: "The OpenAPI 3.1 document.", body: obj{
				"type": "object", "required": []any{"openapi", "info", "paths"}, "additionalProperties": true,
				"properties": obj{
					"openapi": obj{"type": "string", "description": "The OpenAPI version, 3.1.x."},
					"info":    obj{"type": "object", "additionalProperties": true, "description": "The title, version and description of the API."},
					"paths":   obj{"type": "object", "additionalProperties": true, "description": "The operations, by path."},
				},
			}}},
		},
		{
			method: "GET", path: "/api", id: "index", tag: "health", summary: "Index",
			description: "What the server is and where to go next: its version, the routes it serves with the scope each needs, the paths of the OpenAPI document and of the web console (when the host mounts one) and the documentation's address. JSON, or an HTML page when the request accepts text/html. Behind the read scope like the rest of the API. The server answers the same at the prefix with a trailing slash (GET /api/), which this document leaves out.",
			scope:       httpapi.ActionRead,
			ok: []okResp{{status: 200, description: "The index.", body: apiclient.APIIndex{},
				example: obj{"name": "Duraflow", "version": "v1.4.0", "openapi": "/api/openapi.json", "docs": httpapi.DocsURL,
					"routes": []any{obj{"method": "GET", "path": "/api/workflows", "scope": "read"}, obj{"method": "GET", "path": "/healthz"}}}}},
		},
		{
			method: "GET", path: "/api/workflows", id: "listWorkflows", tag: "workflows", summary: "List workflows",
			description: "Every registered workflow: Go workflows compiled into the server and the flows of the flow registry, by name.",
			scope:       httpapi.ActionRead,
			ok: []okResp{{status: 200, description: "The workflows.", body: apiclient.WorkflowList{},
				example: obj{"workflows": []any{obj{"name": "greet", "kind": "go"}, obj{"name": "orders", "kind": "flow", "version": "1.2.0"}}}}},
		},
		{
			method: "GET", path: "/api/instances", id: "listAllInstances", tag: "instances", summary: "List the instances of every workflow",
			description: "A page of the instances of every workflow stored in the request's namespace, whether this server runs the workflow or not, most recently updated first, in one order with one cursor. While `hasNextPage` is true, pass `cursor` back for the next page. A page ends early, with a cursor, once the payloads of its instances (params, metadata, output, error message) reach " + pagePayload + ": it may hold fewer than `pageSize`.",
			scope:       httpapi.ActionRead,
			params: []any{
				obj{"name": "status", "in": "query", "schema": obj{"type": "array", "items": statusFilter()}, "style": "form", "explode": true,
					"description": "Only instances with these statuses (repeat the parameter: `status=queued&status=running`). The server also takes them separated by commas in one parameter (`status=queued,running`)."},
				obj{"name": "queue", "in": "query", "schema": obj{"$ref": "#/components/schemas/QueueName"}, "description": "Only instances of this task queue."},
				"pageSize", "cursor"},
			ok: []okResp{{status: 200, description: "A page of instances.", body: apiclient.InstancePage{}}},
		},
		{
			method: "GET", path: "/api/workflows/{name}/instances", id: "listInstances", tag: "instances", summary: "List instances",
			description: "A page of the workflow's instances in the request's namespace, most recently updated first, whether this server runs the workflow or not: the workflow is unknown (404) only when it is neither registered nor stored. While `hasNextPage` is true, pass `cursor` back for the next page. A page ends early, with a cursor, once the payloads of its instances (params, metadata, output, error message) reach " + pagePayload + ": it may hold fewer than `pageSize`.",
			scope:       httpapi.ActionRead,
			params: []any{"workflowName",
				obj{"name": "status", "in": "query", "schema": obj{"type": "array", "items": statusFilter()}, "style": "form", "explode": true,
					"description": "Only instances with these statuses (repeat the parameter: `status=queued&status=running`). The server also takes them separated by commas in one parameter (`status=queued,running`)."},
				obj{"name": "queue", "in": "query", "schema": obj{"$ref": "#/components/schemas/QueueName"}, "description": "Only instances of this task queue."},
				"pageSize", "cursor"},
			ok:   []okResp{{status: 200, description: "A page of instances.", body: apiclient.InstancePage{}}},
			errs: []apiclient.Code{apiclient.CodeWorkflowNotFound},
		},
		{
			method: "POST", path: "/api/workflows/{name}/instances", id: "createInstance", tag: "instances", summary: "Create an instance",
			description: "Creates an instance of the workflow in the request's namespace; it runs on its queue's runners. With a `dedupeKey` held by an active instance, nothing is created and that instance is answered (200, `deduplicated: true`). An empty body creates an instance with a random id and null params. " + namespacedCreate,
			scope:       httpapi.ActionCreate, params: []any{"workflowName"},
			body: apiclient.CreateRequest{}, bodyExample: obj{"id": "g-1", "params": obj{"name": "ada"}},
			ok: []okResp{
				{status: 201, description: "Created.", body: apiclient.Instance{}, headers: []string{"Location", "X-Request-Id"}},
				{status: 200, description: "Deduplicated: the active instance that holds the dedupe key.", body: apiclient.Instance{}, headers: []string{"Location", "X-Request-Id"}},
			},
			errs: []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInvalidInstanceID, apiclient.CodeInstanceIDAlreadyExists, apiclient.CodeInvalidPriority, apiclient.CodeInvalidConcurrencyKey},
		},
		{
			method: "POST", path: "/api/workflows/{name}/instances/batch", id: "createInstances", tag: "instances", summary: "Create instances",
			description: "Creates 1 to " + strconv.Itoa(workflow.MaxBatchSize) + " instances at once, all validated before any is written. Ids that exist already are skipped and left out of the answer. " + namespacedCreate,
			scope:       httpapi.ActionCreate, params: []any{"workflowName"},
			body: apiclient.CreateBatchRequest{}, bodyRequired: true,
			bodyExample: obj{"instances": []any{obj{"id": "g-1", "params": obj{"name": "ada"}}, obj{"params": obj{"name": "bob"}}}},
			ok:          []okResp{{status: 201, description: "The instances created.", body: apiclient.InstanceBatch{}, headers: []string{"X-Request-Id"}}},
			errs:        []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInvalidInstanceID, apiclient.CodeInvalidPriority, apiclient.CodeInvalidConcurrencyKey},
		},
		{
			method: "GET", path: "/api/workflows/{name}/instances/{id}", id: "getInstance", tag: "instances", summary: "Get an instance",
			description: "The instance, with its children (the instances its invoke steps started).",
			scope:       httpapi.ActionRead, params: instanceParams,
			ok:   []okResp{{status: 200, description: "The instance.", body: apiclient.Instance{}, example: exInstance}},
			errs: []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInstanceNotFound, apiclient.CodeInvalidInstanceID},
		},
		{
			method: "GET", path: "/api/workflows/{name}/instances/batch", id: "getInstanceNamedBatch", tag: "instances", summary: "Get the instance whose id is \"batch\"",
			description: "GET of an instance whose id is `batch`, which shares its path with the batch create route; the same as getInstance.",
			scope:       httpapi.ActionRead, params: []any{"workflowName"},
			ok:   []okResp{{status: 200, description: "The instance.", body: apiclient.Instance{}}},
			errs: []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInstanceNotFound},
		},
		change("pause", "Pause an instance", "Pauses the instance at its next step boundary (`waitingForPause` until then); a paused or pausing instance stays as it is. A terminal instance (complete, errored or terminated) is 409 INSTANCE_TERMINAL.", apiclient.CodeInstanceTerminal),
		change("resume", "Resume an instance", "Resumes a paused instance; an instance in any other status, terminal ones included, is answered as it is, unchanged."),
		change("terminate", "Terminate an instance", "Ends a live instance as terminated; its running step's result is discarded. A terminal instance is 409 INSTANCE_TERMINAL.", apiclient.CodeInstanceTerminal),
		change("restart", "Restart an instance", "Starts a new run of the instance from the beginning, with the same params, whatever its status. Reviving an instance whose dedupe key another active instance holds now is 409 INSTANCE_ID_ALREADY_EXISTS.", apiclient.CodeInstanceIDAlreadyExists),
		change("compensate", "Compensate an instance", "Stops a live instance at its next step boundary and runs the compensations of its completed steps in reverse order. A terminal instance is 409 INSTANCE_TERMINAL.", apiclient.CodeInstanceTerminal),
		{
			method: "POST", path: "/api/workflows/{name}/instances/{id}/events", id: "sendEvent", tag: "instances", summary: "Send an event",
			description: "Stores an event for the instance: a step waiting for its type consumes it, now or when it reaches the wait. The answer comes once the event is durable.",
			scope:       httpapi.ActionEvents, params: instanceParams,
			body: apiclient.SendEventRequest{}, bodyRequired: true, bodyExample: obj{"type": "approval", "payload": obj{"by": "ada"}},
			ok:   []okResp{{status: 202, description: "The event is stored: the instance's status from then on (a workflow the event woke may have moved on already), and whether a waiting step took the event (delivered) or it was buffered for a later WaitForEvent of its type. Its error, output and the receiving step are left out unless the token may also read (the read scope).", body: apiclient.EventSent{}, example: obj{"status": obj{"status": "running"}, "delivery": "delivered", "step": "wait for approval"}}},
			errs: []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInstanceNotFound, apiclient.CodeInvalidInstanceID, apiclient.CodeInvalidEventType, apiclient.CodeInstanceTerminal},
		},
		{
			method: "GET", path: "/api/workflows/{name}/instances/{id}/history", id: "instanceHistory", tag: "instances", summary: "Read an instance's history",
			description: "A page of the steps and events of one run of the instance (the current one unless `run` says), in the order they were recorded. While `hasNextPage` is true, pass `cursor` back for the next page. A page ends early, with a cursor, once the payloads it holds (step results and error messages first, then event payloads) reach " + pagePayload + ": it may hold fewer steps and events than `pageSize`.",
			scope:       httpapi.ActionRead,
			params: []any{"workflowName", "instanceId",
				obj{"name": "run", "in": "query", "schema": obj{"type": "integer", "minimum": 0}, "description": "The run number; 0 or absent is the current run."},
				obj{"name": "pageSize", "in": "query", "schema": obj{"type": "integer", "minimum": 1, "maximum": httpapi.MaxPageSize},
					"description": "Steps and events per page, each up to this; default " + strconv.Itoa(httpapi.DefaultHistoryPageSize) + "."},
				"cursor"},
			ok:   []okResp{{status: 200, description: "A page of history.", body: apiclient.HistoryPage{}}},
			errs: []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInstanceNotFound, apiclient.CodeInvalidInstanceID},
		},
		{
			method: "POST", path: "/api/_runner/tick", id: "tick", tag: "runner", summary: "Run due work once",
			description: "Runs the runner's due work once, within the bounds of the body, and answers how many claimed tasks it ran and the limits it ran under. One tick at a time by default: another answers 429 TICK_BUSY. The token scope `tick` is never granted by `*`. " + spansEveryNamespace,
			scope:       httpapi.ActionTick, condition: "Config.Tick",
			body: apiclient.TickRequest{}, bodyExample: obj{"maxInstances": 50, "maxSteps": 500},
			ok: []okResp{{status: 200, description: "What the tick did.", body: apiclient.TickResult{},
				example: obj{"processed": 12, "maxInstances": 50, "maxSteps": 500}}},
			errs: []apiclient.Code{apiclient.CodeTickBusy},
		},

		// Schedules.
		{
			method: "GET", path: "/api/schedules", id: "listSchedules", tag: "schedules", summary: "List schedules",
			description: "A page of schedules ordered by id. " + spansEveryNamespace, scope: httpapi.ActionRead, condition: "Config.Schedules",
			params: []any{obj{"name": "workflow", "in": "query", "schema": obj{"type": "string"}, "description": "Only the schedules of this workflow."}, "pageSize", "cursor"},
			ok:     []okResp{{status: 200, description: "A page of schedules.", body: schedule.ListResult{}}},
		},
		{
			method: "POST", path: "/api/schedules", id: "createSchedule", tag: "schedules", summary: "Create a schedule",
			description: "Creates a cron schedule that starts the workflow with its params at every due time, in the namespace `default`. Needs the `schedules` scope, not `manage` or `create`: a schedule starts instances again and again without further requests. " + spansEveryNamespace,
			scope:       httpapi.ActionSchedules, condition: "Config.Schedules",
			body: schedule.CreateRequest{}, bodyRequired: true,
			bodyExample: obj{"id": "nightly-report", "workflowName": "report", "cron": "0 3 * * *", "timeZone": "Europe/Paris", "params": obj{"kind": "daily"}},
			ok:          []okResp{{status: 201, description: "Created.", body: schedule.Info{}, headers: []string{"Location"}}},
			errs:        []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeScheduleAlreadyExists},
		},
		{
			method: "GET", path: "/api/schedules/{id}", id: "getSchedule", tag: "schedules", summary: "Get a schedule",
			description: "The schedule, with its next fire time. " + spansEveryNamespace, scope: httpapi.ActionRead, condition: "Config.Schedules",
			params: []any{"scheduleId"},
			ok:     []okResp{{status: 200, description: "The schedule.", body: schedule.Info{}}},
			errs:   []apiclient.Code{apiclient.CodeScheduleNotFound},
		},
		{
			method: "PATCH", path: "/api/schedules/{id}", id: "updateSchedule", tag: "schedules", summary: "Change a schedule",
			description: "Changes the fields the body holds; the others stay. " + spansEveryNamespace, scope: httpapi.ActionSchedules, condition: "Config.Schedules",
			params: []any{"scheduleId"}, body: schedule.UpdateRequest{}, bodyRequired: true, bodyExample: obj{"cron": "0 4 * * *"},
			ok:   []okResp{{status: 200, description: "The schedule after the change.", body: schedule.Info{}}},
			errs: []apiclient.Code{apiclient.CodeScheduleNotFound, apiclient.CodeWorkflowNotFound},
		},
		{
			method: "DELETE", path: "/api/schedules/{id}", id: "deleteSchedule", tag: "schedules", summary: "Delete a schedule",
			description: "Deletes the schedule; the instances it started stay. " + spansEveryNamespace, scope: httpapi.ActionSchedules, condition: "Config.Schedules",
			params: []any{"scheduleId"},
			ok:     []okResp{{status: 204, description: "Deleted."}},
			errs:   []apiclient.Code{apiclient.CodeScheduleNotFound},
		},
		{
			method: "POST", path: "/api/schedules/{id}/enable", id: "enableSchedule", tag: "schedules", summary: "Enable a schedule",
			description: "The schedule fires again from the next due time. The body, if any, must be an empty JSON object. " + spansEveryNamespace,
			scope:       httpapi.ActionSchedules, condition: "Config.Schedules", params: []any{"scheduleId"},
			body: obj{"type": "object", "additionalProperties": false, "maxProperties": 0},
			ok:   []okResp{{status: 200, description: "The schedule.", body: schedule.Info{}}},
			errs: []apiclient.Code{apiclient.CodeScheduleNotFound},
		},
		{
			method: "POST", path: "/api/schedules/{id}/disable", id: "disableSchedule", tag: "schedules", summary: "Disable a schedule",
			description: "The schedule stops firing until enabled. The body, if any, must be an empty JSON object. " + spansEveryNamespace,
			scope:       httpapi.ActionSchedules, condition: "Config.Schedules", params: []any{"scheduleId"},
			body: obj{"type": "object", "additionalProperties": false, "maxProperties": 0},
			ok:   []okResp{{status: 200, description: "The schedule.", body: schedule.Info{}}},
			errs: []apiclient.Code{apiclient.CodeScheduleNotFound},
		},

		// Queues.
		{
			method: "GET", path: "/api/queues", id: "listQueues", tag: "queues", summary: "List queues with limits",
			description: "Every queue that has limits, with how many instances of every namespace hold a slot. " + spansEveryNamespace, scope: httpapi.ActionRead,
			ok: []okResp{{status: 200, description: "The queues.", body: apiclient.QueueList{}}},
		},
		{
			method: "GET", path: "/api/queues/{name}", id: "getQueue", tag: "queues", summary: "Get a queue's limits",
			description: "The queue's limits; QUEUE_NOT_FOUND when none were ever set. " + spansEveryNamespace, scope: httpapi.ActionRead,
			params: []any{"queueName"},
			ok:     []okResp{{status: 200, description: "The queue.", body: apiclient.Queue{}}},
			errs:   []apiclient.Code{apiclient.CodeQueueNotFound},
		},
		{
			method: "PUT", path: "/api/queues/{name}", id: "setQueueLimits", tag: "queues", summary: "Set a queue's limits",
			description: "Replaces the queue's limits: an absent field is no limit. " + spansEveryNamespace,
			scope:       httpapi.ActionManage, params: []any{"queueName"},
			body: apiclient.QueueLimits{}, bodyRequired: true, bodyExample: obj{"maxRunning": 10, "rate": obj{"limit": 100, "period": "1m"}},
			ok:   []okResp{{status: 200, description: "The queue with its new limits.", body: apiclient.Queue{}}},
			errs: []apiclient.Code{apiclient.CodeInvalidLimit},
		},

		// Flows.
		{
			method: "POST", path: "/api/flows", id: "applyFlow", tag: "flows", summary: "Apply a flow definition",
			description: "Stores a flow definition (docs/flows.md) byte for byte as a new version, or answers 200 when that version is stored already with the same definition. A definition that does not validate is 400 INVALID_FLOW with the problems at their JSON paths. Needs the `flows` scope: a flow's http steps make requests from the server's network position. " + spansEveryNamespace,
			scope:       httpapi.ActionFlows, condition: "Config.Flows",
			body: flow.Definition{}, bodyRequired: true,
			bodyExample: obj{"id": "doubler", "version": "1.0.0", "initialStepId": "double", "output": "result",
				"steps": obj{"double": obj{"id": "double", "type": "transform", "config": obj{"expression": "{n: n * 2}"}, "outputKey": "result"}}},
			ok: []okResp{
				{status: 201, description: "Stored as a new version.", body: flowapi.ApplyResult{}, headers: []string{"Location"}},
				{status: 200, description: "Stored already with the same definition.", body: flowapi.ApplyResult{}, headers: []string{"Location"}},
			},
			errs: []apiclient.Code{apiclient.CodeInvalidFlow, apiclient.CodeFlowVersionConflict},
		},
		{
			method: "GET", path: "/api/flows", id: "listFlows", tag: "flows", summary: "List flows",
			description: "A page of flows at their latest versions, by id, without their definitions.", scope: httpapi.ActionRead, condition: "Config.Flows",
			params: []any{"pageSize", "cursor"},
			ok:     []okResp{{status: 200, description: "A page of flows.", body: flowapi.ListResult{}}},
		},
		{
			method: "GET", path: "/api/flows/{id}", id: "getFlow", tag: "flows", summary: "Get a flow",
			description: "The flow's latest version, with its definition.", scope: httpapi.ActionRead, condition: "Config.Flows",
			params: []any{"flowId"},
			ok:     []okResp{{status: 200, description: "The latest version.", body: flowapi.Info{}}},
			errs:   []apiclient.Code{apiclient.CodeFlowNotFound},
		},
		{
			method: "GET", path: "/api/flows/{id}/versions", id: "listFlowVersions", tag: "flows", summary: "List a flow's versions",
			description: "Every version of the flow, lowest first, without definitions.", scope: httpapi.ActionRead, condition: "Config.Flows",
			params: []any{"flowId"},
			ok:     []okResp{{status: 200, description: "The versions.", body: flowapi.VersionList{}}},
			errs:   []apiclient.Code{apiclient.CodeFlowNotFound},
		},
		{
			method: "GET", path: "/api/flows/{id}/versions/{version}", id: "getFlowVersion", tag: "flows", summary: "Get a flow version",
			description: "One version of the flow, with its definition.", scope: httpapi.ActionRead, condition: "Config.Flows",
			params: []any{"flowId", obj{"name": "version", "in": "path", "required": true, "schema": obj{"type": "string"}, "description": "The version."}},
			ok:     []okResp{{status: 200, description: "The version.", body: flowapi.Info{}}},
			errs:   []apiclient.Code{apiclient.CodeFlowNotFound},
		},

		// Workers.
		{
			method: "GET", path: "/api/workers", id: "listWorkers", tag: "workers", summary: "List workers",
			description: "A page of the registered runners, by id. " + spansEveryNamespace, scope: httpapi.ActionRead,
			params: []any{
				obj{"name": "status", "in": "query", "schema": obj{"$ref": "#/components/schemas/WorkerStatus"}, "description": "Only workers with this status."},
				obj{"name": "queue", "in": "query", "schema": obj{"type": "string"}, "description": "Only workers that serve this queue."},
				"pageSize",
				obj{"name": "limit", "in": "query", "deprecated": true, "schema": obj{"type": "integer", "minimum": 1, "maximum": httpapi.MaxPageSize},
					"description": "Deprecated: the older name of pageSize (not both)."},
				"cursor"},
			ok: []okResp{{status: 200, description: "A page of workers.", body: apiclient.WorkerList{}}},
		},
		{
			method: "GET", path: "/api/workers/{id}", id: "getWorker", tag: "workers", summary: "Get a worker",
			description: "One registered runner. " + spansEveryNamespace, scope: httpapi.ActionRead, params: []any{"workerId"},
			ok:   []okResp{{status: 200, description: "The worker.", body: dftype.WorkerInfo{}}},
			errs: []apiclient.Code{apiclient.CodeWorkerNotFound},
		},
		{
			method: "POST", path: "/api/workers/{id}/drain", id: "drainWorker", tag: "workers", summary: "Drain a worker",
			description: "Asks the runner to stop claiming new work and finish what it holds; it sees the request at its next heartbeat. " + spansEveryNamespace + " The body, if any, must be an empty JSON object.",
			scope:       httpapi.ActionManage, params: []any{"workerId"},
			body: obj{"type": "object", "additionalProperties": false, "maxProperties": 0},
			ok:   []okResp{{status: 200, description: "The worker, draining.", body: dftype.WorkerInfo{}}},
			errs: []apiclient.Code{apiclient.CodeWorkerNotFound, apiclient.CodeWorkerOffline},
		},

		// Lifecycle events.
		{
			method: "GET", path: "/api/events", id: "listLifecycleEvents", tag: "lifecycle", summary: "List lifecycle events",
			description: "A page of the lifecycle event log of every namespace (docs/events.md), in id order: what happened to instances (created, started, step started, completed, failed, retrying, waiting, event received, paused, resumed, terminated, restarted, completed, errored) and to workers (online, draining, offline; these name a `workerId` and no workflow or instance). " + spansEveryNamespace,
			scope:       httpapi.ActionRead,
			params: []any{
				"lifecycleWorkflow", "lifecycleInstance", "lifecycleWorker", "lifecycleType", "lifecycleSince", "lifecycleUntil", "pageSize", "cursor"},
			ok:   []okResp{{status: 200, description: "A page of lifecycle events.", body: apiclient.LifecycleList{}}},
			errs: []apiclient.Code{apiclient.CodeInvalidInstanceID},
		},
		{
			method: "GET", path: "/api/events/stream", id: "streamLifecycleEvents", tag: "lifecycle", summary: "Stream lifecycle events",
			description: "Server-sent events: each new lifecycle event that matches the filters, as a message whose `id` is the event's id and whose `data` is its JSON (the items of listLifecycleEvents). It starts after the `Last-Event-ID` header, else after `after`, else after the newest event, and sends a comment line as a heartbeat every " + httpapi.StreamHeartbeat.String() + ". Bad filters are answered 400 before the stream starts. " + spansEveryNamespace,
			scope:       httpapi.ActionRead,
			params: []any{
				"lifecycleWorkflow", "lifecycleInstance", "lifecycleWorker", "lifecycleType",
				obj{"name": "after", "in": "query", "schema": obj{"type": "integer", "minimum": 0}, "description": "Start after the event with this id."},
				obj{"name": "Last-Event-ID", "in": "header", "schema": obj{"type": "string"}, "description": "Resume after the event with this id (sent by a reconnecting EventSource); it wins over after."}},
			ok: []okResp{{status: 200, description: "The stream.", contentType: "text/event-stream",
				body: obj{"type": "string", "description": "text/event-stream: `id: <event id>`, `event: lifecycle`, `data: <event JSON>` per event."}}},
			errs: []apiclient.Code{apiclient.CodeInvalidInstanceID},
		},
		{
			method: "GET", path: "/api/workflows/{name}/instances/{id}/lifecycle", id: "instanceLifecycle", tag: "lifecycle", summary: "List an instance's lifecycle events",
			description: "A page of the lifecycle events of the instance, every run's, in id order.",
			scope:       httpapi.ActionRead,
			params:      []any{"workflowName", "instanceId", "lifecycleType", "lifecycleSince", "lifecycleUntil", "pageSize", "cursor"},
			ok:          []okResp{{status: 200, description: "A page of lifecycle events.", body: apiclient.LifecycleList{}}},
			errs:        []apiclient.Code{apiclient.CodeWorkflowNotFound, apiclient.CodeInstanceNotFound, apiclient.CodeInvalidInstanceID},
		},
	}
}

// changeRule is the one rule of the life-cycle routes' answers.
const changeRule = "Pause, resume, terminate, restart and compensate all answer 200 with the instance as it is after the change."

// spansEveryNamespace ends the description of a route that acts on or
// reads every namespace at once.
const spansEveryNamespace = "Spans every namespace: a token limited to namespaces may not call it (403 FORBIDDEN)."

// namespacedCreate ends the description of the create routes.
const namespacedCreate = "Ids are unique per workflow across namespaces: an id another namespace uses is 409 INSTANCE_ID_ALREADY_EXISTS, as any taken id. A token limited to namespaces may name only the workflow's own queue or those its namespace is given, and a priority up to the server's cap (0 by default): anything else is 403 FORBIDDEN."

// apiDescription is the document's description: the rules every route
// follows.
const apiDescription = `Duraflow's management API: workflows, their instances, events, history, schedules, queues, flows, workers, the runner's tick and health.

**Paths.** The API is mounted under a prefix, ` + "`/api`" + ` unless the host chooses another (httpapi.Config.Prefix); this document's paths use ` + "`/api`" + `, and a server serves its own version, with its prefix, at ` + "`GET <prefix>/openapi.json`" + `. ` + "`/healthz`" + ` and ` + "`/readyz`" + ` are at the root, as are the host's triggers.

**Authentication.** Bearer tokens with scopes (` + "`Authorization: Bearer <token>`" + `); each operation names the one scope it needs as its security requirement: read, create, manage, events, flows, schedules or tick. A token's ` + "`*`" + ` grants every scope but tick. Missing or unknown credentials answer 401 UNAUTHORIZED (with WWW-Authenticate), a token without the scope 403 FORBIDDEN, both before the body is read. A server without tokens serves only requests whose Host is a loopback name or address, without credentials (403 FORBIDDEN otherwise). Cross-origin browser requests that change state are refused (403 FORBIDDEN).

**Namespaces.** Every instance route acts in one namespace: the ` + "`namespace`" + ` query parameter or the ` + "`Duraflow-Namespace`" + ` header selects it (default ` + "`default`" + `); a token limited to namespaces may select only its own, and an instance of another namespace is not found. The routes of schedules, queues, workers, lifecycle events, applying flows and the tick span every namespace: a token limited to namespaces may not call them (403 FORBIDDEN), and a host's Authorize hook sees their namespace as ` + "`*`" + `. Instance ids are unique per workflow across namespaces; the ids the engine picks (children, schedule firings, creates without an id) are random.

**Errors.** Every error answers ` + "`{\"error\":{\"code\":\"…\",\"message\":\"…\"}}`" + ` with a code of ErrorCode; each code belongs to one HTTP status. Each operation lists the codes it may answer by status. An unknown path answers 404 NOT_FOUND, a known path with another method 405 METHOD_NOT_ALLOWED, an unexpected failure 500 INTERNAL (the message says only to see the server log). While the database is unavailable (down, restarting, or locked past its busy timeout) a request answers 503 DATABASE_UNAVAILABLE with Retry-After, never 500: the server tries a read (GET) again a few times within about a second first, and never repeats a write, whose answer may have been lost after its commit (a create repeated with the same instance id or dedupe key cannot start a second instance).

**Bad input.** An unknown query parameter is refused: 400 INVALID_REQUEST naming it (and the ones the route allows); so is a parameter given twice unless the route says it repeats. ` + "`namespace`" + ` is allowed everywhere. A request body is one JSON object (except a flow definition, stored as sent, and a trigger's body) decoded strictly: a field the schema does not have, a value of the wrong type, malformed JSON or data after the object are 400 INVALID_REQUEST naming the field or the byte offset; nesting deeper than the payload limit allows is 400 PAYLOAD_TOO_DEEP; a body over the size limit is 413 PAYLOAD_TOO_LARGE, and one that does not arrive within the body timeout 408 REQUEST_TIMEOUT.

**Paging.** Every list (instances, history, schedules, flows, workers) answers a page with ` + "`hasNextPage`" + ` and, when it is true, a ` + "`cursor`" + `: pass it back as the ` + "`cursor`" + ` query parameter, with the same filters, for the next page. ` + "`pageSize`" + ` bounds the page (` + "`limit`" + `, on GET /workers, is a deprecated alias).

**Triggers.** A host may add HTTP triggers at the root (httpapi.Trigger): a request to one creates an instance of its workflow with params built from the request, in the trigger's namespace (` + "`default`" + ` unless it names one), and answers 202 TriggerResponse with a Location header. They need the create scope in that namespace. The served document lists them.`

// errorStatuses maps each error code to its HTTP status, from the comments
// of the Code constants (apiclient/errors.go: "// 404").
func errorStatuses(t *testing.T) map[apiclient.Code]int {
	t.Helper()
	codeType := reflect.TypeFor[apiclient.Code]()
	src := readSource()
	out := map[apiclient.Code]int{}
	for _, c := range constsOf(codeType) {
		doc := src.constDocs[typeKey(codeType)+"="+c]
		num := strings.TrimRight(strings.Fields(doc + " x")[0], ":,")
		status, err := strconv.Atoi(num)
		require.NoError(t, err, "the comment of code %s must start with its status: %q", c, doc)
		out[apiclient.Code(c)] = status
	}
	return out
}

// commonErrors are the codes every authenticated route may answer, and
// bodyErrors those of every route that reads a body.
var (
	commonErrors = []apiclient.Code{apiclient.CodeInvalidRequest, apiclient.CodeUnauthorized, apiclient.CodeForbidden, apiclient.CodeDatabaseUnavailable, apiclient.CodeInternal}
	bodyErrors   = []apiclient.Code{apiclient.CodeInvalidRequest, apiclient.CodePayloadTooDeep, apiclient.CodePayloadTooLarge, apiclient.CodeRequestTimeout}
)

// buildOpenAPI makes the document from the operation table.
func buildOpenAPI(t *testing.T) []byte {
	t.Helper()
	statuses := errorStatuses(t)
	g := newSchemaSet()
	g.ref(apiclient.ErrorResponse{}, false)
	g.ref(httpapi.TriggerResponse{}, false)
	params := sharedParameters()
	for _, p := range []struct {
		name, param, desc string
		schema            obj
	}{
		{"scheduleId", "id", "The schedule id.", obj{"type": "string"}},
		{"queueName", "name", "The queue's name (else 400 INVALID_REQUEST).", obj{"$ref": "#/components/schemas/QueueName"}},
		{"flowId", "id", "The flow's id.", obj{"type": "string"}},
		{"workerId", "id", "The worker's id.", obj{"type": "string"}},
	} {
		params[p.name] = obj{"name": p.param, "in": "path", "required": true, "schema": p.schema, "description": p.desc}
	}

	paths := obj{}
	tags := map[string]bool{}
	for _, op := range apiOperations() {
		tags[op.tag] = true
		o := obj{"operationId": op.id, "summary": op.summary, "description": op.description, "tags": []any{op.tag}}
		if op.condition != "" {
			o["description"] = op.description + "\n\nPresent when the host sets " + op.condition + "."
		}
		if op.deprecated {
			o["deprecated"] = true
		}
		var ps []any
		for _, p := range op.params {
			switch p := p.(type) {
			case string:
				require.Contains(t, params, p, op.id)
				ps = append(ps, obj{"$ref": "#/components/parameters/" + p})
			default:
				ps = append(ps, p)
			}
		}
		codes := slices.Clone(op.errs)
		if op.scope != "" {
			o["security"] = []any{obj{"bearer": []any{string(op.scope)}}}
			ps = append(ps, obj{"$ref": "#/components/parameters/namespaceQuery"}, obj{"$ref": "#/components/parameters/namespaceHeader"})
			codes = append(codes, commonErrors...)
		} else {
			o["security"] = []any{}
		}
		if len(ps) > 0 {
			o["parameters"] = ps
		}
		if op.body != nil {
			codes = append(codes, bodyErrors...)
			media := obj{"schema": bodySchema(g, op.body, true)}
			if op.bodyExample != nil {
				media["example"] = op.bodyExample
			}
			o["requestBody"] = obj{"required": op.bodyRequired, "content": obj{"application/json": media}}
		}
		responses := obj{}
		for _, r := range op.ok {
			resp := obj{"description": r.description}
			if r.body != nil {
				media := obj{"schema": bodySchema(g, r.body, false)}
				if r.example != nil {
					media["example"] = r.example
				}
				ct := r.contentType
				if ct == "" {
					ct = "application/json"
				}
				resp["content"] = obj{ct: media}
			}
			if len(r.headers) > 0 {
				h := obj{}
				for _, name := range r.headers {
					h[name] = obj{"$ref": "#/components/headers/" + name}
				}
				resp["headers"] = h
			}
			responses[strconv.Itoa(r.status)] = resp
		}
		byStatus := map[int][]apiclient.Code{}
		for _, c := range codes {
			status, ok := statuses[c]
			require.True(t, ok, "%s: unknown code %s", op.id, c)
			if !slices.Contains(byStatus[status], c) {
				byStatus[status] = append(byStatus[status], c)
			}
		}
		for status, cs := range byStatus {
			slices.Sort(cs)
			responses[strconv.Itoa(status)] = errorResponse(status, cs)
		}
		o["responses"] = responses
		item, _ := paths[op.path].(obj)
		if item == nil {
			item = obj{}
			paths[op.path] = item
		}
		m := strings.ToLower(op.method)
		require.NotContains(t, item, m, "%s %s twice", op.method, op.path)
		item[m] = o
	}

	// Trigger errors, for the operations the server adds per trigger.
	triggerCodes := append(slices.Clone(commonErrors), bodyErrors...)
	triggerCodes = append(triggerCodes, apiclient.CodeWorkflowNotFound, apiclient.CodeInvalidPriority)
	slices.Sort(triggerCodes)
	triggerCodes = slices.Compact(triggerCodes)

	var tagList []any
	tagDocs := map[string]string{
		"health": "Liveness, readiness and this document.", "workflows": "The registered workflows.",
		"instances": "Create, read and control workflow instances; send them events; read their history.",
		"runner":    "Drive the runner from outside (a cron job, a serverless scheduler).",
		"schedules": "Cron schedules that start workflows.", "queues": "Concurrency and rate limits of task queues.",
		"flows": "JSON flow definitions, versioned.", "workers": "The registry of runners, and draining them.",
		"lifecycle": "The lifecycle event log: what happened to instances, listed and streamed.",
		"triggers":  "The host's HTTP triggers (present in a server's own document only).",
	}
	tags["triggers"] = true
	for _, name := range []string{"health", "workflows", "instances", "runner", "schedules", "queues", "flows", "workers", "lifecycle", "triggers"} {
		require.True(t, tags[name], name)
		tagList = append(tagList, obj{"name": name, "description": tagDocs[name]})
	}

	for name, s := range ruleSchemas() {
		g.comps[name] = s
	}
	doc := obj{
		"openapi": "3.1.0",
		"info": obj{
			"title":       "Duraflow HTTP API",
			"version":     "1",
			"description": apiDescription,
			"license":     obj{"name": "Apache License 2.0", "identifier": "Apache-2.0"},
			"contact":     obj{"name": "Duraflow", "url": "https://github.com/duraflow/duraflow"},
		},
		"servers": []any{obj{"url": "/", "description": "The server that serves this document (its paths carry the prefix)."}},
		"tags":    tagList,
		"paths":   paths,
		"components": obj{
			"schemas":    g.comps,
			"parameters": params,
			"headers":    sharedHeaders(),
			"securitySchemes": obj{"bearer": obj{
				"type": "http", "scheme": "bearer",
				"description": "A token of the server (duraflow server --token name:secret:scopes). The scopes of a security requirement are the token scopes the operation needs.",
			}},
			"responses": obj{"TriggerError": errorResponse(0, triggerCodes)},
		},
	}
	// The statuses of the trigger errors, for TriggerError's description.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(doc))
	return b.Bytes()
}

// bodySchema is the schema of a body given as a Go value or an obj.
func bodySchema(g *schemaSet, body any, request bool) obj {
	if s, ok := body.(obj); ok {
		return s
	}
	return g.ref(body, request)
}

// errorResponse is the response of an error status whose code is one of
// codes; status 0 is any status (a trigger's default response).
func errorResponse(status int, codes []apiclient.Code) obj {
	enum := make([]any, len(codes))
	names := make([]string, len(codes))
	for i, c := range codes {
		enum[i], names[i] = string(c), string(c)
	}
	desc := strings.Join(names, ", ")
	if status != 0 {
		desc = http.StatusText(status) + ": " + desc
	}
	resp := obj{
		"description": desc,
		"content": obj{"application/json": obj{"schema": obj{
			"allOf": []any{
				obj{"$ref": "#/components/schemas/ErrorResponse"},
				obj{"properties": obj{"error": obj{"properties": obj{"code": obj{"enum": enum}}}}},
			},
		}}},
	}
	switch status {
	case http.StatusUnauthorized:
		resp["headers"] = obj{"WWW-Authenticate": obj{"$ref": "#/components/headers/WWW-Authenticate"}}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		resp["headers"] = obj{"Retry-After": obj{"$ref": "#/components/headers/Retry-After"}}
	}
	return resp
}

// TestOpenAPIDocument checks that openapi.json is what the operation table
// makes (-update rewrites it) and that kin-openapi loads and validates it,
// its examples included.
func TestOpenAPIDocument(t *testing.T) {
	want := buildOpenAPI(t)
	if *updateOpenAPI {
		require.NoError(t, os.WriteFile(openAPIFile, want, 0o644))
	}
	got, err := os.ReadFile(openAPIFile)
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run make generate (go test ./httpapi -run '^TestOpenAPIDocument$' -update)", openAPIFile)
	}
	if !*updateOpenAPI {
		require.True(t, bytes.Equal(got, httpapi.OpenAPIDocument()), "the embedded document is the file")
	}

	doc := loadOpenAPI(t, got)
	require.NoError(t, doc.Validate(t.Context(), openapi3.EnableExamplesValidation()))

	// Every error code is in the enum, and the enum holds nothing else.
	statuses := errorStatuses(t)
	var codes []string
	for c := range statuses {
		codes = append(codes, string(c))
	}
	sort.Strings(codes)
	var enum []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		enum = append(enum, fmt.Sprint(v))
	}
	sort.Strings(enum)
	require.Equal(t, codes, enum)
}

// loadOpenAPI loads a document with kin-openapi.
func loadOpenAPI(t *testing.T, data []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	require.NoError(t, err)
	return doc
}
