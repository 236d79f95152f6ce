package cli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"

	"github.com/duraflow/duraflow/apiclient"
	"github.com/duraflow/duraflow/httpapi"
	"github.com/duraflow/duraflow/workflow"
)

// Exit codes of the duraflow command. Scripts can tell failure kinds apart
// by them; every failure also prints one line on standard error.
const (
	// ExitOK means the command did what was asked.
	ExitOK = 0
	// ExitError is any failure without a code of its own: a server error
	// (HTTP 500); for dev, serve, worker and migrate, a database that cannot
	// be reached or migrated, a listen address in use, a server that
	// stopped with an error.
	ExitError = 1
	// ExitUsage means the command line was wrong: an unknown command or
	// flag, a missing argument, a flag or environment value that does not
	// parse, or a configuration the server refuses to start with (such as a
	// public --addr without tokens).
	ExitUsage = 2
	// ExitNotFound means the workflow, the instance, the schedule, the flow
	// or the worker does not exist (HTTP 404).
	ExitNotFound = 3
	// ExitConflict means the request conflicts with the state of what it
	// names: the id exists already, the instance is terminal, or the worker
	// to drain is offline (HTTP 409).
	ExitConflict = 4
	// ExitInvalid means the server or the command refused the input: a
	// malformed JSON argument, an invalid id or event type, a payload over
	// 1 MiB (HTTP 400, 413).
	ExitInvalid = 5
	// ExitAuth means the token is missing, unknown or lacks the scope
	// (HTTP 401, 403).
	ExitAuth = 6
	// ExitUnavailable means the server could not be reached: connection
	// refused, DNS failure, timeout.
	ExitUnavailable = 7
	// ExitInstanceErrored means the instance a command waited for ended
	// errored (instances result and execute, and instances create when it
	// saw the instance end within --wait). The command prints the instance,
	// and its error on standard error.
	ExitInstanceErrored = 8
	// ExitInstanceTerminated means the instance a command waited for was
	// terminated.
	ExitInstanceTerminated = 9
	// ExitWaitTimeout means the instance was not terminal when the wait of
	// instances result or execute (--wait) ran out; it goes on running.
	ExitWaitTimeout = 10
)

// exitError is an error with the exit code the command ends with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that the command exits with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// usageError marks err as a command-line mistake (ExitUsage).
func usageError(err error) error { return withCode(ExitUsage, err) }

// ExitCode returns the exit code for an error returned by a duraflow
// command: ExitOK for nil, the code of an HTTP API error by its status, and
// ExitError for anything else.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	switch {
	case errors.Is(err, workflow.ErrWorkflowNotFound), errors.Is(err, workflow.ErrInstanceNotFound):
		return ExitNotFound
	case errors.Is(err, workflow.ErrInstanceAlreadyExists), errors.Is(err, workflow.ErrInstanceTerminal):
		return ExitConflict
	case errors.Is(err, workflow.ErrInvalidRequest), errors.Is(err, workflow.ErrInvalidInstanceID),
		errors.Is(err, workflow.ErrInvalidEventType), errors.Is(err, workflow.ErrInvalidWorkflowName),
		errors.Is(err, workflow.ErrPayloadTooLarge), errors.Is(err, workflow.ErrPayloadTooDeep):
		return ExitInvalid
	case errors.Is(err, httpapi.ErrUnauthorized), errors.Is(err, httpapi.ErrForbidden):
		return ExitAuth
	}
	var api *apiclient.APIError
	if errors.As(err, &api) {
		switch {
		case api.Status == http.StatusNotFound:
			return ExitNotFound
		case api.Status == http.StatusConflict:
			return ExitConflict
		case api.Status == http.StatusBadRequest, api.Status == http.StatusRequestEntityTooLarge:
			return ExitInvalid
		case api.Status == http.StatusUnauthorized, api.Status == http.StatusForbidden:
			return ExitAuth
		case api.Status == http.StatusServiceUnavailable, api.Status == http.StatusBadGateway, api.Status == http.StatusGatewayTimeout:
			return ExitUnavailable
		}
		return ExitError
	}
	if unreachable(err) {
		return ExitUnavailable
	}
	if isCobraUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// unreachable reports whether err means the server could not be reached.
func unreachable(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var urlErr *url.Error
	return errors.As(err, &urlErr) && urlErr.Timeout()
}

// isCobraUsage recognises the usage errors cobra makes itself.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
