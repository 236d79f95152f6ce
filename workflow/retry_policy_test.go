package workflow_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/workflow"
)

func TestRetryPolicyNextDelay(t *testing.T) {
	t.Parallel()
	p := workflow.RetryPolicy{Limit: 5, Delay: 10 * time.Second, Backoff: workflow.BackoffConstant}
	require.Equal(t, 8*time.Second, p.NextDelay(1, 0), "the low end of the spread")
	require.Equal(t, 12*time.Second, p.NextDelay(1, 1), "the high end of the spread")
	for _, r := range []float64{-1, 0, 0.1, 0.5, 0.99, 2} {
		d := p.NextDelay(3, r)
		require.GreaterOrEqual(t, d, 8*time.Second, "draw %v", r)
		require.LessOrEqual(t, d, 12*time.Second, "draw %v", r)
	}
	p.MaxDelay = 9 * time.Second
	require.Equal(t, 9*time.Second, p.NextDelay(1, 1), "MaxDelay caps the jittered wait")
	p.NoJitter, p.MaxDelay = true, 0
	require.Equal(t, 10*time.Second, p.NextDelay(1, 0))

	// Growth never overflows, whatever the retry number.
	for _, b := range []workflow.Backoff{workflow.BackoffConstant, workflow.BackoffLinear, workflow.BackoffExponential} {
		p := workflow.RetryPolicy{Limit: workflow.UnlimitedRetries, Delay: time.Hour, Backoff: b}
		for _, n := range []int{1, 100, math.MaxInt32, math.MaxInt} {
			d := p.NextDelay(n, 1)
			require.Positive(t, d, "%s retry %d", b, n)
			require.LessOrEqual(t, d, workflow.MaxSleep, "%s retry %d", b, n)
		}
	}
}

func TestRetryPolicyUnlimited(t *testing.T) {
	t.Parallel()
	for _, limit := range []int{workflow.UnlimitedRetries, math.MaxInt, 1 << 40} {
		p := workflow.RetryPolicy{Limit: limit}
		require.True(t, p.Unlimited())
		require.Equal(t, workflow.UnlimitedAttempts, p.MaxAttempts())
		require.False(t, p.Exhausted(math.MaxInt32))
	}
	p := workflow.RetryPolicy{Limit: 2}
	require.Equal(t, 3, p.MaxAttempts())
	require.False(t, p.Exhausted(2))
	require.True(t, p.Exhausted(3))
}

func TestRetryPolicyJSON(t *testing.T) {
	t.Parallel()
	var p workflow.RetryPolicy
	require.NoError(t, json.Unmarshal([]byte(`{"limit": 3}`), &p))
	require.False(t, p.NoJitter, "jitter is on by default")
	require.Equal(t, workflow.DefaultRetryDelay, p.Delay)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{"limit":3,"delay":"10 seconds","backoff":"exponential"}`, string(b))

	require.NoError(t, json.Unmarshal([]byte(`{"limit": 99999999999999}`), &p))
	require.True(t, p.Unlimited(), "a limit past int32 is unlimited")
	require.Error(t, json.Unmarshal([]byte(`{"limit": "lots"}`), &p))
	require.NoError(t, json.Unmarshal([]byte(`{"limit": -1}`), &p))
	require.ErrorIs(t, p.Validate(), workflow.ErrInvalidRequest)
}

func TestRetryPolicyValidate(t *testing.T) {
	t.Parallel()
	for _, p := range []workflow.RetryPolicy{
		{Limit: -1},
		{Delay: -time.Second},
		{MaxDelay: -time.Second},
		{NonRetryable: []string{""}},
		{Backoff: "sometimes"},
	} {
		require.ErrorIs(t, p.Validate(), workflow.ErrInvalidRequest, "%+v", p)
	}
	require.NoError(t, workflow.RetryPolicy{Limit: workflow.UnlimitedRetries, MaxDelay: time.Minute, NonRetryable: []string{"X"}}.Validate())
}

func TestValidateDeadline(t *testing.T) {
	t.Parallel()
	require.NoError(t, workflow.ValidateDeadline(time.Hour))
	require.ErrorIs(t, workflow.ValidateDeadline(0), workflow.ErrInvalidRequest)
	require.ErrorIs(t, workflow.ValidateDeadline(-time.Second), workflow.ErrInvalidRequest)
	require.ErrorIs(t, workflow.ValidateDeadline(workflow.MaxSleep+time.Second), workflow.ErrInvalidRequest)
}

func TestRetryPolicyZeroDelayUnlimited(t *testing.T) {
	t.Parallel()
	p := workflow.RetryPolicy{Limit: workflow.UnlimitedRetries, Backoff: workflow.BackoffExponential}
	require.Zero(t, p.NextDelay(math.MaxInt, 0.5), "a zero delay returns at once, however many retries")
}
