package db

import "time"

// CompensationMarkerKey is the key of the step row that records a caller's
// request to compensate a run (Store.InstanceCompensate): a complete do step
// whose attempts are 0 until the runner takes the request up
// (Store.CompensationTake), then 1. Workflow code cannot name a step with
// the compensation prefix, so the key never collides with a step of its own.
const CompensationMarkerKey = "compensate:"

// InstanceCompensateParams are the arguments of Store.InstanceCompensate.
type InstanceCompensateParams struct {
	InstanceChangeParams
}

// CompensationTakeParams are the arguments of Store.CompensationTake.
type CompensationTakeParams struct {
	// Task is the held lease; the call is fenced by it.
	Task         TaskRef
	WorkflowName string
	InstanceID   string
	RunNumber    int
	// Now is the caller's clock; nil uses the database's.
	Now *time.Time
}
