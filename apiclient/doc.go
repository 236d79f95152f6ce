// Package apiclient is the Go client of Duraflow's HTTP API, and the owner
// of what client and server share on the wire: the request and answer
// bodies, the error codes, and the one table that maps errors to statuses
// and codes (ErrorCode).
//
// A Client's errors are *APIError values for answers of the server, which
// match the workflow sentinels (and those of schedules and flows) with
// errors.Is, so code written against client.Client reads the same over
// HTTP. Client implements workflow.Engine, so a registry can be bound to a
// remote server.
//
// The package must not import the server (package httpapi), its router
// (echo), the flow engine or its expression library, or a database driver:
// a program that only calls the API links none of them. A test checks its
// dependencies.
package apiclient
