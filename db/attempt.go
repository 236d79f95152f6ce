package db

import (
	"context"
	"encoding/json"
	"math"
	"time"
)

// This file holds the store's part of retries and deadlines (fleet control):
// the attempts of steps kept in history, the steps a task's holder runs
// now, and a run's workflow retry.

// StepAttempt is one failed attempt of a Do step, kept in history: the
// checkpoint that records a failure (a retry or the step's final error)
// writes it. The last attempt of a step that completed is the step row
// itself (Step.StartedAt, Step.CompletedAt).
type StepAttempt struct {
	ID      int64
	StepKey string
	// RunAttempt is the instance's Instance.RunAttempt when the attempt ran
	// (a workflow retry runs the failed step again from attempt 1).
	RunAttempt   int
	Attempt      int
	StartedAt    *time.Time
	EndedAt      time.Time
	ErrorName    string
	ErrorMessage string
}

// StepAttemptListParams are the arguments of AttemptStore.StepAttemptList.
type StepAttemptListParams struct {
	WorkflowName string
	InstanceID   string
	RunNumber    int
	// StepKeys limits the list to these steps; empty lists every step's.
	StepKeys []string
}

// RunningStep is a step attempt the holder of a task runs now, as its last
// lease heartbeat reported it.
type RunningStep struct {
	Key       string    `json:"key"`
	Attempt   int       `json:"attempt"`
	StartedAt time.Time `json:"startedAt"`
}

// RunRetry asks a suspend checkpoint to start the next run attempt of a
// failed run (a workflow retry): the instance's RunAttempt goes up by one
// and the step rows of ResetSteps (the steps that failed) are deleted, so
// the next run replays the completed steps and runs those again. Only the
// checkpoints of a workflow retry set it: it adds statements to the suspend
// that carries it, none to any other.
type RunRetry struct {
	// ResetSteps are the keys of the steps of the run to run again.
	ResetSteps []string
	// ErrorName and ErrorMessage are the failed run's error, recorded on
	// the instance while it waits for its next attempt.
	ErrorName    string
	ErrorMessage string
}

// RecordsFailedAttempt reports whether the write records a failed attempt
// of a Do step (it retries or errors), which the checkpoint also keeps as a
// StepAttempt row. Such a checkpoint is not Batchable: it commits through
// Checkpoint, so the group commit stays as it was.
func (w *StepWrite) RecordsFailedAttempt() bool {
	return w.Type == StepTypeDo && (w.Status == StepStatusRetrying || w.Status == StepStatusErrored)
}

// AttemptStore is the part of the Store that reads attempts.
type AttemptStore interface {
	// StepAttemptList returns the failed attempts of the steps of one run
	// of an instance, oldest first.
	StepAttemptList(ctx context.Context, p *StepAttemptListParams) ([]*StepAttempt, error)
}

// runningStepsJSON is the running_steps column of a task: the steps, and
// the task version of the holder that wrote them.
type runningStepsJSON struct {
	Version int64         `json:"version"`
	Steps   []RunningStep `json:"steps"`
}

// EncodeRunningSteps is the running_steps value a heartbeat of the holder
// of task version writes: nil (NULL) when no step runs.
func EncodeRunningSteps(version int64, steps []RunningStep) []byte {
	if len(steps) == 0 {
		return nil
	}
	b, err := json.Marshal(runningStepsJSON{Version: version, Steps: steps})
	if err != nil {
		return nil
	}
	return b
}

// DecodeRunningSteps sets t.RunningSteps from the running_steps value raw
// when the holder of t's current version wrote it and t is processing; a
// value of an older holder, or one that does not decode, is ignored.
func DecodeRunningSteps(raw []byte, t *Task) {
	if len(raw) == 0 || t.Status != TaskStatusProcessing {
		return
	}
	var v runningStepsJSON
	if err := json.Unmarshal(raw, &v); err != nil || v.Version != t.Version {
		return
	}
	t.RunningSteps = v.Steps
}

// UnlimitedAttempts is the MaxAttempts of a step whose retry policy has no
// limit (workflow.UnlimitedAttempts).
const UnlimitedAttempts = -1

// StoredMaxAttempts is the max_attempts value both backends store for n:
// n itself when a 32-bit column holds it, UnlimitedAttempts for anything
// past that or negative. A policy with a huge limit (math.MaxInt retries)
// is unlimited in effect, and must not be cast to a wrong number.
func StoredMaxAttempts(n int) int {
	if n < 0 || n > math.MaxInt32 {
		return UnlimitedAttempts
	}
	return n
}

// StoredAttempts is the attempts value both backends store for n, clamped
// to what a 32-bit column holds.
func StoredAttempts(n int) int {
	return min(max(n, 0), math.MaxInt32)
}
