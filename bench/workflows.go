package bench

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/duraflow/duraflow/workflow"
)

// Names of the workflows a run creates. Each workload has its own, so its
// figures are read from the database by workflow name.
const (
	nameEmpty   = "bench_empty"
	nameSteps10 = "bench_steps10"
	nameWake    = "bench_wake"
	nameLoad    = "bench_load"
	nameSoak    = "bench_soak"
	nameKeyed   = "bench_keyed"
	// nameCreate is registered with the client only: runners never claim
	// its instances, so the create workload measures creation alone.
	nameCreate = "bench_create"
)

// stepsPerWorkflow is the number of steps of steps10, soak and the wake
// workload's background load.
const stepsPerWorkflow = 10

// Wake workload: the event the instance waits for and its steps.
const (
	wakeEventType = "go"
	wakeStepWait  = "wait"
	// wakeStepResumed is the step after the wait; its result is the wall
	// clock (Unix nanoseconds) at which it started running.
	wakeStepResumed = "resumed"
)

// StepResult is what every step of steps10 returns: a struct of about 250
// bytes of JSON, so that checkpoints carry a realistic payload.
type StepResult struct {
	Instance string    `json:"instance"`
	Step     int       `json:"step"`
	Status   string    `json:"status"`
	Amount   int64     `json:"amount"`
	Currency string    `json:"currency"`
	Note     string    `json:"note"`
	Tags     []string  `json:"tags"`
	At       time.Time `json:"at"`
}

// keyedParams are the params of the keyed workload: the concurrency key.
type keyedParams struct {
	Key string `json:"key"`
}

// keyedParamsOf is the params of instance i of the keyed workload: keys
// k0 … k99 in turn.
func keyedParamsOf(i int) json.RawMessage {
	b, _ := json.Marshal(keyedParams{Key: "k" + strconv.Itoa(i%KeyedKeys)})
	return b
}

// stepResult builds the result of step i of an instance.
func stepResult(instance string, i int) StepResult {
	return StepResult{
		Instance: instance,
		Step:     i,
		Status:   "ok",
		Amount:   int64(1000 + i),
		Currency: "EUR",
		Note:     "a no-op step of the duraflow benchmark that returns a struct of about 250 bytes as JSON",
		Tags:     []string{"bench", "steps10", "step-" + strconv.Itoa(i)},
		At:       time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// stepsWorkflow runs ten sequential no-op steps.
func stepsWorkflow(ctx context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (int, error) {
	for i := range stepsPerWorkflow {
		if _, err := workflow.Do(step, stepNames[i], func(context.Context) (StepResult, error) {
			return stepResult(ev.InstanceID, i), nil
		}); err != nil {
			return 0, err
		}
	}
	return stepsPerWorkflow, nil
}

// stepNames are the step names of stepsWorkflow, built once.
var stepNames = func() []string {
	out := make([]string, stepsPerWorkflow)
	for i := range out {
		out[i] = "step-" + strconv.Itoa(i)
	}
	return out
}()

// emptyWorkflow does nothing.
func emptyWorkflow(context.Context, workflow.Event[json.RawMessage], workflow.Step) (struct{}, error) {
	return struct{}{}, nil
}

// wakeWorkflow waits for an event, then runs a step that records when it
// started.
func wakeWorkflow(_ context.Context, ev workflow.Event[json.RawMessage], step workflow.Step) (int64, error) {
	if _, err := step.WaitForEvent(wakeStepWait, workflow.WaitOptions{Type: wakeEventType, Timeout: time.Hour}); err != nil {
		return 0, err
	}
	return workflow.Do(step, wakeStepResumed, func(context.Context) (int64, error) {
		now := time.Now().UnixNano()
		if ch, ok := resumedSignals.Load(ev.InstanceID); ok {
			select {
			case ch.(chan struct{}) <- struct{}{}:
			default:
			}
		}
		return now, nil
	})
}

// resumedSignals holds, by instance id, a channel the wake workload of this
// process waits on: the step after the wait signals it when it runs in this
// process, so the workload need not poll the database while it runs.
var resumedSignals sync.Map

// newRegistry returns a registry of the bench workflows; withCreate adds
// the create workload's, which only a client may have.
func newRegistry(withCreate bool) (*workflow.Registry, error) {
	reg := workflow.NewRegistry()
	steps := stepsWorkflow
	empty := emptyWorkflow
	for _, name := range []string{nameSteps10, nameLoad, nameSoak} {
		if _, err := workflow.Register(reg, name, steps); err != nil {
			return nil, err
		}
	}
	if _, err := workflow.Register(reg, nameKeyed, steps,
		workflow.WithConcurrencyKey(workflow.KeyOf(func(p keyedParams) string { return p.Key }), 1)); err != nil {
		return nil, err
	}
	if _, err := workflow.Register(reg, nameEmpty, empty); err != nil {
		return nil, err
	}
	if _, err := workflow.Register(reg, nameWake, wakeWorkflow); err != nil {
		return nil, err
	}
	if withCreate {
		if _, err := workflow.Register(reg, nameCreate, empty); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
