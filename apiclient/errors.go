package apiclient

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/internal/flowapi"
	"github.com/duraflow/duraflow/schedule"
	"github.com/duraflow/duraflow/workflow"
)

// Code is the machine-readable code of an error answer,
// {"error":{"code":"…","message":"…"}}.
type Code string

// Error codes. Each belongs to exactly one HTTP status.
const (
	CodeWorkflowNotFound        Code = "WORKFLOW_NOT_FOUND"         // 404
	CodeInstanceNotFound        Code = "INSTANCE_NOT_FOUND"         // 404
	CodeInstanceIDAlreadyExists Code = "INSTANCE_ID_ALREADY_EXISTS" // 409
	CodeInstanceTerminal        Code = "INSTANCE_TERMINAL"          // 409
	CodeScheduleNotFound        Code = "SCHEDULE_NOT_FOUND"         // 404
	CodeScheduleAlreadyExists   Code = "SCHEDULE_ALREADY_EXISTS"    // 409
	CodeFlowNotFound            Code = "FLOW_NOT_FOUND"             // 404
	CodeWorkerNotFound          Code = "WORKER_NOT_FOUND"           // 404
	CodeWorkerOffline           Code = "WORKER_OFFLINE"             // 409: a drain of an offline worker
	CodeFlowVersionConflict     Code = "FLOW_VERSION_CONFLICT"      // 409
	CodeInvalidFlow             Code = "INVALID_FLOW"               // 400, with the problems
	CodeQueueNotFound           Code = "QUEUE_NOT_FOUND"            // 404
	CodeInvalidLimit            Code = "INVALID_LIMIT"              // 400
	CodeInvalidConcurrencyKey   Code = "INVALID_CONCURRENCY_KEY"    // 400
	CodeInvalidInstanceID       Code = "INVALID_INSTANCE_ID"        // 400
	CodeInvalidEventType        Code = "INVALID_EVENT_TYPE"         // 400
	CodeInvalidRequest          Code = "INVALID_REQUEST"            // 400
	CodeInvalidPriority         Code = "INVALID_PRIORITY"           // 400: outside workflow.MinPriority..MaxPriority
	CodePayloadTooLarge         Code = "PAYLOAD_TOO_LARGE"          // 413
	CodePayloadTooDeep          Code = "PAYLOAD_TOO_DEEP"           // 400
	CodeUnauthorized            Code = "UNAUTHORIZED"               // 401
	CodeForbidden               Code = "FORBIDDEN"                  // 403
	CodeNotFound                Code = "NOT_FOUND"                  // 404: no such route
	CodeMethodNotAllowed        Code = "METHOD_NOT_ALLOWED"         // 405
	CodeRequestTimeout          Code = "REQUEST_TIMEOUT"            // 408: the body did not arrive within BodyTimeout
	CodeTickBusy                Code = "TICK_BUSY"                  // 429: every tick slot is taken
	CodeNotReady                Code = "NOT_READY"                  // 503: Config.Ready failed
	CodeDatabaseUnavailable     Code = "DATABASE_UNAVAILABLE"       // 503: the database cannot serve now (db.ErrUnavailable); try again after Retry-After
	CodeInternal                Code = "INTERNAL"                   // 500
)

// ErrUnauthorized means a request carried no credentials, or unknown ones. An
// AuthorizeFunc returns it (wrapped or not) to answer 401 UNAUTHORIZED.
var ErrUnauthorized = errors.New("unauthorized")

// ErrForbidden means known credentials lack the scope a route needs. An
// AuthorizeFunc returns it (wrapped or not) to answer 403 FORBIDDEN.
var ErrForbidden = errors.New("forbidden")

// The errors of the codes that only the server itself causes. A caller
// matches them with errors.Is like the others.
var (
	// ErrRouteNotFound is NOT_FOUND: no route has the request's path.
	ErrRouteNotFound = errors.New("no such route")
	// ErrMethodNotAllowed is METHOD_NOT_ALLOWED: the path has no route for
	// the request's method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrTickBusy is TICK_BUSY: every tick slot of the server is taken.
	ErrTickBusy = errors.New("a tick is already running")
	// ErrRequestTimeout is REQUEST_TIMEOUT: the request body did not arrive
	// within the server's body timeout.
	ErrRequestTimeout = errors.New("request body timeout")
	// ErrNotReady is NOT_READY: the server's readiness check failed.
	ErrNotReady = errors.New("not ready")
)

// fixedMessages are the messages of the codes whose cause stays in the
// server (ErrorMessage): a DATABASE_UNAVAILABLE error's driver error names
// the database's address and user.
var fixedMessages = map[Code]string{
	CodeDatabaseUnavailable: "the database is unavailable; try again shortly",
}

