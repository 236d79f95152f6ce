// Package postgres is the PostgreSQL backend of db.Store, built on pgx and a
// *pgxpool.Pool.
//
// Its queries live in db/queries/postgres and are compiled by sqlc into the
// private internal/pgsqlc package; its schema is the goose migrations in
// db/migrations/postgres, applied by Migrate. Every query that compares with
// "now" takes it as a parameter and falls back to the database clock, so a
// fake clock moves the database's notion of time too.
//
// Every transaction that makes a task due now (a create, a resume, a
// restart, an event that wakes a waiting instance, a suspend that is due at
// once, a release due now) also sends pg_notify on the store's wake channel
// (WakeChannel, or WithWakeChannel's) with the workflow name as payload.
// Being part of the transaction, the notification is delivered when the
// change commits and never when it rolls back. Store.WakeListen (the
// db.WakeListener capability, which the host discovers) LISTENs on the
// channel so that the runners of other processes start sooner; they still
// poll, so a lost notification only delays work.
//
// Behind a pooler in transaction mode (PgBouncer's pool_mode=transaction)
// the store keeps no state between transactions: planner settings are
// local to their transaction, every pipeline is one message sequence, and
// Migrate's advisory lock is held by a transaction. Its pool's URL needs
// pgx's default_query_exec_mode=cache_describe (Open refuses the modes
// that cannot send its JSON parameters, and the errors of named prepared
// statements lost behind a pooler say what to change), and its LISTEN a
// direct connection (WithListenURL); see "Behind PgBouncer" in
// docs/operations.md.
//
// Calls whose params set RecordHooks also insert a row into the hook outbox
// (workflow_hook_outbox) in the same transaction. OutboxClaim leases due rows
// with FOR UPDATE SKIP LOCKED and a version that fences OutboxDelivered and
// OutboxRetry, as task claims do.
//
// Nothing of pgx, pgtype or the generated code leaves this package: rows are
// converted into db types (times in UTC) and driver errors are mapped onto
// db's sentinel errors in one place. The package must not know about the
// runner, the workflow authoring API, the host or the HTTP API.
package postgres
