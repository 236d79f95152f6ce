package flow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// MetadataKey is the key of instance metadata that holds a flow's pin.
const MetadataKey = "flow"

// Pin names the flow version an instance runs. It is recorded in the
// instance's metadata as {"flow":{"id":…,"version":…}}.
type Pin struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// PinOf returns the pin recorded in instance metadata, or nil when there is
// none (no metadata, or metadata without a "flow" key).
func PinOf(metadata json.RawMessage) (*Pin, error) {
	if len(bytes.TrimSpace(metadata)) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(metadata, &m); err != nil {
		return nil, fmt.Errorf("reading the flow pin of instance metadata: %w", err)
	}
	raw, ok := m[MetadataKey]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p Pin
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("reading the flow pin of instance metadata: %w", err)
	}
	return &p, nil
}

// WithPin returns metadata with pin recorded under "flow", keeping its other
// keys as they are. Metadata must be empty, null or a JSON object.
func WithPin(metadata json.RawMessage, pin Pin) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if t := bytes.TrimSpace(metadata); len(t) > 0 && string(t) != "null" {
		if t[0] != '{' {
			return nil, fmt.Errorf("%w: instance metadata must be a JSON object to record a flow pin", workflow.ErrInvalidRequest)
		}
		if err := json.Unmarshal(t, &m); err != nil {
			return nil, fmt.Errorf("%w: instance metadata: %v", workflow.ErrInvalidRequest, err)
		}
	}
	raw, err := json.Marshal(pin)
	if err != nil {
		return nil, err
	}
	m[MetadataKey] = raw
	return json.Marshal(m)
}

// Metadata pins the flow version of a new instance: it is the MetadataFunc
// of client.Config. For a flow, it returns the metadata with the latest
// version recorded under "flow" (see Pin), or checks a pin the caller
// recorded there; for a Go workflow it returns the metadata unchanged. A
// name the host does not know is looked up in the store first, and a flow
// found there is registered, so an instance of a flow another process
// applied can be created at once.
func (r *Registry) Metadata(ctx context.Context, workflowName string, metadata json.RawMessage) (json.RawMessage, error) {
	if !r.IsFlow(workflowName) {
		if _, ok := wfcore.Lookup(r.cfg.Registry, workflowName); ok {
			return metadata, nil
		}
		if err := r.loadOne(ctx, workflowName); err != nil {
			return nil, err
		}
		if !r.IsFlow(workflowName) {
			return metadata, nil // the client answers that it is not found
		}
	}
	pin, err := PinOf(metadata)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", workflow.ErrInvalidRequest, err)
	}
	if pin != nil && pin.Version != "" {
		if pin.ID != workflowName {
			return nil, fmt.Errorf("%w: the flow pin names flow %q, not %q", workflow.ErrInvalidRequest, pin.ID, workflowName)
		}
		_, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: workflowName, Version: pin.Version})
		if errors.Is(err, db.ErrNotFound) {
			return nil, fmt.Errorf("%w: flow %q has no version %q", workflow.ErrInvalidRequest, workflowName, pin.Version)
		}
		if err != nil {
			return nil, fmt.Errorf("pinning flow %q: %w", workflowName, err)
		}
		return metadata, nil
	}
	latest, err := r.cfg.Store.FlowGet(ctx, db.FlowRef{ID: workflowName})
	if err != nil {
		return nil, fmt.Errorf("pinning flow %q to its latest version: %w", workflowName, err)
	}
	return WithPin(metadata, Pin{ID: workflowName, Version: latest.Version})
}
