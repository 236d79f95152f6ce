package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// countHandler is a host handler that counts its invocations by durable step
// name and attempt, and fails the first failures attempts of each step.
type countHandler struct {
	failures int
	mu       sync.Mutex
	calls    map[string]int
}

func newCountHandler(failures int) *countHandler {
	return &countHandler{failures: failures, calls: map[string]int{}}
}

func (h *countHandler) Type() string { return "count" }

func (h *countHandler) Validate(config json.RawMessage) error {
	var c struct {
		Label string `json:"label"`
	}
	return flow.DecodeConfig(config, &c)
}

func (h *countHandler) Run(ctx context.Context, inv *flow.Invocation) (any, error) {
	info, _ := workflow.StepInfoFromContext(ctx)
	h.mu.Lock()
	h.calls[info.Step]++
	n := h.calls[info.Step]
	h.mu.Unlock()
	if n <= h.failures {
		return nil, &workflow.NonRetryableError{Name: "COUNT_FAILED", Err: fmt.Errorf("attempt %d of %s failed", info.Attempt, info.Step)}
	}
	return map[string]any{"step": info.Step, "attempt": info.Attempt, "visit": inv.Visit, "input": inv.Input}, nil
}

func (h *countHandler) snapshot() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.calls {
		out[k] = v
	}
	return out
}

// flowBundle is a harness with a compiled flow registered.
type flowBundle struct {
	h     *testharness.Harness
	count *countHandler
	name  string
}

func setupFlow(t *testing.T, js string, failures int, opts ...flow.CompileOption) *flowBundle {
	t.Helper()
	count := newCountHandler(failures)
	compiled := compileFlow(t, js, count, opts...)
	h := testharness.New(t)
	_, err := workflow.Register(h.Registry, compiled.ID(), compiled.Run)
	require.NoError(t, err)
	return &flowBundle{h: h, count: count, name: compiled.ID()}
}

func compileFlow(t *testing.T, js string, count *countHandler, opts ...flow.CompileOption) *flow.Flow {
	t.Helper()
	def, err := flow.Parse([]byte(js))
	require.NoError(t, err)
	hs, err := flow.NewHandlers(flow.WithHandler(count))
	require.NoError(t, err)
	compiled, err := flow.Compile(def, hs, opts...)
	require.NoError(t, err)
	return compiled
}

func (b *flowBundle) create(t *testing.T, id, params string) {
	t.Helper()
	_, err := b.h.Client.Create(b.h.Context(), b.name, dftype.CreateRequest{ID: id, Params: json.RawMessage(params)})
	require.NoError(t, err)
}

func (b *flowBundle) output(t *testing.T, id string) string {
	t.Helper()
	return string(b.h.RequireStatus(b.name, id, dftype.StatusComplete).Output)
}

func (b *flowBundle) stepNames(t *testing.T, id string) []string {
	t.Helper()
	var names []string
	for _, s := range b.h.History(b.name, id).Steps {
		names = append(names, s.Name)
	}
	return names
}

func TestFlowRunsStepsAndBuildsTheContext(t *testing.T) {
	t.Parallel()
	b := setupFlow(t, `{
	  "id": "greet", "version": "1.0.0", "initialStepId": "hello",
	  "steps": {
	    "hello": {"id": "hello", "type": "transform", "config": {"preset": "upper"}, "input": {"template": "hello ${user.name}"},
	              "outputKey": "greeting", "transitions": {"onSuccess": "mark"}},
	    "mark": {"id": "mark", "type": "set", "config": {"values": {"status": {"value": "done"}, "user.greeted": {"value": true}}},
	             "transitions": {"onSuccess": "count"}},
	    "count": {"id": "count", "type": "count", "input": {"key": "greeting"}, "outputKey": "results.count"}
	  }}`, 0)
	b.create(t, "g1", `{"user": {"name": "Ada", "id": 9007199254740993}}`)
	b.create(t, "g2", ``)
	b.h.RunUntilIdle()
	require.JSONEq(t, `{
		"user": {"name": "Ada", "id": 9007199254740993, "greeted": true},
		"greeting": "HELLO ADA", "status": "done",
		"results": {"count": {"step": "count#1", "attempt": 1, "visit": 1, "input": "HELLO ADA"}}}`, b.output(t, "g1"))
	require.Contains(t, b.output(t, "g1"), "9007199254740993", "big integers keep every digit")
	require.Equal(t, []string{"hello#1", "mark#1", "count#1"}, b.stepNames(t, "g1"))

	// g2 has no params, so its template has a hole: the step fails, and
	// without onFailure so does the flow.
	info := b.h.RequireStatus(b.name, "g2", dftype.StatusErrored)
	require.Equal(t, flow.ErrorNameInvalidInput, info.Error.Name)
	require.Contains(t, info.Error.Message, "${user.name} is not in the flow context")
}

