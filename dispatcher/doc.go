// Package dispatcher holds Duraflow's wake mechanisms: the ways a runner
// learns that work is due sooner than its next poll.
//
// Work is always found by polling the task table; a wake only makes it
// faster, so a lost wake delays work by at most one poll interval and never
// loses it. Local wakes several runners of one process when a commit made
// work due; TickFunc lets an HTTP request (from cron or a platform
// scheduler) drive a runner.
//
// A host built by duraflow.New wakes its own parts and needs neither: Local
// serves programs (and tests) that run several runners side by side. Wakes
// across processes are the store's capability (db.WakeListener: Postgres
// LISTEN/NOTIFY, in db/postgres), which the host discovers.
//
// The dispatcher drives runners; runners and the store know nothing of it.
package dispatcher
