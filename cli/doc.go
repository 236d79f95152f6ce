// Package cli is the duraflow command as a library: dev, serve, worker,
// migrate and the client commands (workflows, instances, events, schedules,
// flows) in one cobra command tree.
//
// Code workflows must be compiled into the binary that runs them, so a
// project builds its own duraflow with its workflows registered, in one call:
//
//	func main() {
//		os.Exit(cli.Main(cli.WithWorkflows(myapp.Register)))
//	}
//
// cmd/duraflow is exactly that, with the demo workflows of examples/demo.
//
// Like a program, the package wires concrete pieces together: a store opened
// from a database URL (db/dburl; on Postgres with its wake channel), the
// management client, a runner, the wake-ups of package dispatcher
// (in-process, and Postgres LISTEN/NOTIFY across processes), durable hooks
// (package hook), the cron scheduler (package schedule), the flow registry
// (package flow, with dev's stub service of internal/devstub) and the
// HTTP API with its triggers (package httpapi). It holds no engine logic
// of its own, and the client commands know no database: they speak only
// HTTP, through apiclient.Client. No package of the engine imports it.
package cli
