package dftype

import "encoding/json"

// ParentPolicy says what happens to a child when its parent is terminated
// or restarted (a restart ends the run that waits for the child).
type ParentPolicy string

// Parent policies.
const (
	// ParentTerminate terminates the child with its parent, and when its
	// parent restarts (the default).
	ParentTerminate ParentPolicy = "terminate"
	// ParentAbandon leaves the child running when its parent is terminated
	// or restarted.
	ParentAbandon ParentPolicy = "abandon"
)

// ParentRef names the step of a parent instance that invokes a child: the
// engine sets it on the CreateRequest of an Invoke step's child.
type ParentRef struct {
	WorkflowName string       `json:"workflowName"`
	InstanceID   string       `json:"instanceId"`
	RunNumber    int          `json:"runNumber"`
	StepKey      string       `json:"step"`
	Policy       ParentPolicy `json:"policy,omitempty"`
	// Depth is how many parents the child has (1 for the child of an
	// instance no step invoked), counted along the recorded parent links:
	// filled by a Get of one instance and by the list of an instance's
	// children (InstanceInfo.Parent), not by other lists.
	// The engine sets it on a child's CreateRequest; the store does not
	// keep it.
	Depth int `json:"depth"`
}

// ChildRef is one child in the answer of a Get of its parent.
type ChildRef struct {
	WorkflowName string         `json:"workflowName"`
	ID           string         `json:"id"`
	Status       InstanceStatus `json:"status"`
	// RunNumber and StepKey name the parent's run and Invoke step that
	// started the child.
	RunNumber int    `json:"runNumber"`
	StepKey   string `json:"step"`
}

// ChildOutcome is how a child's end reaches the Invoke step that waits for
// it: the payload recorded as the step's result.
type ChildOutcome struct {
	WorkflowName string          `json:"workflowName"`
	InstanceID   string          `json:"instanceId"`
	Status       InstanceStatus  `json:"status"`
	Output       json.RawMessage `json:"output,omitempty"`
	ErrorName    string          `json:"errorName,omitempty"`
	ErrorMessage string          `json:"errorMessage,omitempty"`
}
