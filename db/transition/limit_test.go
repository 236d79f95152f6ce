package transition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/transition"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	t.Run("concurrency", func(t *testing.T) {
		t.Parallel()
		rows := []*db.LimitRow{{Scope: "a", MaxRunning: 2, Running: 1}, {Scope: "b", Running: 7}}
		plan := transition.Admit(rows, t0)
		require.True(t, plan.Admitted)
		require.Equal(t, t0, plan.RunAt)
		require.Equal(t, 2, rows[0].Running)
		require.Equal(t, 8, rows[1].Running, "a scope without a max counts too")
		plan = transition.Admit(rows, t0)
		require.False(t, plan.Admitted)
		require.Equal(t, "a", plan.Blocked)
		require.Equal(t, 2, rows[0].Running, "a refused admission changes nothing")
		transition.Release(rows)
		require.Equal(t, 1, rows[0].Running)
	})
	t.Run("rate fixed window", func(t *testing.T) {
		t.Parallel()
		r := &db.LimitRow{Scope: "r", RateLimit: 2, RatePeriod: time.Minute}
		var starts []time.Time
		for range 5 {
			plan := transition.Admit([]*db.LimitRow{r}, t0.Add(10*time.Second))
			require.True(t, plan.Admitted)
			starts = append(starts, plan.RunAt)
		}
		require.Equal(t, []time.Time{
			t0.Add(10 * time.Second), t0.Add(10 * time.Second),
			t0.Add(time.Minute), t0.Add(time.Minute), t0.Add(2 * time.Minute),
		}, starts)
		// Later, the window of now has room again.
		plan := transition.Admit([]*db.LimitRow{r}, t0.Add(10*time.Minute+time.Second))
		require.Equal(t, t0.Add(10*time.Minute+time.Second), plan.RunAt)
		require.Empty(t, plan.RateScope)
	})
	t.Run("two rates agree", func(t *testing.T) {
		t.Parallel()
		full := t0
		a := &db.LimitRow{Scope: "a", RateLimit: 1, RatePeriod: time.Minute, RateWindow: &full, RateCount: 1}
		b := &db.LimitRow{Scope: "b", RateLimit: 1, RatePeriod: 2 * time.Minute}
		plan := transition.Admit([]*db.LimitRow{a, b}, t0)
		require.Equal(t, t0.Add(time.Minute), plan.RunAt)
		require.Equal(t, "a", plan.RateScope)
	})
}
