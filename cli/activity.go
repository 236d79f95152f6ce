package cli

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/duraflow/duraflow"
	"github.com/duraflow/duraflow/runner"
)

// activity counts what dev's host did (instances created, completed and
// errored, step retries) for the summary dev logs, and passes every
// observation on to the metrics when they are on.
type activity struct {
	next                                 duraflow.Observer // nil without metrics
	created, completed, errored, retries atomic.Int64
}

var (
	_ duraflow.Observer    = (*activity)(nil)
	_ runner.RetryObserver = (*activity)(nil)
)

func (a *activity) ObserveClaim(d time.Duration, tasks int) {
	if a.next != nil {
		a.next.ObserveClaim(d, tasks)
	}
}

func (a *activity) ObserveStep(workflowName string, d time.Duration) {
	if a.next != nil {
		a.next.ObserveStep(workflowName, d)
	}
}

func (a *activity) ObserveRunEnd(workflowName string, errored bool) {
	if errored {
		a.errored.Add(1)
	} else {
		a.completed.Add(1)
	}
	if a.next != nil {
		a.next.ObserveRunEnd(workflowName, errored)
	}
}

func (a *activity) ObserveCrashLoop(workflowName string) {
	if a.next != nil {
		a.next.ObserveCrashLoop(workflowName)
	}
}

func (a *activity) ObserveWake(workflowName string, d time.Duration) {
	if a.next != nil {
		a.next.ObserveWake(workflowName, d)
	}
}

func (a *activity) ObserveCreated(workflowName string, n int) {
	a.created.Add(int64(n))
	if a.next != nil {
		a.next.ObserveCreated(workflowName, n)
	}
}

func (a *activity) ObserveRetry(workflowName string) {
	a.retries.Add(1)
	if ro, ok := a.next.(runner.RetryObserver); ok {
		ro.ObserveRetry(workflowName)
	}
}

// activityCounts is a snapshot of the counters.
type activityCounts struct{ created, completed, errored, retries int64 }

func (a *activity) counts() activityCounts {
	return activityCounts{a.created.Load(), a.completed.Load(), a.errored.Load(), a.retries.Load()}
}

// summarize logs one line at each tick (every interval) after which
// something happened: how many instances were created, completed and
// errored, and how many step attempts failed and were retried. It says
// nothing while dev is idle, and returns when ctx is done.
func (a *activity) summarize(ctx context.Context, log *slog.Logger, interval time.Duration, tick <-chan time.Time) {
	last := a.counts()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		now := a.counts()
		if now == last {
			continue
		}
		log.Info("activity", "interval", interval.String(),
			"created", now.created-last.created, "completed", now.completed-last.completed,
			"errored", now.errored-last.errored, "retries", now.retries-last.retries)
		last = now
	}
}
