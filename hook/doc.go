// Package hook delivers durable hooks: calls into host code that report what
// the engine did, recorded in the same transaction as the change (an outbox)
// and delivered after commit, at least once, retried with backoff until the
// host code succeeds.
//
// The one hook today is OnWorkflowEnqueued: a workflow instance was enqueued
// for execution (created, woken by an event, resumed, scheduled for a retry or
// a timer). The host (duraflow.Config.Hooks) turns recording on in its
// client, runner and scheduler together and runs the Deliverer; a program
// that builds the parts itself sets RecordHooks on each of their configs.
//
// The package knows the Store and nothing above it: no HTTP, no runner.
package hook
