// Package flow defines JSON flows — workflows written as data rather than Go
// code — and compiles them into the step model of package workflow, so that a
// flow gets the durability, retries, pauses, events, history and management
// API of a Go workflow without any of its own.
//
// The package imports workflow and nothing above it: it knows no database,
// HTTP server or runner. Storing and versioning definitions, serving them over
// HTTP, triggers and schedules are built on top of it elsewhere.
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
// A compiled Flow is a workflow.Workflow[json.RawMessage, json.RawMessage];
// register it with workflow.Register(reg, def.ID, compiled) or Register. Each
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
// workflow.MaxStepsPerRun steps, delays included (see WithStepLimit); a
// runaway loop fails with TOO_MANY_STEPS, an error matching
// workflow.ErrTooManySteps. One version is compiled per registered name:
// pinning an instance to the version it started with belongs to the flow
// registry.
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
// # Dependencies
//
//   - github.com/expr-lang/expr (≥ v1.17.7) evaluates transform expressions:
//     a small, widely used expression language with no I/O of its own, a node
//     limit (expr.MaxNodes), a memory budget, and an AST patching hook that
//     this package uses to meter operations, time and value sizes during
//     the evaluation; the built-ins that could outgrow their arguments are
//     replaced by size-checked ones (sandbox.go has the audit).
//   - golang.org/x/mod/semver orders flow versions (see Versions).
package flow
