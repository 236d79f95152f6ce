package sqlite

import (
	"encoding/json"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
	"github.com/duraflow/duraflow/dftype"
)

func instanceFromRow(r *litesqlc.WorkflowInstance) *db.Instance {
	return &db.Instance{
		WorkflowName:   r.WorkflowName,
		ID:             r.InstanceID,
		Status:         dftype.InstanceStatus(r.Status),
		Params:         rawJSON(r.Params),
		Metadata:       rawJSON(r.Metadata),
		Output:         rawJSON(r.Output),
		ErrorName:      deref(r.ErrorName),
		ErrorMessage:   deref(r.ErrorMessage),
		PauseRequested: r.PauseRequested != 0,
		RunNumber:      int(r.RunNumber),
		CreatedAt:      timeFromMicros(r.CreatedAt),
		UpdatedAt:      timeFromMicros(r.UpdatedAt),
		StartedAt:      timePtrFromMicros(r.StartedAt),
		CompletedAt:    timePtrFromMicros(r.CompletedAt),
		RetentionUntil: timePtrFromMicros(r.RetentionUntil),
		Namespace:      r.Namespace,
		Queue:          r.Queue,
		Priority:       int(r.Priority),
		DedupeKey:      deref(r.DedupeKey),
		DeadlineAt:     timePtrFromMicros(r.DeadlineAt),
		RunAttempt:     int(r.RunAttempt),
		Limited:        r.Limited == 1,
		Parent:         parentFromRow(r),
		TraceContext:   deref(r.TraceContext),
	}
}

// instanceFromBoundedRow converts a row of InstanceListWorkflowBounded (or
// InstanceListBounded, the same columns), whose payloads are ” when it
// did not read them (or none is stored).
func instanceFromBoundedRow(r *litesqlc.InstanceListWorkflowBoundedRow) *db.Instance {
	inst := instanceFromRow(&litesqlc.WorkflowInstance{
		WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, Status: r.Status,
		Params: textPtr(r.Params), Output: textPtr(r.Output), ErrorName: r.ErrorName, ErrorMessage: textPtr(r.ErrorMessage),
		PauseRequested: r.PauseRequested, RunNumber: r.RunNumber, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, RetentionUntil: r.RetentionUntil, Metadata: textPtr(r.Metadata),
		Namespace: r.Namespace, Queue: r.Queue, Priority: r.Priority, DedupeKey: r.DedupeKey, Limited: r.Limited,
		DeadlineAt: r.DeadlineAt, RunAttempt: r.RunAttempt,
		ParentWorkflowName: r.ParentWorkflowName, ParentInstanceID: r.ParentInstanceID, ParentRunNumber: r.ParentRunNumber,
		ParentStepKey: r.ParentStepKey, ParentPolicy: r.ParentPolicy, TraceContext: r.TraceContext,
	})
	inst.PayloadsOmitted = r.PayloadsOmitted != 0
	return inst
}

// stepFromBoundedRow converts a row of StepListBounded.
func stepFromBoundedRow(r *litesqlc.StepListBoundedRow) *db.Step {
	step := stepFromRow(&litesqlc.WorkflowStep{
		ID: r.ID, WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, RunNumber: r.RunNumber, StepKey: r.StepKey,
		Type: r.Type, Status: r.Status, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts, TimeoutMs: r.TimeoutMs,
		NextRetryAt: r.NextRetryAt, WakeAt: r.WakeAt, WaitEventType: r.WaitEventType, Result: textPtr(r.Result),
		ErrorName: r.ErrorName, ErrorMessage: textPtr(r.ErrorMessage), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		CompletedAt: r.CompletedAt, StartedAt: r.StartedAt,
	})
	step.PayloadsOmitted = r.PayloadsOmitted != 0
	return step
}

// eventFromBoundedRow converts a row of EventListBounded.
func eventFromBoundedRow(r *litesqlc.EventListBoundedRow) *db.Event {
	ev := eventFromRow(&litesqlc.WorkflowEvent{
		ID: r.ID, WorkflowName: r.WorkflowName, InstanceID: r.InstanceID, RunNumber: r.RunNumber, Type: r.Type,
		Payload: textPtr(r.Payload), CreatedAt: r.CreatedAt, DeliveredAt: r.DeliveredAt, ConsumedByStepKey: r.ConsumedByStepKey,
	})
	ev.PayloadOmitted = r.PayloadOmitted != 0
	return ev
}

// textPtr is text a bounded list read: ” (none stored, or not read) is
// nil.
func textPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func stepFromRow(r *litesqlc.WorkflowStep) *db.Step {
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
		NextRetryAt:   timePtrFromMicros(r.NextRetryAt),
		WakeAt:        timePtrFromMicros(r.WakeAt),
		WaitEventType: deref(r.WaitEventType),
		Result:        rawJSON(r.Result),
		ErrorName:     deref(r.ErrorName),
		ErrorMessage:  deref(r.ErrorMessage),
		CreatedAt:     timeFromMicros(r.CreatedAt),
		UpdatedAt:     timeFromMicros(r.UpdatedAt),
		CompletedAt:   timePtrFromMicros(r.CompletedAt),
		StartedAt:     timePtrFromMicros(r.StartedAt),
	}
}

