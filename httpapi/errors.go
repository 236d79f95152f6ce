package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/workflow"
)

// ErrUnauthorized means a request carried no credentials, or unknown ones. An
// AuthorizeFunc returns it (wrapped or not) to answer 401 UNAUTHORIZED. It is
// apiclient.ErrUnauthorized, which the client's errors match.
var ErrUnauthorized = apiclient.ErrUnauthorized

// ErrForbidden means known credentials lack the scope a route needs. An
// AuthorizeFunc returns it (wrapped or not) to answer 403 FORBIDDEN. It is
// apiclient.ErrForbidden.
var ErrForbidden = apiclient.ErrForbidden

// internalMessage is all a caller learns of a failure the table doesn't know.
const internalMessage = "internal error (see the server log)"

// errorStatus maps an error to its answer through apiclient's table. known
// is false for failures the table doesn't know; their message is never
// shown to the caller, nor is the cause of one whose code has a fixed
// message (apiclient.ErrorMessage).
func errorStatus(err error) (status int, code apiclient.Code, message string, known bool) {
	if status, code, ok := apiclient.ErrorCode(err); ok {
		return status, code, apiclient.ErrorMessage(err), true
	}
	return http.StatusInternalServerError, apiclient.CodeInternal, internalMessage, false
}

// echoError turns echo's own errors (unknown route, wrong method, anything a
// middleware of echo's returns) into the package's.
func echoError(he *echo.HTTPError, r *http.Request) error {
	msg := fmt.Sprint(he.Message)
	switch he.Code {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s %s", apiclient.ErrRouteNotFound, r.Method, r.URL.Path)
	case http.StatusMethodNotAllowed:
		return fmt.Errorf("%w: %s %s", apiclient.ErrMethodNotAllowed, r.Method, r.URL.Path)
	case http.StatusRequestEntityTooLarge:
		return fmt.Errorf("%w: %s", workflow.ErrPayloadTooLarge, msg)
	case http.StatusBadRequest:
		return fmt.Errorf("%w: %s", workflow.ErrInvalidRequest, msg)
	case http.StatusUnauthorized:
		return fmt.Errorf("%w: %s", ErrUnauthorized, msg)
	case http.StatusForbidden:
		return fmt.Errorf("%w: %s", ErrForbidden, msg)
	}
	return he
}

// newAPIError is the answer to err: its code and message, and the problems
// of a flow definition that failed validation.
func newAPIError(err error, code apiclient.Code, message string) *apiclient.APIError {
	e := &apiclient.APIError{Code: code, Message: message}
	if ve, ok := errors.AsType[*flow.ValidationError](err); ok && code == apiclient.CodeInvalidFlow {
		e.Problems, e.Warnings = ve.Problems, ve.Warnings
	}
	return e
}
