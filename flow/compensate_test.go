package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// actHandler records "label input" for each call that succeeds; config
// {"label": "...", "fail": true} fails for good.
type actHandler struct {
	mu  sync.Mutex
	log []string
}

func (h *actHandler) Type() string { return "act" }

type actConfig struct {
	Label string `json:"label"`
	Fail  bool   `json:"fail"`
}

func (h *actHandler) Validate(config json.RawMessage) error {
	var c actConfig
	return flow.DecodeConfig(config, &c)
}

func (h *actHandler) Run(_ context.Context, inv *flow.Invocation) (any, error) {
	var c actConfig
	if err := flow.DecodeConfig(inv.Config, &c); err != nil {
		return nil, err
	}
	if c.Fail {
		return nil, workflow.NonRetryable(errors.New(c.Label + " failed"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	entry := c.Label
	if inv.Input != nil {
		entry += fmt.Sprintf(" %v", inv.Input)
	}
	h.log = append(h.log, entry)
	return map[string]any{"id": c.Label + "-1"}, nil
}

// record adds an entry to the log, as a Go workflow of the test does.
func (h *actHandler) record(entry string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, entry)
}

func (h *actHandler) entries() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.log...)
}

const sagaFlow = `{
  "id": "trip", "version": "1.0.0", "initialStepId": "reserve",
  "steps": {
    "reserve": {"id": "reserve", "type": "act", "config": {"label": "reserve"}, "outputKey": "reservation",
                "compensate": "release", "transitions": {"onSuccess": "charge"}},
    "charge":  {"id": "charge", "type": "act", "config": {"label": "charge"}, "outputKey": "payment",
                "compensate": "refund", "transitions": {"onSuccess": "ship"}},
    "ship":    {"id": "ship", "type": "act", "config": {"label": "ship", "fail": %t}},
    "release": {"id": "release", "type": "act", "config": {"label": "release"}, "input": {"path": "reservation.id"}},
    "refund":  {"id": "refund", "type": "act", "config": {"label": "refund"}, "input": {"path": "payment.id"},
                "retries": {"limit": 2, "delay": "1 second"}}
  }
}`

func TestFlowCompensatesCompletedStepsInReverseOrder(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for _, fail := range []bool{true, false} {
			h := testharness.New(t, testharness.WithBackend(b))
			act := &actHandler{}
			def, err := flow.Parse(fmt.Appendf(nil, sagaFlow, fail))
			require.NoError(t, err)
			hs, err := flow.NewHandlers(flow.WithHandler(act))
			require.NoError(t, err)
			compiled, err := flow.Compile(def, hs)
			require.NoError(t, err, "release and refund are reached as compensations: no warning stops the compile")
			_, err = workflow.Register(h.Registry, compiled.ID(), compiled.Run)
			require.NoError(t, err)
			_, err = h.Client.Create(h.Context(), "trip", dftype.CreateRequest{ID: "t"})
			require.NoError(t, err)
			h.RunUntilIdle()

			if !fail {
				h.RequireStatus("trip", "t", dftype.StatusComplete)
				require.Equal(t, []string{"reserve", "charge", "ship"}, act.entries(), "nothing is undone when the flow succeeds")
				continue
			}
			info := h.RequireStatus("trip", "t", dftype.StatusErrored)
			require.Contains(t, info.Error.Message, "ship failed", "the original error is kept")
			require.Equal(t, []string{"reserve", "charge", "refund charge-1", "release reserve-1"}, act.entries())
			var names []string
			for _, st := range h.History("trip", "t").Steps {
				if strings.HasPrefix(st.Name, workflow.CompensationStepPrefix) {
					names = append(names, st.Name)
				}
			}
			require.ElementsMatch(t, []string{"compensate:charge#1", "compensate:reserve#1"}, names)
		}
	})
}