func stepAttemptFromRow(r *litesqlc.WorkflowStepAttempt) *db.StepAttempt {
	return &db.StepAttempt{
		ID:           r.ID,
		StepKey:      r.StepKey,
		RunAttempt:   int(r.RunAttempt),
		Attempt:      int(r.Attempt),
		StartedAt:    timePtrFromMicros(r.StartedAt),
		EndedAt:      timeFromMicros(r.EndedAt),
		ErrorName:    deref(r.ErrorName),
		ErrorMessage: deref(r.ErrorMessage),
	}
}

func eventFromRow(r *litesqlc.WorkflowEvent) *db.Event {
	return &db.Event{
		ID:                r.ID,
		WorkflowName:      r.WorkflowName,
		InstanceID:        r.InstanceID,
		RunNumber:         int(r.RunNumber),
		Type:              r.Type,
		Payload:           rawJSON(r.Payload),
		CreatedAt:         timeFromMicros(r.CreatedAt),
		DeliveredAt:       timePtrFromMicros(r.DeliveredAt),
		ConsumedByStepKey: deref(r.ConsumedByStepKey),
	}
}

func taskFromRow(r *litesqlc.WorkflowTask) *db.Task {
	return &db.Task{
		ID:           r.ID,
		WorkflowName: r.WorkflowName,
		InstanceID:   r.InstanceID,
		RunNumber:    int(r.RunNumber),
		Kind:         db.TaskKind(r.Kind),
		RunAt:        timeFromMicros(r.RunAt),
		Status:       db.TaskStatus(r.Status),
		LockOwner:    deref(r.LockOwner),
		LockedUntil:  timePtrFromMicros(r.LockedUntil),
		Version:      r.Version,
		Attempts:     int(r.Attempts),
		LastError:    deref(r.LastError),
		LeaseLosses:  int(r.LeaseLosses),

		Queue:            r.Queue,
		InstancePriority: int(r.InstancePriority),
	}
}

func outboxEntryFromRow(r *litesqlc.WorkflowHookOutbox) *db.OutboxEntry {
	return &db.OutboxEntry{
		ID:            r.ID,
		WorkflowName:  r.WorkflowName,
		InstanceID:    r.InstanceID,
		Reason:        db.HookReason(r.Reason),
		RunAt:         timeFromMicros(r.RunAt),
		CreatedAt:     timeFromMicros(r.CreatedAt),
		Attempts:      int(r.Attempts),
		LastError:     deref(r.LastError),
		NextAttemptAt: timeFromMicros(r.NextAttemptAt),
		LockedUntil:   timePtrFromMicros(r.LockedUntil),
		Version:       r.Version,
		DeliveredAt:   timePtrFromMicros(r.DeliveredAt),
	}
}

// Times are stored as INTEGER microseconds since the Unix epoch. These four
// functions are the only place that converts, so every stored time is
// truncated to the microsecond the same way and every time read is in UTC.

// micros is the stored form of t: microseconds since the Unix epoch,
// truncated (toward the past) to the microsecond.
func micros(t time.Time) int64 {
	return t.UnixMicro()
}

// microsPtr is micros for an optional time; nil stays NULL.
func microsPtr(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	us := micros(*t)
	return &us
}

// timeFromMicros is the UTC time of a stored value.
func timeFromMicros(us int64) time.Time {
	return time.UnixMicro(us).UTC()
}

// timePtrFromMicros is timeFromMicros for a nullable column.
func timePtrFromMicros(us *int64) *time.Time {
	if us == nil {
		return nil
	}
	t := timeFromMicros(*us)
	return &t
}

// rawJSON returns the stored JSON text as is; NULL becomes nil.
func rawJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// jsonArg passes JSON text through unchanged; empty means SQL NULL.
func jsonArg(raw json.RawMessage) *string {
	if len(raw) == 0 {
		return nil
	}
	s := string(raw)
	return &s
}

// listArg encodes a list as the JSON array the queries read with json_each;
// SQLite has no array parameters. An empty list is "[]", never null.
func listArg[T ~string | ~int64](values []T) string {
	if len(values) == 0 {
		return "[]"
	}
	b, err := json.Marshal(values)
	if err != nil {
		// Strings and integers always encode.
		panic(err)
	}
	return string(b)
}

// nowArg turns a time into the optional "now" of a call: the zero time means
// "use the database clock".
func nowArg(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// limitArg is the LIMIT of a history page: 0 (or less) lists everything,
// which SQLite spells as a negative limit.
func limitArg(limit int) int64 {
	if limit <= 0 {
		return -1
	}
	return int64(limit)
}

// boolArg is the stored form of a boolean.
func boolArg(b bool) int64 {
	if b {
		return 1
	}
	return 0
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
