package workflow_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/workflow"
)

func noopWorkflow(context.Context, workflow.Event[string], workflow.Step) (string, error) {
	return "", nil
}

func TestRegisterOptions(t *testing.T) {
	t.Parallel()

	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "plain", noopWorkflow)
	workflow.MustRegister(reg, "billing", noopWorkflow, workflow.WithQueue("payments"))

	def, ok := reg.Definition("plain")
	require.True(t, ok)
	require.Equal(t, workflow.DefaultQueue, def.Queue)
	def, ok = reg.Definition("billing")
	require.True(t, ok)
	require.Equal(t, "payments", def.Queue)
	_, ok = reg.Definition("missing")
	require.False(t, ok)

	_, err := workflow.Register(reg, "bad", noopWorkflow, workflow.WithQueue("-x"))
	require.ErrorIs(t, err, workflow.ErrInvalidRequest)
	_, ok = reg.Definition("bad")
	require.False(t, ok, "a refused registration leaves nothing behind")
}
