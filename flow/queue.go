package flow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duraflow/duraflow/workflow"
)

// Queue returns the task queue of a new instance of a flow whose Create call
// names none: that of the flow version its metadata pins (see Metadata, which
// runs first), or "" for a Go workflow or a metadata without a pin, which
// leaves the workflow's registered queue (workflow.Definition.Queue). It is
// the QueueFunc of client.Config. The version is compiled once and cached,
// so a create reads no more from the store than the pin did.
func (r *Registry) Queue(ctx context.Context, workflowName string, metadata json.RawMessage) (string, error) {
	if !r.IsFlow(workflowName) {
		return "", nil
	}
	pin, err := PinOf(metadata)
	if err != nil {
		return "", fmt.Errorf("%w: %v", workflow.ErrInvalidRequest, err)
	}
	if pin == nil || pin.Version == "" {
		return "", nil
	}
	f, err := r.runs.compiled(ctx, workflowName, pin.Version, false)
	if err != nil {
		return "", fmt.Errorf("finding the queue of flow %q version %s: %w", workflowName, pin.Version, err)
	}
	return f.def.Queue, nil
}
