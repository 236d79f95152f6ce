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
// (OpenAPIDocument); a Server serves its own version at GET
// <prefix>/openapi.json, made to follow its configuration: its prefix,
// routes, triggers, limits and authentication (Server.OpenAPI). The tests
// generate the file from their operation table and the wire types, and
// validate every route's requests and answers against it; make
// openapi-client checks the served document with a generated TypeScript
// client, Redocly and Spectral.
//
// The instance routes answer one shape, apiclient.Instance: {"id": …,
// "details": {"status", "error"?, "output"?}, …the instance's other
// fields}. Create, get and each item of a batch answer it, and so do the
// life-cycle routes (pause, resume, terminate, restart, compensate), one
// rule for all five: 200 with the instance as it is after the change. A
// sent event answers 202 {"status": {…}}, the instance's status once the
// event is stored (apiclient.EventSent), its error and output only for a
// caller that may also read (ActionRead); the tick {"processed": n, …}.
// Every list (instances, history, schedules, flows, workers) pages the same
// way: pageSize and cursor in the query, "cursor" (absent on the last page)
// and "hasNextPage" in the answer; limit= on GET /workers is a deprecated
// alias of pageSize. docs/http-api.md has the table of answers.
//
// Bad input is refused before anything is written: a body is decoded
// strictly (an unknown field, a field of the wrong type, data after the
// object are 400 INVALID_REQUEST naming the field), and an unknown query
// parameter is refused, 400 INVALID_REQUEST naming it and the allowed ones.
// The request limits (Config.Limits: payload bytes, batch size, id, event
// type and workflow name lengths, page size) default to the engine's (the
// client's EngineLimits for payloads and batches) and may be lowered.
//
// A host program that embeds the API in its own server chooses where with
// Config.Prefix and mounts it there: Server.Register on an echo group, or
// Handler on a net/http ServeMux at Prefix+"/".
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
