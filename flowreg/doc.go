// Package flowreg is the flow registry: JSON flow definitions stored in the
// database (db.FlowStore), versioned, and registered in a host's
// workflow.Registry beside its Go workflows, so that flows are listed,
// created, driven and run exactly like Go workflows.
//
// # Applying
//
// Apply reads a definition strictly (flow.Parse), validates it against the
// host's handlers (flow.Validate, so an http step to an address the host
// refuses or an exec command it does not list is rejected before it is
// stored), stores it byte for byte, and registers the flow under its id.
// A version is immutable: applying it again with the same definition (the
// same JSON, however it is spaced) changes nothing, with a different one
// fails with ErrVersionConflict. A flow id may not be the name of a Go
// workflow of the host.
//
// # Versions and pinning
//
// Every instance of a flow runs one version for its whole life. The client
// pins it when the instance is created (Metadata is client.Config's
// MetadataFunc): the latest version at that moment — a release before any
// pre-release, then the highest by semantic version, as flow.LatestVersion
// picks it — is written into the instance's metadata:
//
//	{"trigger":{…}, "flow":{"id":"order","version":"1.10.0"}}
//
// A restart keeps the metadata, so a restarted instance runs its version
// again, whatever was applied since. A Go caller may pin a version itself by
// putting a "flow" object in CreateRequest.Metadata (it must exist). An
// instance without a pin — one written without the client, such as a cron
// schedule's — runs the version that was latest when it was created, by the
// creation times of the instance and of the versions, which never change.
//
// The flow registered under an id is a dispatcher: on every execution it
// reads the instance's pin (one primary-key read, then cached per
// instance) and runs that version, compiled once per (id, version) and
// cached. Store errors on this path are retried with backoff until the run's
// context ends, so a database hiccup never fails an instance; a pinned
// version that is missing or does not compile with this host's handlers
// fails it (FLOW_VERSION_NOT_FOUND, INVALID_FLOW).
//
// # Several processes
//
// A flow applied in one process is registered there at once. Others learn
// of it three ways:
//
//   - Load, called when a host starts, registers every stored flow;
//   - a refresh (Start) repeats Load every RefreshInterval (10 s by
//     default), and at once when Notify is told of a workflow name the host
//     does not know — hosts call it with the names of wake-ups, so a Postgres
//     NOTIFY for a new flow's instance makes a worker register the flow and
//     claim the instance at once (WakeFunc then wakes its runner);
//   - Metadata loads an unknown name from the store before the client looks
//     it up, so creating an instance of a flow applied elsewhere works at
//     once; Resolve does the same for a name alone (a schedule's).
//
// Runners claim only the workflow names of their registry, so a runner never
// claims an instance of a flow it has not registered. A stored flow whose
// latest version does not validate with this host's handlers is skipped with
// a warning (once per version) and not registered here; give every process
// the same handler configuration.
//
// The package imports db, workflow and workflow/flow, and nothing of HTTP,
// the command line or the runner.
package flowreg