func TestFlowOutputKey(t *testing.T) {
	t.Parallel()
	b := setupFlow(t, `{
	  "id": "out", "version": "1.0.0", "initialStepId": "a", "output": "result.value",
	  "steps": {"a": {"id": "a", "type": "set", "config": {"values": {"result.value": {"path": "in"}}}}}}`, 0)
	b.create(t, "o1", `{"in": [1, 2]}`)
	b.create(t, "o2", `{}`)
	b.h.RunUntilIdle()
	require.JSONEq(t, `[1, 2]`, b.output(t, "o1"))
	require.JSONEq(t, `null`, b.output(t, "o2"), "a missing output is null")
}

func TestFlowParamsMustBeAnObject(t *testing.T) {
	t.Parallel()
	b := setupFlow(t, `{"id": "p", "version": "1.0.0", "initialStepId": "a",
	  "steps": {"a": {"id": "a", "type": "set", "config": {"values": {"x": {"value": 1}}}}}}`, 0)
	b.create(t, "p1", `[1, 2]`)
	b.h.RunUntilIdle()
	info := b.h.RequireStatus(b.name, "p1", dftype.StatusErrored)
	require.Equal(t, flow.ErrorNameInvalidParams, info.Error.Name)
	require.Contains(t, info.Error.Message, "flow params must be a JSON object, not a array")
}

func TestFlowOnFailure(t *testing.T) {
	t.Parallel()
	const js = `{
	  "id": "fail", "version": "1.0.0", "initialStepId": "risky",
	  "steps": {
	    "risky": {"id": "risky", "type": "count", "outputKey": "risky", "retries": {"limit": 2, "delay": "1 second", "backoff": "constant", "jitter": false},
	              "transitions": {"onSuccess": "ok", "onFailure": "recover"}},
	    "ok": {"id": "ok", "type": "set", "config": {"values": {"path": {"value": "ok"}}}},
	    "recover": {"id": "recover", "type": "set", "config": {"values": {"path": {"value": "recovered"}, "why": {"path": "risky.name"}}}}
	  }}`

	t.Run("CaughtAfterRetries", func(t *testing.T) {
		t.Parallel()
		b := setupFlow(t, js, 100)
		b.create(t, "f1", `{}`)
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"path": "recovered", "why": "COUNT_FAILED",
			"risky": {"stepId": "risky", "name": "COUNT_FAILED", "message": "attempt 1 of risky#1 failed", "attempts": 1}}`, b.output(t, "f1"))
	})

	t.Run("RetriedThenSucceeds", func(t *testing.T) {
		t.Parallel()
		js := strings.Replace(js, `"type": "count"`, `"type": "retrying"`, 1)
		retrying := &retryingHandler{failures: 2}
		def, err := flow.Parse([]byte(js))
		require.NoError(t, err)
		hs, err := flow.NewHandlers(flow.WithHandler(retrying))
		require.NoError(t, err)
		compiled, err := flow.Compile(def, hs)
		require.NoError(t, err)
		h := testharness.New(t)
		_, err = flow.Register(h.Registry, compiled)
		require.NoError(t, err)
		_, err = h.Client.Create(h.Context(), "fail", dftype.CreateRequest{ID: "f2"})
		require.NoError(t, err)
		start := h.Now()
		h.RunUntilIdle()
		info := h.RequireStatus("fail", "f2", dftype.StatusComplete)
		require.JSONEq(t, `{"path": "ok", "risky": 3}`, string(info.Output))
		require.Equal(t, 2*time.Second, h.Now().Sub(start), "two durable retries, 1 second apart")
		steps := h.History("fail", "f2").Steps
		require.Equal(t, 3, steps[0].Attempts)
		require.Equal(t, 3, steps[0].MaxAttempts)
	})

	t.Run("ErrorKeyWithoutOutputKey", func(t *testing.T) {
		t.Parallel()
		js := strings.Replace(js, `"outputKey": "risky", `, ``, 1)
		js = strings.Replace(js, `"risky.name"`, `"error.name"`, 1)
		b := setupFlow(t, js, 100)
		b.create(t, "f3", `{}`)
		b.h.RunUntilIdle()
		require.JSONEq(t, `{"path": "recovered", "why": "COUNT_FAILED",
			"error": {"stepId": "risky", "name": "COUNT_FAILED", "message": "attempt 1 of risky#1 failed", "attempts": 1}}`, b.output(t, "f3"))
	})

	t.Run("UncaughtFailsTheFlow", func(t *testing.T) {
		t.Parallel()
		js := strings.Replace(js, `, "onFailure": "recover"`, ``, 1)
		b := setupFlow(t, js, 100)
		b.create(t, "f4", `{}`)
		b.h.RunUntilIdle()
		info := b.h.RequireStatus(b.name, "f4", dftype.StatusErrored)
		require.Equal(t, "COUNT_FAILED", info.Error.Name)
		require.Contains(t, info.Error.Message, `step "risky#1" failed after 1 attempt(s): COUNT_FAILED: attempt 1 of risky#1 failed`)
	})
}