// errorKinds is the one mapping between errors, statuses and codes: the
// server answers with the first row whose error the failure matches
// (ErrorCode), and APIError.Is matches a code back to its row's error. Order matters where
// one code has several errors: the first is what APIError.Is reports.
var errorKinds = []struct {
	err    error
	status int
	code   Code
}{
	// First: a failure the database's outage caused says so, whatever
	// else its chain holds (a conclusion drawn from a read that failed).
	{db.ErrUnavailable, http.StatusServiceUnavailable, CodeDatabaseUnavailable},
	{workflow.ErrWorkflowNotFound, http.StatusNotFound, CodeWorkflowNotFound},
	{workflow.ErrInstanceNotFound, http.StatusNotFound, CodeInstanceNotFound},
	{workflow.ErrInstanceAlreadyExists, http.StatusConflict, CodeInstanceIDAlreadyExists},
	{workflow.ErrInstanceTerminal, http.StatusConflict, CodeInstanceTerminal},
	{schedule.ErrNotFound, http.StatusNotFound, CodeScheduleNotFound},
	{schedule.ErrAlreadyExists, http.StatusConflict, CodeScheduleAlreadyExists},
	{flowapi.ErrNotFound, http.StatusNotFound, CodeFlowNotFound},
	{dftype.ErrWorkerNotFound, http.StatusNotFound, CodeWorkerNotFound},
	{dftype.ErrWorkerOffline, http.StatusConflict, CodeWorkerOffline},
	{flowapi.ErrVersionConflict, http.StatusConflict, CodeFlowVersionConflict},
	{flowapi.ErrInvalidDefinition, http.StatusBadRequest, CodeInvalidFlow}, // before INVALID_REQUEST, which it matches too
	{workflow.ErrQueueNotFound, http.StatusNotFound, CodeQueueNotFound},
	{workflow.ErrInvalidLimit, http.StatusBadRequest, CodeInvalidLimit},
	{workflow.ErrConcurrencyKey, http.StatusBadRequest, CodeInvalidConcurrencyKey},
	{workflow.ErrInvalidInstanceID, http.StatusBadRequest, CodeInvalidInstanceID},
	{workflow.ErrInvalidEventType, http.StatusBadRequest, CodeInvalidEventType},
	{workflow.ErrInvalidPriority, http.StatusBadRequest, CodeInvalidPriority}, // before INVALID_REQUEST, which it matches too
	{workflow.ErrInvalidRequest, http.StatusBadRequest, CodeInvalidRequest},
	{workflow.ErrInvalidWorkflowName, http.StatusBadRequest, CodeInvalidRequest},
	{workflow.ErrPayloadTooLarge, http.StatusRequestEntityTooLarge, CodePayloadTooLarge},
	{workflow.ErrPayloadTooDeep, http.StatusBadRequest, CodePayloadTooDeep},
	{ErrUnauthorized, http.StatusUnauthorized, CodeUnauthorized},
	{ErrForbidden, http.StatusForbidden, CodeForbidden},
	{ErrRouteNotFound, http.StatusNotFound, CodeNotFound},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, CodeMethodNotAllowed},
	{ErrRequestTimeout, http.StatusRequestTimeout, CodeRequestTimeout},
	{ErrTickBusy, http.StatusTooManyRequests, CodeTickBusy},
	{ErrNotReady, http.StatusServiceUnavailable, CodeNotReady},
}

// ErrorCode returns the HTTP status and the code a Duraflow server answers
// err with, from the first row of the package's table whose error err
// matches (errors.Is); ok is false for an error the table doesn't know, which
// the server answers with 500 INTERNAL. The server answers through it and
// APIError.Is reads the same table backwards, so the two cannot drift.
func ErrorCode(err error) (status int, code Code, ok bool) {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.status, k.code, true
		}
	}
	return 0, "", false
}

// ErrorMessage returns the message a Duraflow server answers err with:
// err's own text, or the fixed text of a code whose cause stays in the
// server (DATABASE_UNAVAILABLE: the driver's error names the database).
// Call it for an error ErrorCode knows.
func ErrorMessage(err error) string {
	if _, code, ok := ErrorCode(err); ok && fixedMessages[code] != "" {
		return fixedMessages[code]
	}
	return err.Error()
}

// APIError is an error answer of the HTTP API, as Client returns it and the
// server writes it. It
// matches (errors.Is) the sentinel of its code: workflow.ErrInstanceNotFound
// for INSTANCE_NOT_FOUND, ErrUnauthorized for UNAUTHORIZED, and so on
// (INVALID_REQUEST matches workflow.ErrInvalidRequest), and any *APIError
// with the same code, so errors.Is(err, &APIError{Code: CodeTickBusy}) works
// for the codes that have no sentinel.
type APIError struct {
	// Status is the HTTP status.
	Status int `json:"-"`
	// Code is the error code, one of the Code constants (or HTTP_<status>
	// for an answer that did not come from a Duraflow server, such as a
	// proxy's error page).
	Code Code `json:"code"`
	// Message says what went wrong, for people.
	Message string `json:"message"`
	// Problems and Warnings list what is wrong with a flow definition
	// (INVALID_FLOW), each at its JSON path.
	Problems []Problem `json:"problems,omitempty"`
	Warnings []Problem `json:"warnings,omitempty"`
}

// Error returns the code and the message.
func (e *APIError) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Is reports whether target is the sentinel error of e's code, or an
// *APIError with the same code.
func (e *APIError) Is(target error) bool {
	if t, ok := target.(*APIError); ok {
		return t.Code == e.Code
	}
	for _, k := range errorKinds {
		if k.code == e.Code {
			return k.err == target
		}
	}
	return false
}

// ErrorResponse is the JSON shape of every error answer,
// {"error":{"code":"…","message":"…"}}.
type ErrorResponse struct {
	Error *APIError `json:"error"`
}
