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
// Store errors are of two kinds. Data the database refuses (db.ErrInvalidData)
// is never retried: a refused step result fails the step for good
// (ErrorNameStoreRefused), a refused output errors the instance. Any other
// error may be transient: the checkpoint, heartbeat, run load or hand-back is
// retried with backoff while the lease the runner last wrote holds (see
// retryStore), so a database outage stalls a run about as long as it lasts.
// While claims fail because the database is unavailable (db.ErrUnavailable)
// the claim loop tries again with backoff instead of at its next poll, and
// logs the outage once and its end once.
// A task whose lease expired without a checkpoint (or that was given back
// because the store kept failing) Config.MaxLeaseLosses times in a row
// (db.Task.LeaseLosses) is a crash loop: the runner errors the
// instance at the first step the run would start (ErrorNameRunnerLost).
//
// A task is a suspect from its second lost lease in a row
// (db.SuspectLeaseLosses): its holders died twice without a checkpoint, maybe
// killed by the task itself, maybe by another task of the same process. One
// loss is what every crash does to all a process held, so those tasks run
// side by side again at once. Suspects run in quarantine: a runner
// runs at most one at a time, from its claim until its first checkpoint
// that makes progress or its end, claims no other meanwhile
// (db.TaskClaimParams.ExcludeSuspects), and hands back the extra suspects
// of a claim made before (due at once, counting no loss), so a step that
// kills its process dies alone and reaches MaxLeaseLosses alone, while the
// tasks that died beside it make progress one by one (which saves them
// when MaxLeaseLosses is above 2). Claims without suspects are not affected.
//
// # Worker registry
//
// A runner that is started registers as a worker (db.WorkerStore) under its
// ID, before its first claim, releasing whatever the ID still held from an
// earlier life of the process; it then heartbeats the row every
// Config.WorkerHeartbeatInterval with its active count and totals, and in
// the same beat reaps: workers whose heartbeat is older than
// Config.OfflineAfter are marked offline and their tasks released at once
// (fenced, with a lease loss). Stop deregisters the worker. Drain, or a
// drain requested through the store and seen at a heartbeat, makes the
// runner claim nothing new, lets its running work finish within
// Config.DrainGrace, hands back the rest and deregisters; Drained is closed
// then. None of it adds a statement to the claim or checkpoint path.
//
// The runner knows nothing about HTTP or about how it is woken: its host
// (duraflow.New) calls Notify, the HTTP tick and the test harness call
// RunDue. It needs nothing of the management client; the client hands it
// new instances through client.EagerStarter, which it implements.
package runner
