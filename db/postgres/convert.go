package postgres

import (
	"encoding/json"
	"math"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/internal/pgsqlc"
	"github.com/duraflow/duraflow/dftype"
)

func instanceFromRow(r *pgsqlc.WorkflowInstance) *db.Instance {
	return &db.Instance{
		WorkflowName:   r.WorkflowName,
		ID:             r.InstanceID,
		Status:         dftype.InstanceStatus(r.Status),
		Params:         rawJSON(r.Params),
		Metadata:       rawJSON(r.Metadata),
		Output:         rawJSON(r.Output),
		ErrorName:      deref(r.ErrorName),
		ErrorMessage:   deref(r.ErrorMessage),
		PauseRequested: r.PauseRequested,
		RunNumber:      int(r.RunNumber),
		CreatedAt:      r.CreatedAt.UTC(),
		UpdatedAt:      r.UpdatedAt.UTC(),
		StartedAt:      utcPtr(r.StartedAt),
		CompletedAt:    utcPtr(r.CompletedAt),
		RetentionUntil: utcPtr(r.RetentionUntil),
		Namespace:      r.Namespace,
		Queue:          r.Queue,
		Priority:       int(r.Priority),
		DedupeKey:      deref(r.DedupeKey),
		DeadlineAt:     utcPtr(r.DeadlineAt),
		RunAttempt:     int(r.RunAttempt),
		Limited:        r.Limited,
		Parent:         parentFromRow(r),
		TraceContext:   deref(r.TraceContext),
	}
}

// instanceFromBoundedRow converts a row of InstanceListBounded, whose
// payloads are ” when it did not read them (or none is stored).
func instanceFromBoundedRow(r *pgsqlc.InstanceListBoundedRow) *db.Instance {
	inst := instanceFromRow(&pgsqlc.WorkflowInstance{
		WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, Status: r.Status,
		Params: textJSON(r.Params), Output: textJSON(r.Output), ErrorName: r.ErrorName, ErrorMessage: textPtr(r.ErrorMessage),
		PauseRequested: r.PauseRequested, RunNumber: r.RunNumber, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, RetentionUntil: r.RetentionUntil, Metadata: textJSON(r.Metadata),
		Namespace: r.Namespace, Queue: r.Queue, Priority: r.Priority, DedupeKey: r.DedupeKey, Limited: r.Limited,
		DeadlineAt: r.DeadlineAt, RunAttempt: r.RunAttempt,
		ParentWorkflowName: r.ParentWorkflowName, ParentInstanceID: r.ParentInstanceID, ParentRunNumber: r.ParentRunNumber,
		ParentStepKey: r.ParentStepKey, ParentPolicy: r.ParentPolicy, TraceContext: r.TraceContext,
	})
	inst.PayloadsOmitted = r.PayloadsOmitted
	return inst
}

// stepFromBoundedRow converts a row of StepListBounded.
func stepFromBoundedRow(r *pgsqlc.StepListBoundedRow) *db.Step {
	step := stepFromRow(&pgsqlc.WorkflowStep{
		ID: r.ID, WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, RunNumber: r.RunNumber, StepKey: r.StepKey,
		Type: r.Type, Status: r.Status, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, TimeoutMs: r.TimeoutMs,
		NextRetryAt: r.NextRetryAt, WakeAt: r.WakeAt, WaitEventType: r.WaitEventType, Result: textJSON(r.Result),
		ErrorName: r.ErrorName, ErrorMessage: textPtr(r.ErrorMessage), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		CompletedAt: r.CompletedAt, StartedAt: r.StartedAt,
	})
	step.PayloadsOmitted = r.PayloadsOmitted
	return step
}

// eventFromBoundedRow converts a row of EventListBounded.
func eventFromBoundedRow(r *pgsqlc.EventListBoundedRow) *db.Event {
	ev := eventFromRow(&pgsqlc.WorkflowEvent{
		ID: r.ID, WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, RunNumber: r.RunNumber, Type: r.Type,
		Payload: textJSON(r.Payload), CreatedAt: r.CreatedAt, DeliveredAt: r.DeliveredAt, ConsumedByStepKey: r.ConsumedByStepKey,
	})
	ev.PayloadOmitted = r.PayloadOmitted
	return ev
}