// retryingHandler fails its first attempts with a retryable error and then
// returns the attempt number.
type retryingHandler struct{ failures int }

func (h *retryingHandler) Type() string                   { return "retrying" }
func (h *retryingHandler) Validate(json.RawMessage) error { return nil }
func (h *retryingHandler) Run(ctx context.Context, _ *flow.Invocation) (any, error) {
	if a := workflow.Attempt(ctx); a <= h.failures {
		return nil, fmt.Errorf("attempt %d: flaky", a)
	}
	return workflow.Attempt(ctx), nil
}

func TestFlowBranch(t *testing.T) {
	t.Parallel()
	const js = `{
	  "id": "route", "version": "1.0.0", "initialStepId": "check",
	  "steps": {
	    "check": {"id": "check", "type": "branch", "outputKey": "decision",
	              "config": {"conditions": [
	                {"left": {"path": "amount"}, "op": "gte", "right": {"value": 100}, "next": "big"},
	                {"left": {"path": "amount"}, "op": "gt", "right": {"value": 0}, "next": "small"},
	                {"left": {"path": "amount"}, "op": "lt", "right": {"value": 0}, "next": "$end"}]},
	              "transitions": {"onFailure": "unmatched"}},
	    "big": {"id": "big", "type": "set", "config": {"values": {"size": {"value": "big"}}}},
	    "small": {"id": "small", "type": "set", "config": {"values": {"size": {"value": "small"}}}},
	    "unmatched": {"id": "unmatched", "type": "set", "config": {"values": {"size": {"value": "none"}}}}
	  }}`
	b := setupFlow(t, js, 0)
	for id, amount := range map[string]string{"big": "150", "small": "5", "negative": "-1", "zero": "0"} {
		b.create(t, id, `{"amount": `+amount+`}`)
	}
	b.h.RunUntilIdle()
	require.JSONEq(t, `{"amount": 150, "size": "big", "decision": {"next": "big", "condition": 0}}`, b.output(t, "big"))
	require.JSONEq(t, `{"amount": 5, "size": "small", "decision": {"next": "small", "condition": 1}}`, b.output(t, "small"))
	require.JSONEq(t, `{"amount": -1, "decision": {"next": "$end", "condition": 2}}`, b.output(t, "negative"), "$end ends the flow")
	require.JSONEq(t, `{"amount": 0, "size": "none",
		"decision": {"stepId": "check", "name": "NO_MATCH", "message": "no condition of branch step \"check\" matched and it has no default", "attempts": 1}}`, b.output(t, "zero"))
	hist := b.h.History(b.name, "big")
	require.JSONEq(t, `{"next": "big", "condition": 0}`, string(hist.Steps[0].Result), "the durable step records the transition taken")

	// Without onFailure, NO_MATCH fails the flow.
	b2 := setupFlow(t, strings.Replace(js, `"transitions": {"onFailure": "unmatched"}`, `"transitions": {}`, 1), 0)
	b2.create(t, "zero", `{"amount": 0}`)
	b2.h.RunUntilIdle()
	info := b2.h.RequireStatus(b2.name, "zero", dftype.StatusErrored)
	require.Equal(t, flow.ErrorNameNoMatch, info.Error.Name)
}

