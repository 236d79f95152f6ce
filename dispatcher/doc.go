// Package dispatcher holds Duraflow's wake mechanisms: the ways a runner
// learns that work is due sooner than its next poll.
//
// Work is always found by polling the task table; a wake only makes it
// faster, so a lost wake delays work by at most one poll interval and never
// loses it. Local wakes runners in the same process when a commit made work
// due; PGListener wakes them across processes through Postgres
// LISTEN/NOTIFY; TickFunc lets an HTTP request (from cron or a platform
// scheduler) drive a runner.
//
// The dispatcher drives runners; runners and the store know nothing of it.
package dispatcher
