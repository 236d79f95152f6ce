package workflow_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/dftype"
	"github.com/duraflow/duraflow/workflow"
)

func TestStepConfigJSONAcceptsDurationStrings(t *testing.T) {
	t.Parallel()
	var c workflow.StepConfig
	require.NoError(t, json.Unmarshal([]byte(`{"retries":{"limit":3,"delay":"1 second","backoff":"linear"},"timeout":"30 seconds"}`), &c))
	require.Equal(t, workflow.StepConfig{
		Retries: &workflow.RetryPolicy{Limit: 3, Delay: time.Second, Backoff: workflow.BackoffLinear},
		Timeout: 30 * time.Second,
	}, c)
	var w workflow.WaitOptions
	require.NoError(t, json.Unmarshal([]byte(`{"type":"approval","timeout":"1 hour"}`), &w))
	require.Equal(t, workflow.WaitOptions{Type: "approval", Timeout: time.Hour}, w)
}

func TestRetryPolicyDelays(t *testing.T) {
	t.Parallel()
	d := 10 * time.Second
	cases := []struct {
		backoff workflow.Backoff
		want    []time.Duration
	}{
		{workflow.BackoffConstant, []time.Duration{d, d, d, d}},
		{workflow.BackoffLinear, []time.Duration{d, 2 * d, 3 * d, 4 * d}},
		{workflow.BackoffExponential, []time.Duration{d, 2 * d, 4 * d, 8 * d}},
	}
	for _, tc := range cases {
		p := workflow.RetryPolicy{Limit: 5, Delay: d, Backoff: tc.backoff}
		for n, want := range tc.want {
			require.Equal(t, want, p.DelayFor(n+1), "%s retry %d", tc.backoff, n+1)
		}
	}
	huge := workflow.RetryPolicy{Delay: 24 * time.Hour, Backoff: workflow.BackoffExponential}
	require.Equal(t, workflow.MaxSleep, huge.DelayFor(60), "delays are capped instead of overflowing")
	require.Error(t, workflow.RetryPolicy{Backoff: "random"}.Validate())
	require.Error(t, workflow.RetryPolicy{Limit: -1}.Validate())

}

func TestValidation(t *testing.T) {
	t.Parallel()
	require.NoError(t, workflow.ValidateInstanceID("order_42-a"))
	require.NoError(t, workflow.ValidateInstanceID("_x"))
	for _, bad := range []string{"", "-x", "a b", "a/b", "é", string(make([]byte, 101))} {
		require.ErrorIs(t, workflow.ValidateInstanceID(bad), workflow.ErrInvalidInstanceID, "%q", bad)
		require.ErrorIs(t, workflow.ValidateEventType(bad), workflow.ErrInvalidEventType, "%q", bad)
	}
	require.ErrorIs(t, workflow.ValidateWorkflowName(string(make([]byte, 65))), workflow.ErrInvalidWorkflowName)
}

func TestErrorNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Error", workflow.ErrorName(fmt.Errorf("plain")))
	require.Equal(t, "NonRetryableError", workflow.ErrorName(workflow.NonRetryable(fmt.Errorf("x"))))
	require.Equal(t, "CardDeclined", workflow.ErrorName(fmt.Errorf("wrapped: %w", workflow.NewNonRetryableError("CardDeclined", "no"))))
	require.True(t, workflow.IsNonRetryable(fmt.Errorf("w: %w", workflow.NonRetryable(fmt.Errorf("x")))))
	se := &workflow.StepError{Step: "wait", Name: workflow.ErrorNameEventTimeout}
	require.ErrorIs(t, se, workflow.ErrEventTimeout)
	require.NotErrorIs(t, se, workflow.ErrStepTimeout)
}

func ExampleParseDuration() {
	d, _ := dftype.ParseDuration("24 hours")
	fmt.Println(d, dftype.FormatDuration(90*time.Second))
	// Output: 24h0m0s 90 seconds
}
