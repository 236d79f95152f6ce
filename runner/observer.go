package runner

import "time"

// Observer receives the runner's in-memory observations, for metrics (see
// package metrics). Every method is called on the hot path (claims, step
// attempts, checkpoints) and must be cheap and must not block: increment a
// counter, observe a histogram. None is called with an instance id or a step
// name, so label sets stay bounded. Durations are measured on the runner's
// clock.
type Observer interface {
	// ObserveClaim reports one claim round trip (Store.TaskClaim): how long
	// it took and how many tasks it leased.
	ObserveClaim(d time.Duration, tasks int)
	// ObserveStep reports one Do step attempt that ran (not a replayed
	// result): its workflow and how long its function took.
	ObserveStep(workflowName string, d time.Duration)
	// ObserveRunEnd reports a run this runner ended, once its checkpoint
	// committed: complete, or errored (crash loops, deadlines and refused
	// outputs included).
	ObserveRunEnd(workflowName string, errored bool)
	// ObserveCrashLoop reports an instance the runner errored because its
	// task lost its runner Config.MaxLeaseLosses times (ErrorNameRunnerLost),
	// once its checkpoint committed. ObserveRunEnd reports it too.
	ObserveCrashLoop(workflowName string)
	// ObserveWake reports the wake latency of an event wait: from the
	// event's created_at (when the store buffered it) to the moment the
	// waiting run went on with it, either by consuming it or by replaying
	// the step the send completed.
	ObserveWake(workflowName string, d time.Duration)
}

// RetryObserver is an Observer that is also told of step retries. The
// runner calls ObserveRetry when a Do step attempt failed and its next
// attempt is scheduled (before the checkpoint that records it commits).
type RetryObserver interface {
	// ObserveRetry reports a failed attempt of a step of workflowName that
	// will be retried.
	ObserveRetry(workflowName string)
}

// nopObserver is the Observer of a runner configured without one.
type nopObserver struct{}

func (nopObserver) ObserveClaim(time.Duration, int)   {}
func (nopObserver) ObserveStep(string, time.Duration) {}
func (nopObserver) ObserveRunEnd(string, bool)        {}
func (nopObserver) ObserveCrashLoop(string)           {}
func (nopObserver) ObserveWake(string, time.Duration) {}
