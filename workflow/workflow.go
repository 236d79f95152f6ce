package workflow

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duraflow/duraflow/internal/wfhook"
)

// Event is the input of a run: the instance's typed params and identity.
type Event[P any] struct {
	// Payload is the instance's params, decoded.
	Payload P
	// Timestamp is when the instance (or its current run) was created.
	Timestamp time.Time
	// InstanceID is the instance id.
	InstanceID string
	// WorkflowName is the registered workflow name.
	WorkflowName string
	// RunNumber is 1 until the instance is restarted.
	RunNumber int
	// Metadata is what the engine recorded with the instance besides its
	// params (provenance, a flow's pinned version); nil when none.
	Metadata json.RawMessage
}

type runnable[P, O any] struct {
	name string
	run  func(ctx context.Context, event Event[P], step Step) (O, error)
}

// Name implements wfhook.Runnable.
func (r *runnable[P, O]) Name() string { return r.name }

// decodeParams decodes an instance's params into P, as Run receives them.
func (r *runnable[P, O]) decodeParams(raw json.RawMessage) (P, error) {
	var params P
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &params); err != nil {
			return params, fmt.Errorf("decoding params of workflow %q: %w", r.name, err)
		}
	}
	return params, nil
}

// CheckParams implements wfhook.ParamsChecker: it decodes params as Execute
// would, so that a create can refuse params the workflow could not run with.
func (r *runnable[P, O]) CheckParams(params json.RawMessage) error {
	_, err := r.decodeParams(params)
	return err
}

// Execute implements wfhook.Runnable; step is a Step or nil.
func (r *runnable[P, O]) Execute(ctx context.Context, raw wfhook.RawEvent, step any) (json.RawMessage, error) {
	s, _ := step.(Step)
	params, err := r.decodeParams(raw.Payload)
	if err != nil {
		return nil, NonRetryable(err)
	}
	out, err := r.run(ctx, Event[P]{
		Payload:      params,
		Timestamp:    raw.Timestamp,
		InstanceID:   raw.InstanceID,
		WorkflowName: raw.WorkflowName,
		RunNumber:    raw.RunNumber,
		Metadata:     raw.Metadata,
	}, s)
	if err != nil {
		return nil, err
	}
	b, err := marshalPayload("workflow output", out, cmp.Or(raw.MaxPayloadBytes, MaxPayloadBytes))
	if err != nil {
		return nil, err
	}
	return b, nil
}
