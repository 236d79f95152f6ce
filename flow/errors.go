package flow

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/duraflow/duraflow/flow/internal/netguard"
	"github.com/duraflow/duraflow/internal/flowapi"
	"github.com/duraflow/duraflow/workflow"
)

// ErrInvalidDefinition is matched (errors.Is) by every *ValidationError, so a
// caller can tell a rejected definition from other failures. A
// *ValidationError also matches workflow.ErrInvalidRequest, which the HTTP
// API maps to 400 INVALID_REQUEST.
var ErrInvalidDefinition = flowapi.ErrInvalidDefinition

// Error names that the built-in handlers and the compiled flow record. A step
// that fails with one of them is retried only where noted; the rest fail the
// step at once (they would fail the same way again).
const (
	// ErrorNameNoMatch is recorded by a branch step when no condition matched
	// and it has no default.
	ErrorNameNoMatch = "NO_MATCH"
	// ErrorNameInvalidInput is recorded when a step's input, a template or a
	// selector cannot be resolved or has the wrong shape.
	ErrorNameInvalidInput = "INVALID_INPUT"
	// ErrorNameInvalidConfig is recorded when a step's config is invalid at
	// run time (validation catches the static cases before).
	ErrorNameInvalidConfig = "INVALID_CONFIG"
	// ErrorNameHTTP is recorded by an http step whose response status is not
	// 2xx. It is retried for 408, 429 and 5xx.
	ErrorNameHTTP = "HTTP_ERROR"
	// ErrorNameHTTPRequest is recorded by an http step that got no response
	// (connection refused, reset, timeout). It is retried.
	ErrorNameHTTPRequest = "HTTP_REQUEST_FAILED"
	// ErrorNameAddressNotAllowed is recorded by an http step that was asked to
	// connect to a loopback, private, link-local or otherwise internal address
	// that the handler's allowlist does not permit.
	ErrorNameAddressNotAllowed = netguard.ErrorNameAddressNotAllowed
	// ErrorNameResponseTooLarge is recorded by an http step whose response
	// body is larger than the handler's limit.
	ErrorNameResponseTooLarge = "RESPONSE_TOO_LARGE"
	// ErrorNameTooManyRedirects is recorded by an http step that was
	// redirected more often than the handler allows.
	ErrorNameTooManyRedirects = "TOO_MANY_REDIRECTS"
	// ErrorNameExpression is recorded by a transform step whose expression
	// failed: a runtime error, or one of the sandbox's limits.
	ErrorNameExpression = "EXPRESSION_ERROR"
	// ErrorNameExec is recorded by an exec step whose command exited with an
	// error or could not start. It is retried.
	ErrorNameExec = "EXEC_ERROR"
	// ErrorNameExecOutput is recorded by an exec step whose command wrote
	// something other than one JSON value, or too much of it.
	ErrorNameExecOutput = "EXEC_OUTPUT_INVALID"
	// ErrorNameTooManySteps is the error name of a flow that visited more
	// steps in one run than its limit; the error matches
	// workflow.ErrTooManySteps.
	ErrorNameTooManySteps = "TOO_MANY_STEPS"
	// ErrorNameInvalidParams is the error name of a flow started with params
	// that are not a JSON object.
	ErrorNameInvalidParams = "INVALID_PARAMS"
)

// Problem is one thing wrong with a definition (or a warning about it).
type Problem = flowapi.Problem

// ValidationError lists every problem found in a definition, not only the
// first. Parse, Validate and Compile return it; a handler's Validate may
// return one whose paths are relative to the step's config, and the flow
// validator prefixes them. It matches ErrInvalidDefinition and
// workflow.ErrInvalidRequest.
type ValidationError = flowapi.ValidationError

// problemsOf turns an error returned from a handler or an unmarshaler into
// problems located under path.
func problemsOf(path string, err error) []Problem {
	var ve *ValidationError
	if errors.As(err, &ve) {
		out := make([]Problem, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			out = append(out, Problem{Path: joinPath(path, p.Path), Message: p.Message})
		}
		return out
	}
	return []Problem{{Path: path, Message: err.Error()}}
}

// newValidationError returns nil when there are no problems, and a
// *ValidationError with the problems sorted by path otherwise.
func newValidationError(problems, warnings []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	sortProblems(problems)
	sortProblems(warnings)
	return &ValidationError{Problems: problems, Warnings: warnings}
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
}

// joinPath joins JSON path elements: "a" + "b" is "a.b", "a" + "[0]" is "a[0]".
func joinPath(base, elem string) string {
	switch {
	case base == "":
		return elem
	case elem == "":
		return base
	case strings.HasPrefix(elem, "["):
		return base + elem
	}
	return base + "." + elem
}

// flowError is an error of the compiled flow itself (not of one step) that
// carries a recorded name.
type flowError struct {
	name string
	err  error
}

func (e *flowError) Error() string     { return e.err.Error() }
func (e *flowError) Unwrap() error     { return e.err }
func (e *flowError) ErrorName() string { return e.name }

// failure returns a non-retryable error with a recorded name, for a step
// that would fail the same way on every attempt.
func failure(name, format string, args ...any) error {
	return &workflow.NonRetryableError{Name: name, Err: fmt.Errorf(format, args...)}
}

// namedError is a retryable error with a recorded name.
type namedError struct {
	name string
	err  error
}

func (e *namedError) Error() string     { return e.err.Error() }
func (e *namedError) Unwrap() error     { return e.err }
func (e *namedError) ErrorName() string { return e.name }

// retryable returns a retryable error with a recorded name.
func retryable(name string, err error) error { return &namedError{name: name, err: err} }
