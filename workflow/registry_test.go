package workflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/workflow"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	noop := func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (any, error) { return nil, nil }
	b, err := workflow.Register(reg, "zeta", noop)
	require.NoError(t, err)
	require.Equal(t, "zeta", b.Name())
	_, err = workflow.Register(reg, "alpha", noop)
	require.NoError(t, err)
	require.Equal(t, []string{"alpha", "zeta"}, reg.Names())

	_, err = workflow.Register(reg, "zeta", noop)
	require.ErrorIs(t, err, workflow.ErrInvalidRequest, "a name is registered once")
	_, err = workflow.Register(reg, "bad name", noop)
	require.ErrorIs(t, err, workflow.ErrInvalidWorkflowName)
	_, err = workflow.Register[any, any](reg, "nil", nil)
	require.Error(t, err)
	require.Panics(t, func() { workflow.MustRegister(reg, "zeta", noop) })

	_, err = b.Create(context.Background(), workflow.CreateOptions[any]{ID: "x"})
	require.ErrorIs(t, err, workflow.ErrEngineNotBound, "a binding needs an engine")
}
