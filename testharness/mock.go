package testharness

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

// mocks is a harness's table of step and workflow mocks. The runner asks it
// for a step's replacement on every attempt; the registry runs a mocked
// workflow's replacement for every instance of it.
type mocks struct {
	t         testing.TB
	mu        sync.Mutex
	steps     []*StepMock
	workflows map[string][]*WorkflowMock
	// order keeps every mock in declaration order, for the report.
	order []mockReport
}

// mockReport is what the end-of-test report needs of a mock.
type mockReport interface {
	problem() string
}

// expectation is the declared number of calls of a mock and the calls made.
type expectation struct {
	limited bool // Times was given: exactly times calls
	times   int
	maybe   bool // fewer calls, even none, are fine
	calls   int
	over    int // calls past times, which failed
}

// take counts a call; ok is false when the call is one too many.
func (x *expectation) take() (ok bool) {
	x.calls++
	if x.limited && x.calls > x.times {
		x.over++
		return false
	}
	return true
}

// exhausted reports whether the mock has had all the calls it declared.
func (x *expectation) exhausted() bool { return x.limited && x.calls >= x.times }

func (x *expectation) problem(what string) string {
	switch {
	case x.over > 0:
		return fmt.Sprintf("%s was called %d times, more than the %d declared (Times)", what, x.calls, x.times)
	case x.calls == 0 && !x.maybe && !(x.limited && x.times == 0):
		return fmt.Sprintf("%s was never called (declare it with Maybe if that is fine)", what)
	case x.limited && x.calls < x.times && !x.maybe:
		return fmt.Sprintf("%s was called %d times, fewer than the %d declared (Times)", what, x.calls, x.times)
	}
	return ""
}

// StepMock replaces the function of a step in the harness's runs: declare it
// with Harness.OnStep, then say what it does with Return, ReturnError or Run.
// A step that has a mock does not call its own function; everything else
// about it stays real: it is recorded, retried, timed out and replayed as
// any step, and its result goes through the same JSON encoding (a mocked
// value that does not encode fails the step as a real one would).
//
// A mock that was never called fails the test when it ends, unless it was
// declared with Maybe; so does a mock called more often than Times allows.
type StepMock struct {
	m        *mocks
	step     string
	workflow string
	fn       workflow.StepFunc
	x        expectation
}

// OnStep declares a mock of every step named name (trimmed, as the runner
// keys steps) of every workflow, or of one workflow with InWorkflow. It
// returns nil until told what to do: a mock declared without Return,
// ReturnError or Run returns (nil, nil), which the step records as null.
//
// When several mocks match a step, those of InWorkflow come first, then
// the order of declaration; a mock that had all the calls of its Times is
// passed over for the next one, so
//
//	h.OnStep("charge").ReturnError(errors.New("card declined")).Once()
//	h.OnStep("charge").Return("ch_1")
//
// fails the first attempt and succeeds on the retry.
func (h *Harness) OnStep(name string) *StepMock {
	h.t.Helper()
	key, err := wfcore.NormalizeStepName(name)
	if err != nil {
		h.t.Fatalf("testharness: OnStep: %v", err)
	}
	m := &StepMock{m: h.mocks, step: key}
	h.mocks.mu.Lock()
	defer h.mocks.mu.Unlock()
	h.mocks.steps = append(h.mocks.steps, m)
	h.mocks.order = append(h.mocks.order, m)
	return m
}

// InWorkflow limits the mock to the steps of the workflow name.
func (m *StepMock) InWorkflow(name string) *StepMock {
	m.m.t.Helper()
	if err := workflow.ValidateWorkflowName(name); err != nil {
		m.m.t.Fatalf("testharness: InWorkflow: %v", err)
	}
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	m.workflow = name
	return m
}

// Return makes the step return v.
func (m *StepMock) Return(v any) *StepMock {
	return m.Run(func(context.Context) (any, error) { return v, nil })
}

// ReturnError makes the step fail with err: it is retried by the step's
// policy unless err is non-retryable (workflow.NonRetryable).
func (m *StepMock) ReturnError(err error) *StepMock {
	return m.Run(func(context.Context) (any, error) { return nil, err })
}

// Run makes the step call fn instead of its own function. fn gets the
// attempt's context: workflow.Attempt(ctx) and workflow.StepInfoFromContext
// tell it which attempt it runs, so it can fail the first ones and succeed
// on a retry, and the context is cancelled when the attempt times out.
func (m *StepMock) Run(fn workflow.StepFunc) *StepMock {
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	m.fn = fn
	return m
}

