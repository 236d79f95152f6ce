// Package runner executes workflow code durably.
//
// A Runner claims due tasks from the store under a lease (lock owner, expiry
// and a version that is the fencing token), loads the instance and its
// completed steps, and calls the workflow's Run with a Step bound to that
// cache. Completed steps return their recorded results; a new step runs, and
// its result is committed in one fenced checkpoint before the code goes on.
// Sleeps, event waits and retry delays suspend the instance: the wait is
// recorded and the task is released until the wake time, so nothing waits in
// memory. A write under a lease that was lost changes nothing, and the runner
// drops the work: this is what makes many runners in many processes safe.
//
// The runner knows nothing about HTTP or about how it is woken: the
// dispatcher calls Notify, the HTTP tick and the test harness call RunDue.
package runner
