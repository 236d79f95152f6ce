package dftype

import (
	"encoding/json"
	"fmt"
	"time"
)

// Trigger types: what started an instance, as its provenance records it.
const (
	// TriggerHTTP is an HTTP trigger route of the server.
	TriggerHTTP = "http"
	// TriggerCron is a cron schedule.
	TriggerCron = "cron"
	// TriggerAPI is the create route of the management API.
	TriggerAPI = "api"
)

// Provenance says where an instance came from. Triggers record it in the
// instance's metadata under "trigger":
//
//	{"trigger":{"type":"http","source":"POST /hooks/orders","receivedAt":"…","requestId":"…"}}
//	{"trigger":{"type":"cron","source":"schedule nightly","scheduledFor":"…","receivedAt":"…"}}
type Provenance struct {
	// Type is TriggerHTTP, TriggerCron or TriggerAPI.
	Type string `json:"type"`
	// Source names the trigger: "POST /hooks/orders" (the route as
	// configured), "schedule nightly".
	Source string `json:"source"`
	// ScheduledFor is the due time a cron schedule fired for.
	ScheduledFor *time.Time `json:"scheduledFor,omitempty"`
	// ReceivedAt is when the trigger fired: the request arrived, or the
	// scheduler found the due time.
	ReceivedAt time.Time `json:"receivedAt"`
	// RequestID identifies the HTTP request: its X-Request-Id, or one the
	// server generated.
	RequestID string `json:"requestId,omitempty"`
}

// provenanceMetadata is the shape of metadata that records a provenance.
type provenanceMetadata struct {
	Trigger *Provenance `json:"trigger"`
}

// Metadata returns instance metadata that records p: {"trigger": p}.
func (p *Provenance) Metadata() json.RawMessage {
	b, err := json.Marshal(provenanceMetadata{Trigger: p})
	if err != nil {
		// Strings and times always encode.
		panic(fmt.Sprintf("encoding provenance: %v", err))
	}
	return b
}

// ProvenanceOf returns the provenance recorded in instance metadata, or nil
// when the metadata records none.
func ProvenanceOf(metadata json.RawMessage) (*Provenance, error) {
	if len(metadata) == 0 {
		return nil, nil
	}
	var m provenanceMetadata
	if err := json.Unmarshal(metadata, &m); err != nil {
		return nil, fmt.Errorf("reading the provenance of instance metadata: %w", err)
	}
	return m.Trigger, nil
}
