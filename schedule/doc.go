// Package schedule starts workflow instances on cron schedules.
//
// A schedule names a workflow, a standard five-field cron expression (or a
// descriptor such as @daily) evaluated in an IANA time zone, the params of
// the instances it starts, and MaxCatchup. A Scheduler manages schedules
// (create, get, list, update, enable, disable, delete) and fires them: in
// the background once started (Start, Stop), or on demand (FireDue).
//
// Every due time fires exactly once, however many schedulers run against
// one database: a firing creates the instance, whose id is derived from the
// schedule and the due time (InstanceID), in the same transaction that
// advances the schedule to its next fire time, fenced by the schedule's
// version (db.ScheduleStore.ScheduleFire). Of schedulers racing for one due
// time, the first commit fires it and the others change nothing; a crash
// before the commit leaves the time due, a crash after it leaves it fired.
//
// After an outage several due times may have passed at once; a firing then
// starts only the MaxCatchup most recent of them (1 by default) and skips
// the older ones, so a long outage neither floods the engine nor loses the
// latest run. The instance records its provenance (dftype.Provenance) in
// its metadata: {"trigger":{"type":"cron","source":"schedule <id>",
// "scheduledFor":…,"receivedAt":…}}.
//
// The package knows nothing of HTTP, of the command line, or of how a
// runner executes the instances it starts; it reads and writes through
// db.ScheduleStore and checks workflow names against a workflow.Registry.
package schedule
