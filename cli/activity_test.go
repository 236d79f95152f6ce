package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(b.buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestActivitySummary: a line after a tick that followed some activity,
// with that tick's counts, and none after an idle tick.
func TestActivitySummary(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	a := &activity{}
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.summarize(ctx, slog.New(slog.NewJSONHandler(&out, nil)), 10*time.Second, tick)
	}()
	// A tick is handled before the next one is received: two sends make
	// sure the first was handled.
	ticks := func() { tick <- time.Time{}; tick <- time.Time{} }

	ticks()
	require.Empty(t, out.lines(), "idle: nothing")

	a.ObserveCreated("hello", 2)
	a.ObserveRunEnd("hello", false)
	a.ObserveRunEnd("hello", true)
	a.ObserveRetry("hello")
	a.ObserveRetry("hello")
	a.ObserveRetry("hello")
	ticks()
	lines := out.lines()
	require.Len(t, lines, 1)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &m))
	require.Equal(t, "activity", m["msg"])
	require.Equal(t, "INFO", m["level"])
	require.Equal(t, "10s", m["interval"])
	require.EqualValues(t, 2, m["created"])
	require.EqualValues(t, 1, m["completed"])
	require.EqualValues(t, 1, m["errored"])
	require.EqualValues(t, 3, m["retries"])

	ticks()
	require.Len(t, out.lines(), 1, "idle again: nothing more")

	a.ObserveCreated("hello", 1)
	ticks()
	lines = out.lines()
	require.Len(t, lines, 2)
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &m))
	require.EqualValues(t, 1, m["created"], "counts are per interval")
	require.EqualValues(t, 0, m["retries"])

	cancel()
	<-done
}