// textJSON is JSON a bounded list read as text: ” (none stored, or not
// read) is nil.
func textJSON(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// textPtr is text a bounded list read: ” is nil.
func textPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func stepFromRow(r *pgsqlc.WorkflowStep) *db.Step {
	return &db.Step{
		ID:            r.ID,
		WorkflowName:  r.WorkflowName,
		InstanceID:    r.InstanceID,
		RunNumber:     int(r.RunNumber),
		Key:           r.StepKey,
		Type:          db.StepType(r.Type),
		Status:        db.StepStatus(r.Status),
		Attempts:      int(r.Attempts),
		MaxAttempts:   int(r.MaxAttempts),
		Timeout:       time.Duration(r.TimeoutMs) * time.Millisecond,
		NextRetryAt:   utcPtr(r.NextRetryAt),
		WakeAt:        utcPtr(r.WakeAt),
		WaitEventType: deref(r.WaitEventType),
		Result:        rawJSON(r.Result),
		ErrorName:     deref(r.ErrorName),
		ErrorMessage:  deref(r.ErrorMessage),
		CreatedAt:     r.CreatedAt.UTC(),
		UpdatedAt:     r.UpdatedAt.UTC(),
		CompletedAt:   utcPtr(r.CompletedAt),
		StartedAt:     utcPtr(r.StartedAt),
	}
}

func eventFromRow(r *pgsqlc.WorkflowEvent) *db.Event {
	return &db.Event{
		ID:                r.ID,
		WorkflowName:      r.WorkflowName,
		InstanceID:        r.InstanceID,
		RunNumber:         int(r.RunNumber),
		Type:              r.Type,
		Payload:           rawJSON(r.Payload),
		CreatedAt:         r.CreatedAt.UTC(),
		DeliveredAt:       utcPtr(r.DeliveredAt),
		ConsumedByStepKey: deref(r.ConsumedByStepKey),
	}
}

func taskFromRow(r *pgsqlc.WorkflowTask) *db.Task {
	return &db.Task{
		ID:           r.ID,
		WorkflowName: r.WorkflowName,
		InstanceID:   r.InstanceID,
		RunNumber:    int(r.RunNumber),
		Kind:         db.TaskKind(r.Kind),
		RunAt:        r.RunAt.UTC(),
		Status:       db.TaskStatus(r.Status),
		LockOwner:    deref(r.LockOwner),
		LockedUntil:  utcPtr(r.LockedUntil),
		Version:      r.Version,
		Attempts:     int(r.Attempts),
		LastError:    deref(r.LastError),
		LeaseLosses:  int(r.LeaseLosses),

		Queue:            r.Queue,
		InstancePriority: int(r.InstancePriority),
	}
}

// taskWithRunningSteps is taskFromRow with the running steps the holder's
// heartbeat wrote (TaskGet).
func taskWithRunningSteps(r *pgsqlc.WorkflowTask) *db.Task {
	t := taskFromRow(r)
	db.DecodeRunningSteps(r.RunningSteps, t)
	return t
}

func stepAttemptFromRow(r *pgsqlc.WorkflowStepAttempt) *db.StepAttempt {
	return &db.StepAttempt{
		ID:           r.ID,
		StepKey:      r.StepKey,
		RunAttempt:   int(r.RunAttempt),
		Attempt:      int(r.Attempt),
		StartedAt:    utcPtr(r.StartedAt),
		EndedAt:      r.EndedAt.UTC(),
		ErrorName:    deref(r.ErrorName),
		ErrorMessage: deref(r.ErrorMessage),
	}
}

func outboxEntryFromRow(r *pgsqlc.WorkflowHookOutbox) *db.OutboxEntry {
	return &db.OutboxEntry{
		ID:            r.ID,
		WorkflowName:  r.WorkflowName,
		InstanceID:    r.InstanceID,
		Reason:        db.HookReason(r.Reason),
		RunAt:         r.RunAt.UTC(),
		CreatedAt:     r.CreatedAt.UTC(),
		Attempts:      int(r.Attempts),
		LastError:     deref(r.LastError),
		NextAttemptAt: r.NextAttemptAt.UTC(),
		LockedUntil:   utcPtr(r.LockedUntil),
		Version:       r.Version,
		DeliveredAt:   utcPtr(r.DeliveredAt),
	}
}

// limitArg is the optional LIMIT of a history page: 0 (or less) lists
// everything, which is LIMIT NULL.
func limitArg(limit int) *int32 {
	if limit <= 0 {
		return nil
	}
	n := int32(min(limit, math.MaxInt32))
	return &n
}

// boundedLimit is the LIMIT of a bounded list: limit, or every row for 0.
func boundedLimit(limit int) int32 {
	if limit <= 0 {
		return math.MaxInt32
	}
	return int32(min(limit, math.MaxInt32))
}

// rawJSON returns the stored JSON text as is; NULL becomes nil.
func rawJSON(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// jsonArg passes JSON text through unchanged; empty means SQL NULL.
func jsonArg(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}

// nowArg turns a time into the optional "now" parameter of a query: the zero
// time means "use the database clock".
func nowArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// textArg stores the empty string as NULL.
func textArg(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
