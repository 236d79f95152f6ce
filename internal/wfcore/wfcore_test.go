package wfcore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/internal/wfcore"
	"github.com/duraflow/duraflow/workflow"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	noop := func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (any, error) { return nil, nil }
	workflow.MustRegister(reg, "alpha", noop)

	r, ok := wfcore.Lookup(reg, "alpha")
	require.True(t, ok)
	require.Equal(t, "alpha", r.Name())
	require.True(t, wfcore.Registered(reg, "alpha"))
	_, ok = wfcore.Lookup(reg, "beta")
	require.False(t, ok)
	require.False(t, wfcore.Registered(reg, "beta"))
}

func TestRunnableDecodesParamsAndEncodesOutput(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	type in struct{ N int }
	workflow.MustRegister(reg, "double", func(ctx context.Context, ev workflow.Event[in], step workflow.Step) (map[string]int, error) {
		return map[string]int{"n": ev.Payload.N * 2, "run": ev.RunNumber}, nil
	})
	r, _ := wfcore.Lookup(reg, "double")
	out, err := r.Execute(context.Background(), wfcore.RawEvent{Payload: []byte(`{"N":21}`), RunNumber: 1}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":42,"run":1}`, string(out))

	_, err = r.Execute(context.Background(), wfcore.RawEvent{Payload: []byte(`"not an object"`)}, nil)
	require.True(t, workflow.IsNonRetryable(err), "params that don't decode fail without retries")
}

func TestNewStepConfig(t *testing.T) {
	t.Parallel()
	c := wfcore.NewStepConfig()
	require.Equal(t, workflow.DefaultRetryPolicy(), *c.Retries)
	require.Equal(t, 10*time.Minute, c.Timeout)
	c = wfcore.NewStepConfig(workflow.WithTimeout(time.Second), nil)
	require.Equal(t, time.Second, c.Timeout)
}

func TestNormalizeStepName(t *testing.T) {
	t.Parallel()
	key, err := wfcore.NormalizeStepName("  charge card  ")
	require.NoError(t, err)
	require.Equal(t, "charge card", key)
	_, err = wfcore.NormalizeStepName("tab\there")
	require.ErrorIs(t, err, workflow.ErrInvalidStepName)
}

func TestContextWithStepInfo(t *testing.T) {
	t.Parallel()
	_, ok := workflow.StepInfoFromContext(context.Background())
	require.False(t, ok)
	require.Zero(t, workflow.Attempt(context.Background()))
	ctx := wfcore.ContextWithStepInfo(context.Background(), workflow.StepInfo{Step: "s", Attempt: 3})
	info, ok := workflow.StepInfoFromContext(ctx)
	require.True(t, ok)
	require.Equal(t, "s", info.Step)
	require.Equal(t, 3, workflow.Attempt(ctx))
}

type stubRunnable struct{ name string }

func (s stubRunnable) Name() string { return s.name }

func (s stubRunnable) Execute(context.Context, wfcore.RawEvent, any) (json.RawMessage, error) {
	return json.RawMessage(`"stub"`), nil
}

func TestOverride(t *testing.T) {
	t.Parallel()
	reg := workflow.NewRegistry()
	noop := func(ctx context.Context, ev workflow.Event[any], step workflow.Step) (any, error) { return "real", nil }
	workflow.MustRegister(reg, "alpha", noop, workflow.WithQueue("emails"))

	wfcore.Override(reg, "alpha", stubRunnable{name: "alpha"})
	wfcore.Override(reg, "beta", stubRunnable{name: "beta"})
	r, ok := wfcore.Lookup(reg, "alpha")
	require.True(t, ok)
	out, err := r.Execute(context.Background(), wfcore.RawEvent{}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `"stub"`, string(out), "the substitute runs instead of the registered workflow")
	require.True(t, wfcore.Registered(reg, "beta"), "a substitute needs no registration")
	require.Equal(t, []string{"alpha", "beta"}, reg.Names())
	def, ok := reg.Definition("alpha")
	require.True(t, ok)
	require.Equal(t, "emails", def.Queue, "the registered definition stays")
	_, err = workflow.Register(reg, "beta", noop)
	require.NoError(t, err, "a substituted name can still be registered")

	wfcore.Override(reg, "alpha", nil)
	r, _ = wfcore.Lookup(reg, "alpha")
	out, err = r.Execute(context.Background(), wfcore.RawEvent{}, nil)
	require.NoError(t, err)
	require.JSONEq(t, `"real"`, string(out), "a nil substitute ends the substitution")
}
