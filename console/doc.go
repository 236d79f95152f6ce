// Package console is the web console of the duraflow command: server-rendered
// HTML pages, embedded in the binary with go:embed, served at /ui beside the
// HTTP API. It shows the overview (counts by status, throughput over the
// last hour), the workflows and flow versions, instances with a status
// filter, id search and cursor pages, an instance with its step timeline,
// params, output, error, events, parent and children, the schedules and the
// workers, and it pauses, resumes, terminates, restarts and sends events,
// each after a confirmation page.
//
// It reads and changes everything through the same in-process services as
// the API (client.Client, schedule.Scheduler, flow.Registry, db.StatsStore)
// and authorizes through httpapi.Authenticator: the same tokens, scopes and
// namespaces, loopback only without tokens. A login form exchanges a token
// for a server-side session (the cookie holds a random id, never the
// token); every form carries the session's CSRF token and every POST is
// checked for it and for a same-origin Origin or Referer. Sessions are
// bounded per token, failed logins throttled per client address, and what
// a form sends is held to the API's limits (Config.Limits). No page reads
// a payload it does not show.
//
// The console must not know a database backend, the runner or the command:
// the command mounts Handler at Path.
package console
