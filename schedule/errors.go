package schedule

import "errors"

// Errors of schedule management. Calls return them wrapped with detail, so
// callers test them with errors.Is; the HTTP API maps them to statuses.
// Invalid input (a cron expression, a time zone, an id) wraps
// workflow.ErrInvalidRequest, and an unknown workflow
// workflow.ErrWorkflowNotFound.
var (
	// ErrNotFound means no schedule has the id.
	ErrNotFound = errors.New("schedule not found")
	// ErrAlreadyExists means a schedule with the id exists already.
	ErrAlreadyExists = errors.New("schedule id already exists")
)
