package flow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/flow"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// subflowParent returns a flow whose step "call" invokes child (at version,
// when set) with the context's "order" as params, stores its output at
// "result" and, when the child fails, its error at "failure".
func subflowParent(id, child, version string) []byte {
	pin := ""
	if version != "" {
		pin = fmt.Sprintf(`, "version": %q`, version)
	}
	return fmt.Appendf(nil, `{"id": %q, "version": "1.0.0", "initialStepId": "call",
  "steps": {
    "call": {"id": "call", "type": "subflow", "config": {"workflow": %q%s, "timeout": "1 hour"},
             "input": {"path": "order"}, "outputKey": "result",
             "transitions": {"onFailure": "caught"}},
    "caught": {"id": "caught", "type": "set", "config": {"values": {"result": {"value": "caught"}}}}
  },
  "output": "result"}`, id, child, pin)
}

func TestSubflowInvokesFlowAndGoWorkflow(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		// The engine the runner starts children through pins flow versions.
		p.h.Registry.Bind(p.client)
		workflow.MustRegister(p.h.Registry, "double", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
			if ev.Payload < 0 {
				return 0, workflow.NonRetryable(errors.New("negative"))
			}
			return 2 * ev.Payload, nil
		})
		p.apply(quickFlow("child", "1.0.0"))
		p.apply(quickFlow("child", "2.0.0"))
		p.apply(subflowParent("latest", "child", ""))
		p.apply(subflowParent("pinned", "child", "1.0.0"))
		p.apply(subflowParent("go", "double", ""))

		p.create("latest", "l", `{"order": {}}`)
		p.create("pinned", "p", `{"order": {}}`)
		p.create("go", "g", `{"order": 21}`)
		p.create("go", "bad", `{"order": -1}`)
		p.h.RunUntilIdle()
		require.Equal(t, "2.0.0", p.output("latest", "l"))
		require.Equal(t, "1.0.0", p.output("pinned", "p"), "the subflow's version pin holds")
		var n int
		p.h.RequireOutput("go", "g", &n)
		require.Equal(t, 42, n)
		require.Equal(t, "caught", p.output("go", "bad"), "a failed child is a step failure onFailure catches")

		children, err := p.client.Children(p.ctx(), "pinned", "p")
		require.NoError(t, err)
		require.Len(t, children, 1)
		require.Equal(t, "1.0.0", p.pinOf("child", children[0].ID))
	})
}

func TestSubflowCycleRefusedAtApply(t *testing.T) {
	t.Parallel()
	p := newProcess(t, testharness.SQLiteMemory)
	p.apply(subflowParent("a", "b", ""))
	_, err := p.flows.Apply(p.ctx(), subflowParent("b", "a", ""))
	var ve *flow.ValidationError
	require.ErrorAs(t, err, &ve)
	require.ErrorIs(t, err, flow.ErrInvalidDefinition)
	require.Equal(t, "steps.call.config.workflow", ve.Problems[0].Path)
	require.Contains(t, ve.Problems[0].Message, "b -> a -> b")

	_, err = p.flows.Apply(p.ctx(), subflowParent("self", "self", ""))
	require.ErrorAs(t, err, &ve)
	require.Contains(t, ve.Problems[0].Message, "self -> self")

	_, err = p.flows.Apply(p.ctx(), []byte(`{"id": "x", "version": "1.0.0", "initialStepId": "call",
  "steps": {"call": {"id": "call", "type": "subflow", "config": {"workflow": "", "version": "nope", "policy": "maybe"}}}}`))
	require.ErrorAs(t, err, &ve)
	paths := []string{}
	for _, pr := range ve.Problems {
		paths = append(paths, pr.Path)
	}
	require.Subset(t, paths, []string{"steps.call.config.workflow", "steps.call.config.version", "steps.call.config.policy"})
}

// strictParent is subflowParent without onFailure: a failed child fails
// the flow.
func strictParent(id, child, version string) []byte {
	pin := ""
	if version != "" {
		pin = fmt.Sprintf(`, "version": %q`, version)
	}
	return fmt.Appendf(nil, `{"id": %q, "version": "1.0.0", "initialStepId": "call",
  "steps": {"call": {"id": "call", "type": "subflow", "config": {"workflow": %q%s}, "outputKey": "result"}},
  "output": "result"}`, id, child, pin)
}

// A subflow step naming a workflow or flow version this server does not
// know is applied with a warning (the child may be a Go workflow of another
// process, or a flow applied next); if it is still unknown when the step
// runs, the step fails at once with InvokeRefusedError saying what is
// missing, which onFailure catches: no parent is left waiting.
func TestSubflowUnknownChild(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		p := newProcess(t, b)
		p.h.Registry.Bind(p.client)
		workflow.MustRegister(p.h.Registry, "double", func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
			return 2 * ev.Payload, nil
		})
		p.apply(quickFlow("child", "1.0.0"))

		for _, tc := range []struct{ id, child, version, path, warning string }{
			{"unknown", "nope", "", "steps.call.config.workflow", `no flow "nope" is stored and no Go workflow "nope" is registered on this server`},
			{"noversion", "child", "9.9.9", "steps.call.config.version", `flow "child" has no version "9.9.9" yet`},
			{"gopin", "double", "1.0.0", "steps.call.config.version", `"double" is a Go workflow of this server, which has no versions`},
		} {
			res := p.apply(strictParent(tc.id, tc.child, tc.version))
			require.Len(t, res.Warnings, 1, tc.id)
			require.Equal(t, tc.path, res.Warnings[0].Path, tc.id)
			require.Contains(t, res.Warnings[0].Message, tc.warning, tc.id)
		}
		require.Empty(t, p.apply(strictParent("known", "child", "1.0.0")).Warnings)
		p.apply(subflowParent("caught", "nope", ""))

		p.create("unknown", "u", `{}`)
		p.create("noversion", "v", `{}`)
		p.create("caught", "c", `{}`)
		p.h.RunUntilIdle()
		for _, tc := range []struct{ wf, id, message string }{
			{"unknown", "u", `workflow not found: "nope"`},
			{"noversion", "v", `flow "child" has no version "9.9.9"`},
		} {
			info := p.h.RequireStatus(tc.wf, tc.id, dftype.StatusErrored)
			require.Equal(t, workflow.ErrorNameInvokeRefused, info.Error.Name, tc.wf)
			require.Contains(t, info.Error.Message, `invoke step "call#1"`, tc.wf)
			require.Contains(t, info.Error.Message, tc.message, tc.wf)
			children, err := p.client.Children(p.ctx(), tc.wf, tc.id)
			require.NoError(t, err)
			require.Empty(t, children, "no child was started")
		}
		require.Equal(t, "caught", p.output("caught", "c"), "onFailure catches the refused start")
	})
}