func TestFlowDelayAndWaitForEvent(t *testing.T) {
	t.Parallel()
	const js = `{
	  "id": "approve", "version": "1.0.0", "initialStepId": "nap",
	  "steps": {
	    "nap": {"id": "nap", "type": "delay", "config": {"duration": "${napFor}"}, "transitions": {"onSuccess": "wait"}},
	    "wait": {"id": "wait", "type": "wait-for-event", "config": {"type": "approval", "timeout": "1 hour"}, "outputKey": "approval",
	             "transitions": {"onSuccess": "done", "onFailure": "expired"}},
	    "done": {"id": "done", "type": "set", "config": {"values": {"status": {"template": "approved by ${approval.by}"}}}},
	    "expired": {"id": "expired", "type": "set", "config": {"values": {"status": {"value": "expired"}}}}
	  }, "output": "status"}`
	b := setupFlow(t, js, 0)
	start := b.h.Now()
	b.create(t, "yes", `{"napFor": "10 minutes"}`)
	b.create(t, "late", `{"napFor": "10 minutes"}`)
	b.create(t, "bad", `{"napFor": "a while"}`)
	b.h.RunUntilIdle()
	require.Equal(t, 10*time.Minute, b.h.Now().Sub(start), "the delay is a durable sleep the harness jumps over")
	b.h.RequireStatus(b.name, "yes", dftype.StatusWaiting)
	b.h.SendEvent(b.name, "yes", "approval", map[string]string{"by": "grace"})
	b.h.RunUntilIdle()
	require.JSONEq(t, `"approved by grace"`, b.output(t, "yes"))
	require.Equal(t, []string{"nap#1", "wait#1", "done#1"}, b.stepNames(t, "yes"))

	b.h.Advance(time.Hour + time.Second)
	b.h.RunUntilIdle()
	require.JSONEq(t, `"expired"`, b.output(t, "late"), "the timeout follows onFailure")

	info := b.h.RequireStatus(b.name, "bad", dftype.StatusErrored)
	require.Contains(t, info.Error.Message, `step "nap#1": invalid duration "a while"`)

	// Without onFailure, a timeout fails the flow with EventTimeoutError.
	b2 := setupFlow(t, strings.Replace(js, `, "onFailure": "expired"`, ``, 1), 0)
	b2.create(t, "late", `{"napFor": "1 second"}`)
	b2.h.RunUntilIdle()
	b2.h.Advance(2 * time.Hour)
	b2.h.RunUntilIdle()
	info = b2.h.RequireStatus(b2.name, "late", dftype.StatusErrored)
	require.Equal(t, workflow.ErrorNameEventTimeout, info.Error.Name)
}

func TestFlowRunawayLoop(t *testing.T) {
	t.Parallel()
	const js = `{
	  "id": "forever", "version": "1.0.0", "initialStepId": "spin",
	  "steps": {
	    "spin": {"id": "spin", "type": "set", "config": {"values": {"x": {"value": 1}}}, "transitions": {"onSuccess": "again"}},
	    "again": {"id": "again", "type": "branch", "config": {"conditions": [{"left": {"path": "x"}, "op": "exists", "next": "spin"}]}}
	  }}`

	t.Run("StepLimit", func(t *testing.T) {
		t.Parallel()
		b := setupFlow(t, js, 0, flow.WithStepLimit(20))
		b.create(t, "r1", `{}`)
		b.h.RunUntilIdle()
		info := b.h.RequireStatus(b.name, "r1", dftype.StatusErrored)
		require.Equal(t, flow.ErrorNameTooManySteps, info.Error.Name)
		require.Contains(t, info.Error.Message, `flow "forever" (version 1.0.0) reached step "spin" after 20 step visits, the limit of one run (a loop that never ends?): too many steps in one run`)
		require.Len(t, b.stepNames(t, "r1"), 20)
	})

	t.Run("DefaultLimitIsTheRunnersLimit", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("1024 checkpoints")
		}
		// A loop of delays, which the runner does not count against its limit, is
		// bounded too.
		delays := `{"id": "naps", "version": "1.0.0", "initialStepId": "nap",
		  "steps": {"nap": {"id": "nap", "type": "delay", "config": {"duration": "0 seconds"}, "transitions": {"onSuccess": "nap"}}}}`
		b := setupFlow(t, delays, 0)
		b.create(t, "r2", `{}`)
		b.h.RunUntilIdle()
		info := b.h.RequireStatus(b.name, "r2", dftype.StatusErrored)
		require.Equal(t, flow.ErrorNameTooManySteps, info.Error.Name)
		require.Contains(t, info.Error.Message, fmt.Sprintf("after %d step visits", workflow.MaxStepsPerRun))
	})

	t.Run("ErrorMatchesErrTooManySteps", func(t *testing.T) {
		t.Parallel()
		compiled := compileFlow(t, js, newCountHandler(0), flow.WithStepLimit(3))
		_, err := compiled.Run(context.Background(), workflow.Event[json.RawMessage]{}, &memStep{})
		require.ErrorIs(t, err, workflow.ErrTooManySteps)
		require.Equal(t, flow.ErrorNameTooManySteps, workflow.ErrorName(err))
	})
}

