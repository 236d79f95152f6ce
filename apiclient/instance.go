package apiclient

import (
	"encoding/json"
	"time"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/dftype"
)

// InstanceDetails is the status of an instance as the HTTP API answers it:
// its status, and its error or its output once it has one. It is the
// "details" of every Instance and the "status" of an EventSent.
type InstanceDetails struct {
	Status dftype.InstanceStatus `json:"status"`
	// Error is the error of an errored instance (or of the last failed run
	// of one that is being retried).
	Error *dftype.ErrorInfo `json:"error,omitempty"`
	// Output is the output of a complete instance, as its workflow returned
	// it.
	Output json.RawMessage `json:"output,omitempty"`
}

// Instance is an instance as the HTTP API answers it: the answer of
// create, get and the life-cycle routes (pause, resume, terminate,
// restart, compensate), one item of a batch or a list, and the instance of
// a history page. Its status is under Details; the other fields are those
// of dftype.InstanceInfo, with the same names. NewInstance and Info
// convert between the two.
type Instance struct {
	ID           string          `json:"id"`
	Details      InstanceDetails `json:"details"`
	WorkflowName string          `json:"workflowName"`
	Params       json.RawMessage `json:"params,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
	RunNumber    int             `json:"runNumber"`
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
	StartedAt    *time.Time      `json:"startedAt,omitempty"`
	CompletedAt  *time.Time      `json:"completedAt,omitempty"`
	// Namespace, Queue, Priority and the fields below are those of
	// dftype.InstanceInfo.
	Namespace    string             `json:"namespace"`
	Queue        string             `json:"queue"`
	Priority     int                `json:"priority"`
	DedupeKey    string             `json:"dedupeKey,omitempty"`
	Unserved     bool               `json:"unserved,omitempty"`
	Deduplicated bool               `json:"deduplicated,omitempty"`
	Parent       *dftype.ParentRef  `json:"parent,omitempty"`
	Children     []*dftype.ChildRef `json:"children,omitempty"`
	DeadlineAt   *time.Time         `json:"deadlineAt,omitempty"`
	RunAttempt   int                `json:"runAttempt,omitempty"`
	WaitingFor   *dftype.WaitingFor `json:"waitingFor,omitempty"`
	// Pending are the steps a waiting or paused instance waits on (get
	// only).
	Pending []*dftype.PendingStep `json:"pending,omitempty"`
}

// NewInstance returns the wire form of info; nil for nil.
func NewInstance(info *dftype.InstanceInfo) *Instance {
	if info == nil {
		return nil
	}
	return &Instance{
		ID:           info.ID,
		Details:      DetailsOf(info),
		WorkflowName: info.WorkflowName,
		Params:       info.Params,
		Metadata:     info.Metadata,
		RunNumber:    info.RunNumber,
		CreatedAt:    info.CreatedAt,
		UpdatedAt:    info.UpdatedAt,
		StartedAt:    info.StartedAt,
		CompletedAt:  info.CompletedAt,
		Namespace:    info.Namespace,
		Queue:        info.Queue,
		Priority:     info.Priority,
		DedupeKey:    info.DedupeKey,
		Unserved:     info.Unserved,
		Deduplicated: info.Deduplicated,
		Parent:       info.Parent,
		Children:     info.Children,
		DeadlineAt:   info.DeadlineAt,
		RunAttempt:   info.RunAttempt,
		WaitingFor:   info.WaitingFor,
		Pending:      info.Pending,
	}
}

// DetailsOf returns the status of info as the API answers it.
func DetailsOf(info *dftype.InstanceInfo) InstanceDetails {
	return InstanceDetails{Status: info.Status, Error: info.Error, Output: info.Output}
}

// Info returns the instance as dftype.InstanceInfo; nil for nil.
func (in *Instance) Info() *dftype.InstanceInfo {
	if in == nil {
		return nil
	}
	return &dftype.InstanceInfo{
		ID:           in.ID,
		Status:       in.Details.Status,
		Error:        in.Details.Error,
		Output:       in.Details.Output,
		WorkflowName: in.WorkflowName,
		Params:       in.Params,
		Metadata:     in.Metadata,
		RunNumber:    in.RunNumber,
		CreatedAt:    in.CreatedAt,
		UpdatedAt:    in.UpdatedAt,
		StartedAt:    in.StartedAt,
		CompletedAt:  in.CompletedAt,
		Namespace:    in.Namespace,
		Queue:        in.Queue,
		Priority:     in.Priority,
		DedupeKey:    in.DedupeKey,
		Unserved:     in.Unserved,
		Deduplicated: in.Deduplicated,
		Parent:       in.Parent,
		Children:     in.Children,
		DeadlineAt:   in.DeadlineAt,
		RunAttempt:   in.RunAttempt,
		WaitingFor:   in.WaitingFor,
		Pending:      in.Pending,
	}
}

// NewInstances returns the wire form of infos, never nil.
func NewInstances(infos []*dftype.InstanceInfo) []*Instance {
	out := make([]*Instance, len(infos))
	for i, info := range infos {
		out[i] = NewInstance(info)
	}
	return out
}

func infosOf(ins []*Instance) []*dftype.InstanceInfo {
	out := make([]*dftype.InstanceInfo, len(ins))
	for i, in := range ins {
		out[i] = in.Info()
	}
	return out
}

// InstancePage is the answer of GET /workflows/:name/instances: a page of
// instances, newest update first. Cursor, absent on the last page, is the
// cursor query parameter of the next page; HasNextPage says whether there
// is one.
type InstancePage struct {
	Instances   []*Instance `json:"instances"`
	Cursor      string      `json:"cursor,omitempty"`
	HasNextPage bool        `json:"hasNextPage"`
}

// NewInstancePage returns the wire form of a page of client.Client.List.
func NewInstancePage(res *client.ListResult) *InstancePage {
	return &InstancePage{Instances: NewInstances(res.Instances), Cursor: res.NextCursor, HasNextPage: res.NextCursor != ""}
}

// HistoryPage is the answer of GET /workflows/:name/instances/:id/history: a
// page of the steps and events of one run, with the instance as GET answers
// it. Cursor, absent on the last page, continues with the next page;
// HasNextPage says whether there is one.
type HistoryPage struct {
	Instance  *Instance           `json:"instance"`
	RunNumber int                 `json:"runNumber"`
	Steps     []*client.StepInfo  `json:"steps"`
	Events    []*client.EventInfo `json:"events"`
	// Running are the step attempts running now (current run only).
	Running     []*client.RunningStepInfo `json:"running,omitempty"`
	Cursor      string                    `json:"cursor,omitempty"`
	HasNextPage bool                      `json:"hasNextPage"`
}

// NewHistoryPage returns the wire form of a page of client.Client.History.
func NewHistoryPage(h *client.History) *HistoryPage {
	return &HistoryPage{
		Instance: NewInstance(h.Instance), RunNumber: h.RunNumber,
		Steps: h.Steps, Events: h.Events, Running: h.Running,
		Cursor: h.NextCursor, HasNextPage: h.NextCursor != "",
	}
}

func (p *HistoryPage) history() *client.History {
	return &client.History{
		Instance: p.Instance.Info(), RunNumber: p.RunNumber,
		Steps: p.Steps, Events: p.Events, Running: p.Running, NextCursor: p.Cursor,
	}
}

// EventSent is the answer of POST /workflows/:name/instances/:id/events
// (202 Accepted): the status of the instance once the event was stored.
// The event is durable; its delivery to the workflow comes later.
type EventSent struct {
	Status InstanceDetails `json:"status"`
	// Delivery says whether a waiting step took the event ("delivered") or
	// it was buffered ("buffered"): no step of the instance's current run
	// waits for its type now, and the first WaitForEvent of the type will
	// receive it, if one ever asks. Empty from a server older than this
	// field.
	Delivery EventDelivery `json:"delivery,omitempty"`
	// Step is the step that received the event as it was stored, when it
	// did then (else the woken run takes it when it resumes); left out
	// unless the token may also read the instance (the read scope).
	Step string `json:"step,omitempty"`
}

// EventDelivery is what became of a sent event (EventSent.Delivery).
type EventDelivery string

// The deliveries of an event.
const (
	// EventDelivered: the instance was waiting for an event of the type; a
	// waiting step takes it.
	EventDelivered EventDelivery = "delivered"
	// EventBuffered: nothing waits for the type now; the event is kept for
	// the first WaitForEvent of its type in the current run.
	EventBuffered EventDelivery = "buffered"
)
