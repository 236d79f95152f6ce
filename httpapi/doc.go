// Package httpapi serves Duraflow's management API over HTTP. Its Go
// client, and the bodies and error codes client and server share, are
// package apiclient, which a caller of the API imports without linking
// this package's dependencies.
//
// A Server mounts echo routes (under /api by default) over the management
// service of package client: list workflows, create, list, inspect and
// control instances, send events, read history, manage cron schedules (over
// a schedule.Scheduler), apply and read JSON flows (over a flow.Registry),
// and, when the host enables it, tick a runner.
// /healthz and /readyz sit at the root, outside the prefix and outside
// authentication. The host's HTTP triggers (Trigger) sit at the root too,
// behind the create action: routes that start a workflow from a request and
// record its provenance.
//
// The OpenAPI 3.1 document of the API is openapi.json in this package
// (OpenAPIDocument); a Server serves its own version, with its prefix and
// triggers, at GET <prefix>/openapi.json (Server.OpenAPI). The tests
// generate the file from their operation table and the wire types, and
// validate every route's requests and answers against it.
//
// Every error is JSON, {"error":{"code":"…","message":"…"}}, and one table,
// apiclient's (apiclient.ErrorCode), maps the workflow package's sentinel
// errors to statuses and codes; apiclient.Client turns those answers back
// into *apiclient.APIError values that match the same sentinels with
// errors.Is.
//
// Authentication is a list of bearer tokens with scopes (Token, ParseToken),
// or a host's own AuthorizeFunc. A server with neither serves only loopback
// hosts; CheckListenAddr lets the host refuse to listen anywhere else.
// Credentials are checked before a request body is read, and a refused
// request's connection is closed without reading the rest of its body;
// HTTPServer returns an *http.Server with the configured read-header, body,
// write and idle timeouts (Config.ReadHeaderTimeout and the others).
//
// The package knows nothing of databases, of how the runner executes
// workflow code, or of the command line: it speaks HTTP to client.Client and
// to whatever TickFunc the host gives it.
package httpapi
