package client_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/client"
	"github.com/duraflow/duraflow/testharness"
	"github.com/duraflow/duraflow/workflow"
)

// TestSetQueueLimitsRefusesBadLimits: each limit a queue cannot have is
// workflow.ErrInvalidLimit, and nothing is written.
func TestSetQueueLimitsRefusesBadLimits(t *testing.T) {
	t.Parallel()
	testharness.ForEachBackend(t, func(t *testing.T, b testharness.Backend) {
		h := testharness.New(t, testharness.WithBackend(b))
		for _, bad := range []client.QueueLimits{
			{MaxRunning: -1},
			{Rate: workflow.RateLimit{Limit: 0, Period: time.Minute}},
			{Rate: workflow.RateLimit{Limit: -5, Period: time.Minute}},
			{Rate: workflow.RateLimit{Limit: 10}},
			{Rate: workflow.RateLimit{Limit: 10, Period: -time.Second}},
			{Rate: workflow.RateLimit{Limit: 10, Period: 500 * time.Microsecond}},
		} {
			_, err := h.Client.SetQueueLimits(h.Context(), "payments", bad)
			require.ErrorIs(t, err, workflow.ErrInvalidLimit, "%+v", bad)
		}
		_, err := h.Client.GetQueue(h.Context(), "payments")
		require.ErrorIs(t, err, workflow.ErrQueueNotFound, "nothing was written")

		q, err := h.Client.SetQueueLimits(h.Context(), "payments", client.QueueLimits{Rate: workflow.RateLimit{Limit: 10, Period: time.Millisecond}})
		require.NoError(t, err, "a period of 1ms is the shortest")
		require.Equal(t, &workflow.RateLimit{Limit: 10, Period: time.Millisecond}, q.Rate)
	})
}
