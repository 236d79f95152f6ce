package flow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
		workflow.MustRegister(p.h.Registry, "double", workflow.Func[int, int](
			func(ctx context.Context, ev workflow.Event[int], step workflow.Step) (int, error) {
				if ev.Payload < 0 {
					return 0, workflow.NonRetryable(errors.New("negative"))
				}
				return 2 * ev.Payload, nil
			}))
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
