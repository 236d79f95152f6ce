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
			_, err = workflow.Register(h.Registry, compiled.ID(), compiled)
			require.NoError(t, err)
			_, err = h.Client.Create(h.Context(), "trip", workflow.CreateRequest{ID: "t"})
			require.NoError(t, err)
			h.RunUntilIdle()

			if !fail {
				h.RequireStatus("trip", "t", workflow.StatusComplete)
				require.Equal(t, []string{"reserve", "charge", "ship"}, act.entries(), "nothing is undone when the flow succeeds")
				continue
			}
			info := h.RequireStatus("trip", "t", workflow.StatusErrored)
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
