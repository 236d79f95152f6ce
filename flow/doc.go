// Package flow defines JSON flows — workflows written as data rather than Go
// code — and compiles them into the step model of package workflow, so that a
// flow gets the durability, retries, pauses, events, history and management
// API of a Go workflow without any of its own.
//
// The package is the whole flow feature: definitions, their compilation and
// handlers, and the Registry, which stores definitions through a
// db.FlowStore, versions them and registers them in a host's
// workflow.Registry beside its Go workflows, so that flows are listed,
// created, driven and run exactly like Go workflows. It imports workflow
// and db (the store contract, never a backend), and nothing of HTTP, the
// command line or the runner; the HTTP routes over a Registry are package
// httpapi's, and a caller of them uses package apiclient, which links none
// of this package's dependencies.
//
// # Definitions
//
// A Definition is
//
//	{"id": "order", "version": "1.2.0", "name": "…", "description": "…",
//	 "initialStepId": "fetch",
//	 "steps": {"fetch": {"id": "fetch", "type": "http", "config": {…}, "input": {…},
//	                     "outputKey": "order", "transitions": {"onSuccess": "check", "onFailure": "alert"},
//	                     "retries": {"limit": 3, "delay": "2 seconds", "backoff": "exponential"},
//	                     "timeout": "30 seconds"},
//	           …},
//	 "output": "order.body"}
//
// Parse reads one strictly (an unknown field anywhere is an error at its
// path) and Validate checks what it means; both report every problem at once
// in a *ValidationError with JSON paths such as "steps.check.config.conditions[1].op".
// Compile validates and compiles. An empty onSuccess, or the target End
// ("$end"), ends the flow.
//
// # The context
//
// A flow instance carries a context, a JSON object. It starts as the
// instance's params (which must be an object; none is {}). Each step's output
// is stored at its outputKey, a dot path ("results.fetch"); a step without one
// discards its output, except a set step, which merges its values into the
// context. The flow's output is the final context, or the value at the path
// named by "output" (null when missing). Numbers keep every digit on their
// way through (they are json.Number, never float64).
//
// A step's input and the values of several handlers come from selectors
// (see Selector):
//
//	{"value": …}                        a static JSON value
//	{"key": "customer"}                 a top-level key of the context
//	{"path": "order.items.0.sku"}       a dot path; array indexes are digits
//	{"context": true}                   the whole context
//	{"template": "Hi ${user.name}"}     a string filled from the context
//
// # Compilation
//
// A compiled Flow is a workflow of json.RawMessage params and output (its Run
// method); register it with workflow.Register(reg, def.ID, compiled.Run) or
// Register. Each
// visit of a step becomes one durable step named "<step id>#<visit>", the
// visits of each id counted from 1 in a run, so loops replay exactly and
// every visit has its own history row:
//
//   - delay becomes step.Sleep;
//   - wait-for-event becomes step.WaitForEvent, whose output is the event's payload;
//   - every other handler runs inside step.Do, with the step's retries and timeout;
//   - a branch records the transition it took as its result.
//
// Everything between steps — selecting inputs, storing outputs, following
// transitions — is a pure function of the params and the recorded results,
// so a replay rebuilds the same context and takes the same path; a handler
// runs again only when its step has no recorded result. A step that fails
// for good (after its retries, or a wait that timed out) follows its
// onFailure transition with {stepId, name, message, attempts} stored at its
// outputKey, or at ErrorKey ("error") when it has none; without onFailure
// the flow fails with that step's error. One run visits at most
// Config.MaxStepsPerRun steps (the host's workflow.EngineLimits, 1024 by
// default), delays included (see WithStepLimit); a runaway loop fails
// with TOO_MANY_STEPS, an error matching workflow.ErrTooManySteps. One
// version is compiled per registered name: pinning an instance to the
// version it started with belongs to the flow registry.
//
// # Versions
//
// Versions are semantic versions compared by SemVer precedence, so "1.10.0"
// is newer than "1.9.0" (see ParseVersion, CompareVersions, SortVersions and
// LatestVersion). They are parsed with golang.org/x/mod/semver, the Go
// team's implementation of SemVer 2.0 that the go command itself uses for
// module versions: small, dependency-free and exact about pre-release
// ordering. ParseVersion is stricter than it (no "v" prefix, shorthand or
// build metadata), so that one version has one spelling.
//
// # Handlers
//
// A Handler runs the steps of one type; Handlers is the set a flow is
// validated and compiled against. NewHandlers returns the built-ins, which
// WithHandler extends or replaces:
//
//   - http (HTTPConfig): a request from templates, with a body, a timeout,
//     capped redirects and response size; the url's values are escaped for
//     the part of the URL they land in unless a placeholder says raw
//     ("${raw:base}"); internal addresses are refused at dial time unless
//     the host allow-lists them (HTTPHandlerConfig.Allow).
//   - delay (DelayConfig): a durable sleep.
//   - branch (BranchConfig): the first condition that holds (eq, neq, gt,
//     gte, lt, lte, exists, notExists, in) picks the next step, else the
//     default, else a NO_MATCH failure.
//   - transform (TransformConfig): a preset (upper, lower, trim, json.parse,
//     json.stringify) or a sandboxed expr expression over the context.
//   - set (SetConfig): context values from selectors.
//   - wait-for-event (WaitForEventConfig): a durable wait for an event.
//   - exec (ExecConfig): a command the host allow-listed
//     (ExecHandlerConfig.Commands; none by default), JSON on stdin and
//     stdout, no shell, run in a process group of its own that is killed
//     when its attempt ends.
//
// # The registry: applying
//
// Apply reads a definition strictly (Parse), validates it against the
// host's handlers (Validate, so an http step to an address the host
// refuses or an exec command it does not list is rejected before it is
// stored), stores it byte for byte, and registers the flow under its id.
// A version is immutable: applying it again with the same definition (the
// same JSON, however it is spaced) changes nothing, with a different one
// fails with ErrVersionConflict. A flow id may not be the name of a Go
// workflow of the host.
//
// # The registry: versions and pinning
//
// Every instance of a flow runs one version for its whole life. The client
// pins it when the instance is created (Metadata is client.Config's
// MetadataFunc): the latest version at that moment — a release before any
// pre-release, then the highest by semantic version, as LatestVersion
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
// # The registry: several processes
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
// # Inside
//
// What no caller needs lives under flow/internal, where only this package
// reaches it: the expression sandbox of the transform handler (sandbox, the
// only package that knows expr), the address guard of the http handler
// (netguard), the process groups of the exec handler (procgroup) and the
// names of JSON value types (jsonvalue). The errors, problems and registry
// results that the HTTP API carries are internal/flowapi's, which this
// package and package apiclient both re-export, and the ordering of versions
// is internal/flowversion's, which package db applies too.
//
// # Dependencies
//
//   - github.com/expr-lang/expr (≥ v1.17.7) evaluates transform expressions:
//     a small, widely used expression language with no I/O of its own, a node
//     limit (expr.MaxNodes), a memory budget, and an AST patching hook that
//     this package uses to meter operations, time and value sizes during
//     the evaluation; the built-ins that could outgrow their arguments are
//     replaced by size-checked ones (package flow/internal/sandbox has the
//     audit).
//   - golang.org/x/mod/semver orders flow versions (see Versions).
package flow