// memStep is an in-memory workflow.Step for unit tests of Run: Do runs its
// callback once, without retries.
type memStep struct{ names []string }

func (s *memStep) Do(name string, fn workflow.StepFunc, _ ...workflow.StepOption) (json.RawMessage, error) {
	s.names = append(s.names, name)
	v, err := fn(wfcore.ContextWithStepInfo(context.Background(), workflow.StepInfo{Step: name, Attempt: 1}))
	if err != nil {
		return nil, &workflow.StepError{Step: name, Name: workflow.ErrorName(err), Message: err.Error(), Attempts: 1}
	}
	return json.Marshal(v)
}
func (s *memStep) Sleep(name string, _ time.Duration) error {
	s.names = append(s.names, name)
	return nil
}
func (s *memStep) SleepUntil(name string, _ time.Time) error {
	s.names = append(s.names, name)
	return nil
}
func (s *memStep) WaitForEvent(name string, _ workflow.WaitOptions) (*workflow.ReceivedEvent, error) {
	s.names = append(s.names, name)
	return nil, errors.New("no events in memStep")
}

func TestRegister(t *testing.T) {
	t.Parallel()
	compiled := compileFlow(t, `{"id": "reg", "version": "2.1.0", "initialStepId": "a",
	  "steps": {"a": {"id": "a", "type": "set", "config": {"values": {"x": {"value": 1}}}}}}`, newCountHandler(0))
	require.Equal(t, "reg", compiled.ID())
	require.Equal(t, "2.1.0", compiled.Version().String())
	require.Equal(t, "a", compiled.Definition().InitialStepID)

	reg := workflow.NewRegistry()
	_, err := workflow.Register(reg, compiled.ID(), compiled.Run)
	require.NoError(t, err)
	r, ok := wfcore.Lookup(reg, "reg")
	require.True(t, ok)
	out, err := r.Execute(context.Background(), wfcore.RawEvent{Payload: json.RawMessage(`{"y": 2}`)}, &memStep{})
	require.NoError(t, err)
	require.JSONEq(t, `{"x": 1, "y": 2}`, string(out))

	_, err = flow.Register(reg, compiled)
	require.ErrorContains(t, err, "registered already")
	_, err = flow.Register(reg, nil)
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
}

func TestNewHandlers(t *testing.T) {
	t.Parallel()
	hs := builtins(t)
	require.Equal(t, []string{"branch", "delay", "exec", "http", "set", "subflow", "transform", "wait-for-event"}, hs.Types())
	_, err := flow.NewHandlers(flow.WithHandler(nil))
	require.Error(t, err)
	_, err = flow.NewHandlers(flow.WithHandler(&namedHandler{typ: "bad type"}))
	require.ErrorContains(t, err, `type "bad type" must match`)

	// A host handler replaces a built-in one of the same type.
	custom := &namedHandler{typ: "http"}
	hs = builtins(t, flow.WithHandler(custom))
	got, ok := hs.Lookup("http")
	require.True(t, ok)
	require.Same(t, custom, got)
}

type namedHandler struct{ typ string }

func (h *namedHandler) Type() string                                       { return h.typ }
func (h *namedHandler) Validate(json.RawMessage) error                     { return nil }
func (h *namedHandler) Run(context.Context, *flow.Invocation) (any, error) { return nil, nil }

func (s *memStep) Invoke(name string, _ workflow.InvokeOptions) (json.RawMessage, error) {
	return nil, fmt.Errorf("memStep: invoke %q is not supported", name)
}