func TestFlowCompensateIsValidated(t *testing.T) {
	t.Parallel()
	act := &actHandler{}
	hs, err := flow.NewHandlers(flow.WithHandler(act))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, steps, want string
	}{
		{"UnknownStep", `"a": {"id": "a", "type": "act", "compensate": "nope"}`, `steps.a.compensate: no step "nope"`},
		{"Itself", `"a": {"id": "a", "type": "act", "compensate": "a"}`, "cannot compensate itself"},
		{"End", `"a": {"id": "a", "type": "act", "compensate": "$end"}`, "ends the flow"},
		{"SleepHasNothingToUndo", `"a": {"id": "a", "type": "delay", "config": {"duration": "1 second"}, "compensate": "b"},
		  "b": {"id": "b", "type": "act"}`, "a delay step has nothing to compensate"},
		{"BranchCannotUndo", `"a": {"id": "a", "type": "act", "compensate": "b"},
		  "b": {"id": "b", "type": "branch", "config": {"cases": [], "default": "end"}}`, `step "b" is a branch step`},
		{"NoNestedCompensation", `"a": {"id": "a", "type": "act", "compensate": "b"},
		  "b": {"id": "b", "type": "act", "compensate": "c"}, "c": {"id": "c", "type": "act"}`, "a compensation cannot have one"},
		{"NoNestedSubflowCompensation", `"a": {"id": "a", "type": "subflow", "config": {"workflow": "w"}, "compensate": "b"},
		  "b": {"id": "b", "type": "subflow", "config": {"workflow": "w"}, "compensate": "a"}`, "a compensation cannot have one"},
		{"SubflowNotRetried", `"a": {"id": "a", "type": "act", "compensate": "b"},
		  "b": {"id": "b", "type": "subflow", "config": {"workflow": "w"}, "retries": {"limit": 3}}`, "steps.b.retries: a subflow step is not retried"},
		{"SubflowTimeoutInConfig", `"a": {"id": "a", "type": "subflow", "config": {"workflow": "w"}, "timeout": "1 minute"}`,
			"steps.a.timeout: set the wait for the child in config.timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def, err := flow.Parse([]byte(`{"id": "v", "version": "1.0.0", "initialStepId": "a", "steps": {` + tc.steps + `}}`))
			if err == nil {
				_, err = flow.Compile(def, hs)
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// subflowSaga is a flow whose steps invoke children and are undone by
// children: "reserve" invokes the Go workflow "stock" and is undone by the
// subflow "release" (the Go workflow "unstock"); "charge" runs a handler
// and is undone by the subflow "refund" (the flow "refunder").
const subflowSaga = `{
  "id": "trip", "version": "1.0.0", "initialStepId": "reserve",
  "steps": {
    "reserve": {"id": "reserve", "type": "subflow", "config": {"workflow": "stock"}, "input": {"path": "item"},
                "outputKey": "reservation", "compensate": "release", "transitions": {"onSuccess": "charge"}},
    "charge":  {"id": "charge", "type": "act", "config": {"label": "charge"}, "outputKey": "payment",
                "compensate": "refund", "transitions": {"onSuccess": "ship"}},
    "ship":    {"id": "ship", "type": "act", "config": {"label": "ship", "fail": %t}},
    "release": {"id": "release", "type": "subflow", "config": {"workflow": "unstock", "timeout": "1 hour"},
                "input": {"path": "reservation.id"}},
    "refund":  {"id": "refund", "type": "subflow", "config": {"workflow": "refunder", "version": "1.0.0"},
                "input": {"path": "payment"}}
  }
}`

const refunderFlow = `{
  "id": "refunder", "version": "1.0.0", "initialStepId": "refund",
  "steps": {"refund": {"id": "refund", "type": "act", "config": {"label": "refund"}, "input": {"path": "id"}}}
}`

// A subflow step's compensate is registered once its child completed, and a
// subflow step named as a compensation invokes its child to undo the step.
func TestFlowCompensatesWithSubflows(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		for _, fail := range []bool{true, false} {
			act := &actHandler{}
			hs, err := flow.NewHandlers(flow.WithHandler(act))
			require.NoError(t, err)
			p := newProcess(t, b, withHandlers(hs))
			p.h.Registry.Bind(p.client)
			workflow.MustRegister(p.h.Registry, "stock", func(ctx context.Context, ev workflow.Event[string], step workflow.Step) (map[string]string, error) {
				return workflow.Do(step, "hold", func(context.Context) (map[string]string, error) {
					act.record("reserve " + ev.Payload)
					return map[string]string{"id": "stock-" + ev.Payload}, nil
				})
			})
			workflow.MustRegister(p.h.Registry, "unstock", func(ctx context.Context, ev workflow.Event[string], step workflow.Step) (string, error) {
				return workflow.Do(step, "free", func(context.Context) (string, error) {
					act.record("unstock " + ev.Payload)
					return "freed", nil
				})
			})
			p.apply([]byte(refunderFlow))
			p.apply(fmt.Appendf(nil, subflowSaga, fail))
			p.create("trip", "t", `{"item": "widget"}`)
			p.h.RunUntilIdle()

			if !fail {
				p.h.RequireStatus("trip", "t", dftype.StatusComplete)
				require.Equal(t, []string{"reserve widget", "charge", "ship"}, act.entries(), "nothing is undone when the flow succeeds")
				continue
			}
			info := p.h.RequireStatus("trip", "t", dftype.StatusErrored)
			require.Contains(t, info.Error.Message, "ship failed", "the original error is kept")
			require.Equal(t, []string{"reserve widget", "charge", "refund charge-1", "unstock stock-widget"}, act.entries(),
				"charge is refunded by the refunder flow, then the child of reserve undone by unstock")
			var comps []string
			for _, st := range p.h.History("trip", "t").Steps {
				if strings.HasPrefix(st.Name, workflow.CompensationStepPrefix) {
					comps = append(comps, st.Name)
					require.Equal(t, "invoke", string(st.Type), st.Name)
					require.Equal(t, "complete", string(st.Status), st.Name)
					require.NotNil(t, st.Child, st.Name)
				}
			}
			require.ElementsMatch(t, []string{"compensate:charge#1", "compensate:reserve#1"}, comps)
			children, err := p.client.Children(p.ctx(), "trip", "t")
			require.NoError(t, err)
			steps := map[string]string{}
			for _, c := range children {
				steps[c.Parent.StepKey] = c.WorkflowName
				require.Equal(t, dftype.StatusComplete, c.Status, c.WorkflowName)
			}
			require.Equal(t, map[string]string{
				"reserve#1": "stock", "compensate:charge#1": "refunder", "compensate:reserve#1": "unstock",
			}, steps)
		}
	})
}

// A compensation that invokes a child that fails fails the compensation:
// the flow ends with CompensationFailedError, the original error kept.
func TestFlowSubflowCompensationFailure(t *testing.T) {
	t.Parallel()
	act := &actHandler{}
	hs, err := flow.NewHandlers(flow.WithHandler(act))
	require.NoError(t, err)
	p := newProcess(t, testharness.SQLiteMemory, withHandlers(hs))
	p.h.Registry.Bind(p.client)
	p.apply([]byte(`{
  "id": "broken", "version": "1.0.0", "initialStepId": "a",
  "steps": {
    "a": {"id": "a", "type": "act", "config": {"label": "a"}, "compensate": "undo", "transitions": {"onSuccess": "b"}},
    "b": {"id": "b", "type": "act", "config": {"label": "b", "fail": true}},
    "undo": {"id": "undo", "type": "subflow", "config": {"workflow": "undoer"}}
  }
}`))
	p.apply([]byte(`{"id": "undoer", "version": "1.0.0", "initialStepId": "x",
  "steps": {"x": {"id": "x", "type": "act", "config": {"label": "undo", "fail": true}}}}`))
	p.create("broken", "b", `{}`)
	p.h.RunUntilIdle()
	info := p.h.RequireStatus("broken", "b", dftype.StatusErrored)
	require.Equal(t, workflow.ErrorNameCompensationFailed, info.Error.Name)
	require.Contains(t, info.Error.Message, `step "compensate:a#1" failed: ChildFailedError`)
	require.Contains(t, info.Error.Message, "undo failed")
	require.Contains(t, info.Error.Message, "b failed", "the original error is kept")
}
