package workflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/workflow"
)

func TestEngineLimits(t *testing.T) {
	t.Parallel()

	t.Run("ZeroIsTheDefaults", func(t *testing.T) {
		t.Parallel()
		d := workflow.DefaultEngineLimits()
		require.Equal(t, workflow.EngineLimits{MaxPayloadBytes: 1 << 20, MaxStepsPerRun: 1024, MaxBatchSize: 100}, d)
		require.Equal(t, d, workflow.EngineLimits{}.WithDefaults())
		require.Equal(t, workflow.EngineLimits{MaxPayloadBytes: 5000, MaxStepsPerRun: 1024, MaxBatchSize: 7},
			workflow.EngineLimits{MaxPayloadBytes: 5000, MaxBatchSize: 7}.WithDefaults())
		require.NoError(t, workflow.EngineLimits{}.Validate())
	})

	t.Run("ValidateNamesEverySettingOutOfRange", func(t *testing.T) {
		t.Parallel()
		err := workflow.EngineLimits{MaxPayloadBytes: 100, MaxStepsPerRun: 100_001, MaxBatchSize: -1}.Validate()
		require.EqualError(t, err, "EngineLimits.MaxPayloadBytes 100 must be between 1024 and 67108864\n"+
			"EngineLimits.MaxStepsPerRun 100001 must be between 1 and 100000\n"+
			"EngineLimits.MaxBatchSize -1 must be between 1 and 1000")
		require.NoError(t, workflow.EngineLimits{MaxPayloadBytes: 64 << 20, MaxStepsPerRun: 100_000, MaxBatchSize: 1000}.Validate())
		require.NoError(t, workflow.EngineLimits{MaxPayloadBytes: 1 << 10, MaxStepsPerRun: 1, MaxBatchSize: 1}.Validate())
	})

	t.Run("PayloadsAgainstTheirLimit", func(t *testing.T) {
		t.Parallel()
		l := workflow.EngineLimits{MaxPayloadBytes: 2 << 20}
		past := []byte(`"` + strings.Repeat("x", 1<<20) + `"`)
		require.ErrorIs(t, workflow.ValidatePayload("params", past), workflow.ErrPayloadTooLarge, "the package's check keeps the default")
		require.NoError(t, l.ValidatePayload("params", past))
		raw, err := l.MarshalPayload("result", strings.Repeat("x", 1<<20))
		require.NoError(t, err)
		require.Len(t, raw, 1<<20+2)

		low := workflow.EngineLimits{MaxPayloadBytes: 1 << 10}
		err = low.ValidatePayload("params", []byte(`"`+strings.Repeat("x", 1<<10)+`"`))
		require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
		require.EqualError(t, err, "payload too large: params is 1026 bytes, the limit is 1024")
		_, err = low.MarshalPayload("result", strings.Repeat("x", 1<<10))
		require.ErrorIs(t, err, workflow.ErrPayloadTooLarge)
		require.ErrorIs(t, low.ValidatePayload("params", []byte(`{`)), workflow.ErrInvalidRequest, "the other checks stay")
	})

	t.Run("BatchSize", func(t *testing.T) {
		t.Parallel()
		require.NoError(t, workflow.EngineLimits{}.CheckBatchSize(100))
		require.ErrorIs(t, workflow.EngineLimits{}.CheckBatchSize(101), workflow.ErrInvalidRequest)
		require.ErrorIs(t, workflow.EngineLimits{}.CheckBatchSize(0), workflow.ErrInvalidRequest)
		require.NoError(t, workflow.EngineLimits{MaxBatchSize: 500}.CheckBatchSize(500))
		require.EqualError(t, workflow.EngineLimits{MaxBatchSize: 2}.CheckBatchSize(3), "invalid request: a batch holds at most 2 instances, got 3")
	})
}

func TestWithMaxStepsPerRun(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, workflow.Event[json.RawMessage], workflow.Step) (any, error) { return nil, nil }
	reg := workflow.NewRegistry()
	workflow.MustRegister(reg, "own", noop, workflow.WithMaxStepsPerRun(5000))
	workflow.MustRegister(reg, "host", noop)
	def, ok := reg.Definition("own")
	require.True(t, ok)
	require.Equal(t, 5000, def.MaxStepsPerRun)
	def, _ = reg.Definition("host")
	require.Zero(t, def.MaxStepsPerRun, "the host's limit applies")
	for _, n := range []int{0, -1, workflow.MaxStepsPerRunLimit + 1} {
		_, err := workflow.Register(reg, "bad", noop, workflow.WithMaxStepsPerRun(n))
		require.ErrorIs(t, err, workflow.ErrInvalidLimit, "%d", n)
		require.ErrorContains(t, err, "max steps per run must be between 1 and 100000")
	}
}
