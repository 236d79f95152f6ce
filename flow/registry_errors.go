package flow

import "github.com/duraflow/duraflow/internal/flowapi"

// ErrNotFound means the flow, or the version of it, is not stored.
var ErrNotFound = flowapi.ErrNotFound

// ErrVersionConflict means a flow version was applied with a definition
// other than the one stored under that version. Stored versions never
// change: a changed flow needs a new version.
var ErrVersionConflict = flowapi.ErrVersionConflict

// Error names an instance of a flow fails with when its version cannot run.
const (
	// ErrorNameVersionNotFound is recorded when the version an instance is
	// pinned to is not stored.
	ErrorNameVersionNotFound = "FLOW_VERSION_NOT_FOUND"
	// ErrorNameInvalidFlow is recorded when the version an instance is
	// pinned to does not compile with this host's handlers.
	ErrorNameInvalidFlow = "INVALID_FLOW"
	// ErrorNameInvalidPin is recorded when the instance's metadata holds a
	// "flow" pin that cannot be read.
	ErrorNameInvalidPin = "INVALID_FLOW_PIN"
)

// runError fails a flow instance with a name of its own.
type runError struct {
	name string
	err  error
}

func (e *runError) Error() string     { return e.err.Error() }
func (e *runError) Unwrap() error     { return e.err }
func (e *runError) ErrorName() string { return e.name }