// Times says the mock is called exactly n times: a call past n fails the
// step (non-retryable) and the test, unless another mock of the step takes
// it, and fewer calls fail the test unless the mock is Maybe. Times(0)
// says the step must not run (its replays are fine). Without Times a mock
// takes any number of calls, at least one unless it is Maybe.
func (m *StepMock) Times(n int) *StepMock {
	m.m.t.Helper()
	m.m.times(&m.x, n)
	return m
}

// times sets x's declared number of calls, refusing a negative one.
func (ms *mocks) times(x *expectation, n int) {
	ms.t.Helper()
	if n < 0 {
		ms.t.Fatalf("testharness: Times(%d): the number of calls cannot be negative", n)
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	x.limited, x.times = true, n
}

// Once is Times(1).
func (m *StepMock) Once() *StepMock { return m.Times(1) }

// Maybe says the mock need not be called: the harness does not report it
// when it never is (nor when it is called fewer times than Times).
func (m *StepMock) Maybe() *StepMock {
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	m.x.maybe = true
	return m
}

// Calls returns how many attempts the mock has run.
func (m *StepMock) Calls() int {
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	return m.x.calls
}

func (m *StepMock) describe() string {
	if m.workflow != "" {
		return fmt.Sprintf("mock of step %q in workflow %q", m.step, m.workflow)
	}
	return fmt.Sprintf("mock of step %q", m.step)
}

func (m *StepMock) problem() string { return m.x.problem(m.describe()) }

// stepOverride is the runner's StepOverrideFunc: the function of the mock
// that takes this attempt of the step, or nil to run the step's own.
func (ms *mocks) stepOverride(workflowName, step string) workflow.StepFunc {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var last *StepMock
	for _, specific := range []bool{true, false} {
		for _, m := range ms.steps {
			if m.step != step || (m.workflow != "") != specific || specific && m.workflow != workflowName {
				continue
			}
			if !m.x.exhausted() {
				return ms.call(m)
			}
			last = m
		}
	}
	if last == nil {
		return nil
	}
	return ms.call(last) // every matching mock had its calls: this one is too many
}

// call counts a call of m and returns the function the attempt runs. The
// caller holds ms.mu.
func (ms *mocks) call(m *StepMock) workflow.StepFunc {
	if !m.x.take() {
		msg := fmt.Sprintf("testharness: %s called %d times, more than the %d declared", m.describe(), m.x.calls, m.x.times)
		return func(context.Context) (any, error) { return nil, workflow.NonRetryable(fmt.Errorf("%s", msg)) }
	}
	if fn := m.fn; fn != nil {
		return fn
	}
	return func(context.Context) (any, error) { return nil, nil }
}

// WorkflowMockFunc is what a mocked workflow runs instead of its own Run,
// for each run of each of its instances: it gets the instance's params
// undecoded and a real Step, so it can take steps too; its output is
// encoded as the workflow's would be.
type WorkflowMockFunc func(ctx context.Context, event workflow.Event[json.RawMessage], step workflow.Step) (any, error)

// WorkflowMock replaces a workflow, typically a child workflow the code
// under test starts (through a binding, the client or step.Invoke): declare
// it with Harness.OnWorkflow, then say what it does with Return, ReturnError
// or Run. Every instance of the workflow runs the mock instead of the
// registered workflow, however it was started; the instances are real
// (stored, claimed, recorded), and the registered definition (queue,
// retries, limits) still applies. The workflow need not be registered.
//
// A mock that no instance ran fails the test when it ends, unless it was
// declared with Maybe; so does one that more instances ran than Times
// allows. Calls count instances (a run replayed after a sleep is one call).
type WorkflowMock struct {
	m    *mocks
	name string
	fn   WorkflowMockFunc
	x    expectation
	// seen are the instance runs the mock has counted.
	seen map[string]bool
}

// OnWorkflow declares a mock of the workflow name. Several mocks of one
// name take its instances in the order of declaration, each until it has
// had the instances its Times allows. Without Return, ReturnError or Run
// the mocked workflow completes with a null output.
func (h *Harness) OnWorkflow(name string) *WorkflowMock {
	h.t.Helper()
	if err := workflow.ValidateWorkflowName(name); err != nil {
		h.t.Fatalf("testharness: OnWorkflow: %v", err)
	}
	m := &WorkflowMock{m: h.mocks, name: name, seen: map[string]bool{}}
	h.mocks.mu.Lock()
	first := len(h.mocks.workflows[name]) == 0
	h.mocks.workflows[name] = append(h.mocks.workflows[name], m)
	h.mocks.order = append(h.mocks.order, m)
	h.mocks.mu.Unlock()
	if first {
		wfcore.Override(h.Registry, name, &mockRunnable{name: name, m: h.mocks})
	}
	return m
}

// Return makes every instance complete with output v.
func (m *WorkflowMock) Return(v any) *WorkflowMock {
	return m.Run(func(context.Context, workflow.Event[json.RawMessage], workflow.Step) (any, error) { return v, nil })
}

// ReturnError makes every instance fail with err, as the workflow's Run
// returning err would (a workflow retry policy applies).
func (m *WorkflowMock) ReturnError(err error) *WorkflowMock {
	return m.Run(func(context.Context, workflow.Event[json.RawMessage], workflow.Step) (any, error) { return nil, err })
}

// Run makes every instance run fn instead of the workflow's Run.
func (m *WorkflowMock) Run(fn WorkflowMockFunc) *WorkflowMock {
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	m.fn = fn
	return m
}

// Times says exactly n instances run the mock; one more fails with a
// non-retryable error and fails the test, unless another mock takes it.
// Times(0) says no instance of the workflow may run.
func (m *WorkflowMock) Times(n int) *WorkflowMock {
	m.m.t.Helper()
	m.m.times(&m.x, n)
	return m
}

// Once is Times(1).
func (m *WorkflowMock) Once() *WorkflowMock { return m.Times(1) }

// Maybe says no instance need run the mock.
func (m *WorkflowMock) Maybe() *WorkflowMock {
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	m.x.maybe = true
	return m
}

// Calls returns how many instance runs the mock has taken.
func (m *WorkflowMock) Calls() int {
	m.m.mu.Lock()
	defer m.m.mu.Unlock()
	return m.x.calls
}

func (m *WorkflowMock) describe() string { return fmt.Sprintf("mock of workflow %q", m.name) }

func (m *WorkflowMock) problem() string { return m.x.problem(m.describe()) }

// mockRunnable is what the registry runs for a mocked workflow.
type mockRunnable struct {
	name string
	m    *mocks
}

// Name implements wfcore.Runnable.
func (r *mockRunnable) Name() string { return r.name }

// Execute implements wfcore.Runnable: the mock that took this instance run
// (the first with calls left when the run first executed) runs, and its
// output is encoded as a registered workflow's.
func (r *mockRunnable) Execute(ctx context.Context, raw wfcore.RawEvent, step any) (json.RawMessage, error) {
	fn, err := r.m.workflowCall(r.name, fmt.Sprintf("%s/%d", raw.InstanceID, raw.RunNumber))
	if err != nil {
		return nil, err
	}
	s, _ := step.(workflow.Step)
	out, err := fn(ctx, workflow.Event[json.RawMessage]{
		Payload: raw.Payload, Timestamp: raw.Timestamp, InstanceID: raw.InstanceID,
		WorkflowName: raw.WorkflowName, RunNumber: raw.RunNumber, Metadata: raw.Metadata,
	}, s)
	if err != nil {
		return nil, err
	}
	return workflow.EngineLimits{MaxPayloadBytes: raw.MaxPayloadBytes}.MarshalPayload("workflow output", out)
}

// workflowCall returns the function of the mock that runs the instance run
// key, counting it once per run.
func (ms *mocks) workflowCall(name, key string) (WorkflowMockFunc, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	list := ms.workflows[name]
	var chosen *WorkflowMock
	for _, m := range list {
		if m.seen[key] {
			chosen = m // a replay of a run this mock took
			break
		}
	}
	if chosen == nil {
		for _, m := range list {
			if !m.x.exhausted() {
				chosen = m
				break
			}
		}
		if chosen == nil {
			chosen = list[len(list)-1]
		}
		chosen.seen[key] = true
		if !chosen.x.take() {
			return nil, workflow.NonRetryable(fmt.Errorf("testharness: %s ran %d instances, more than the %d declared", chosen.describe(), chosen.x.calls, chosen.x.times))
		}
	}
	if chosen.fn == nil {
		return func(context.Context, workflow.Event[json.RawMessage], workflow.Step) (any, error) { return nil, nil }, nil
	}
	return chosen.fn, nil
}

// MockProblems returns what is wrong with the harness's mocks so far, one
// line each in the order of declaration: mocks never called (unless Maybe),
// called fewer times than their Times (unless Maybe), or more. The harness
// reports them with t.Errorf when the test ends; a test may check them
// earlier.
func (h *Harness) MockProblems() []string {
	h.mocks.mu.Lock()
	defer h.mocks.mu.Unlock()
	var out []string
	for _, m := range h.mocks.order {
		if p := m.problem(); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// reportMocks fails the test with every mock problem; it runs at cleanup.
func (h *Harness) reportMocks() {
	for _, p := range h.MockProblems() {
		h.t.Errorf("testharness: %s", p)
	}
}
