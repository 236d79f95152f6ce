// Package transition holds the rules of every state transition of a
// workflow instance, written once above the backends.
//
// Each rule is a pure function: given the current state a backend read (an
// instance's status, whether a pause was requested, whether an event is
// buffered) and what happened (a checkpoint, a management call, an event
// send, a create), it returns the writes as data: the instance status to
// set, what happens to the instance's task (TaskWrite), whether a hook entry
// is recorded (HookWrite), whether runners are notified, and what the call
// reports. A rule does no I/O and knows no SQL.
//
// Backends (db/postgres, db/sqlite) apply the plans, each in its best way:
// SQLite reads the facts under its write transaction and calls the rules in
// Go; Postgres, which decides some outcomes inside one statement on state it
// reads atomically, binds the plan's alternatives as statement parameters.
// Where a decision depends on such a fact, the plan names both branches (for
// example CheckpointPlan.Status and CheckpointPlan.StatusIfPauseRequested),
// so that the decision lives here and SQL only picks the branch the fact
// selects. Every backend runs db/storetest, and this package's table tests
// are the specification of the rules.
//
// This package imports only db and workflow: no backend, no driver, no
// runner.
package transition
