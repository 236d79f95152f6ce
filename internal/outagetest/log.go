package outagetest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitTimeout bounds every wait of Log.Wait.
const WaitTimeout = 30 * time.Second

// Record is one logged record: its level, message and attributes (those
// of the logger's With included), each formatted as a string.
type Record struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// Log keeps every record logged through its Logger, so that a test can
// wait for a message (the signal that a background service got somewhere)
// and count how often one was logged.
type Log struct {
	mu      sync.Mutex
	recs    []Record
	changed chan struct{}
}

// NewLog returns an empty log.
func NewLog() *Log { return &Log{changed: make(chan struct{})} }

// Logger returns a logger whose records, at every level, go to l.
func (l *Log) Logger() *slog.Logger { return slog.New(&logHandler{log: l}) }

// Wait waits until a record with the message and the attributes (pairs
// of key and value, compared as strings) was logged, and returns the
// first; it fails the test after WaitTimeout.
func (l *Log) Wait(t testing.TB, msg string, attrs ...string) Record {
	t.Helper()
	return l.WaitN(t, 1, msg, attrs...)
}

// WaitN waits until n records with the message and the attributes were
// logged, and returns the nth; it fails the test after WaitTimeout.
func (l *Log) WaitN(t testing.TB, n int, msg string, attrs ...string) Record {
	t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		changed, seen := l.changed, 0
		for _, r := range l.recs {
			if r.matches(msg, attrs) {
				if seen++; seen == n {
					l.mu.Unlock()
					return r
				}
			}
		}
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("outagetest: fewer than %d logs %q %v within %s; the log:\n%s", n, msg, attrs, WaitTimeout, l)
		}
	}
}

// Count returns how many records with the message and the attributes
// were logged.
func (l *Log) Count(msg string, attrs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.matches(msg, attrs) {
			n++
		}
	}
	return n
}

// String returns the records, one a line.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&b, "%s %s %v\n", r.Level, r.Message, r.Attrs)
	}
	return b.String()
}

func (r Record) matches(msg string, attrs []string) bool {
	if r.Message != msg {
		return false
	}
	for i := 0; i+1 < len(attrs); i += 2 {
		if r.Attrs[attrs[i]] != attrs[i+1] {
			return false
		}
	}
	return true
}

func (l *Log) add(r Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r)
	close(l.changed)
	l.changed = make(chan struct{})
}

type logHandler struct {
	log   *Log
	attrs []slog.Attr
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, rec slog.Record) error {
	r := Record{Level: rec.Level, Message: rec.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		r.Attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		r.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.log.add(r)
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{log: h.log, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *logHandler) WithGroup(string) slog.Handler { return h }
