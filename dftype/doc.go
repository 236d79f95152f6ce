// Package dftype holds the types Duraflow's management side shares with
// workflow code: instances as the engine reports them (InstanceInfo, its
// status, pending steps and parent and child links), untyped create
// requests, workers, lifecycle events, trigger provenance, and Duration,
// the human-readable duration of JSON documents.
//
// It is a leaf: it imports only the standard library, so the client, the
// HTTP API, the runner and workflow authors can all use it without pulling
// in one another. The authoring API (defining and registering workflows and
// their steps) is package workflow.
package dftype
