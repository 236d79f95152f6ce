package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/internal/backoff"
)

func TestBackoffGrowsToItsCap(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{First: 100 * time.Millisecond, Max: time.Second}
	b := p.New()
	for range 100 {
		b.Reset()
		first := b.Next()
		require.GreaterOrEqual(t, first, 50*time.Millisecond)
		require.LessOrEqual(t, first, 150*time.Millisecond)
		var last time.Duration
		for range 20 {
			last = b.Next()
			require.LessOrEqual(t, last, p.Max, "a wait is never longer than the cap")
		}
		require.GreaterOrEqual(t, last, p.Max/2, "the waits reach the cap, jittered below it")
	}
}

func TestBackoffIsJittered(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[backoff.Loop.New().Next()] = true
	}
	require.Greater(t, len(seen), 10, "first waits are spread, so services that failed together do not retry together")
}

func TestSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.False(t, backoff.Sleep(ctx, time.Hour))
	require.True(t, backoff.Sleep(t.Context(), time.Microsecond))
}

// records is an slog handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// at returns the messages logged at level or above.
func (r *records) at(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level >= level {
			out = append(out, rec.Message)
		}
	}
	return out
}

func TestOutageLogsItsStartAndItsEndOnce(t *testing.T) {
	t.Parallel()
	log := &records{}
	o := backoff.NewOutage(slog.New(log), "claiming tasks", backoff.Loop)
	down := fmt.Errorf("claiming tasks: %w: dial tcp: connection refused", db.ErrUnavailable)

	unavailable, _ := o.Round(nil)
	require.False(t, unavailable)
	require.False(t, o.Down())
	require.Empty(t, log.at(slog.LevelDebug), "a healthy round logs nothing")

	for range 50 {
		unavailable, wait := o.Round(down)
		require.True(t, unavailable)
		require.Positive(t, wait)
		require.LessOrEqual(t, wait, backoff.Loop.Max)
	}
	require.True(t, o.Down())
	require.Equal(t, []string{"database unavailable; retrying with backoff"}, log.at(slog.LevelInfo), "one line for the whole outage")

	// An error the database answered ends the outage: the caller handles it.
	unavailable, _ = o.Round(errors.New("relation does not exist"))
	require.False(t, unavailable)
	require.False(t, o.Down())
	require.Equal(t, []string{"database unavailable; retrying with backoff", "database available again"}, log.at(slog.LevelInfo))

	// The next outage starts its backoff again from the first wait, and is
	// logged again.
	_, wait := o.Round(down)
	require.LessOrEqual(t, wait, 3*backoff.Loop.First/2)
	o.Round(nil)
	require.Len(t, log.at(slog.LevelInfo), 4)
}
