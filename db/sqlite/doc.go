// Package sqlite is the embedded backend of db.Store: a single SQLite file
// (or an in-memory database) driven by modernc.org/sqlite, a pure-Go SQLite
// that needs no cgo. It is the default for development, tests and
// single-node deployments.
//
//	store, err := sqlite.Open(ctx, "duraflow.db")
//	...
//	defer store.Close()
//	if err := sqlite.Migrate(ctx, store); err != nil { ... }
//
// Its queries live in db/queries/sqlite and are compiled by sqlc into the
// private internal/litesqlc package; its schema is the goose migrations in
// db/migrations/sqlite, applied by Migrate. It keeps the exact semantics of
// the Postgres backend, which the db/storetest suite pins for both, hook
// outbox included. SQLite has no LISTEN/NOTIFY, so the store sends no wake
// notifications: runners of one process wake each other in process, and
// other processes find work by polling.
//
// # Connections and transactions
//
// SQLite has one writer at a time, so the store has one: every write runs in
// a transaction on a single dedicated connection, opened with BEGIN
// IMMEDIATE so that it takes the write lock before it reads anything. Writers
// of one process therefore queue for that connection instead of failing
// with SQLITE_BUSY or deadlocking on a lock upgrade, and a claim, which
// selects due tasks and leases them in one such transaction, needs no SKIP
// LOCKED: no other writer can see its rows until it commits. Fencing is
// unchanged: every runner write names its (task id, version), and a stale
// version changes nothing and returns db.ErrLeaseLost. Reads run on a
// separate pool of read-only connections and, in WAL mode, never wait for
// the writer. Writers of other processes on the same file wait for the lock
// for up to busy_timeout.
//
// An in-memory database (":memory:") lives on a single connection that
// serves reads and writes alike, so every call sees the same database; it
// disappears when the store is closed.
//
// # Durability
//
// File databases run with journal_mode=WAL, synchronous=NORMAL,
// busy_timeout=10000 (ms) and foreign_keys=ON, set on every connection
// through the DSN's _pragma parameters. With synchronous=NORMAL in WAL mode a
// commit does not wait for fsync: a crash of the process loses nothing, but
// a power failure or operating-system crash may roll back the last
// transactions committed before it (the database is never corrupted). For
// the engine this means a step that completed just before the machine went
// down may run again, which at-least-once steps already allow. A DSN that
// sets one of these pragmas itself, for example
// "duraflow.db?_pragma=synchronous(FULL)", keeps its own value.
//
// # Time
//
// Times are stored as INTEGER microseconds since the Unix epoch, UTC, and
// converted in one place; values are truncated to the microsecond on the way
// in and come back in UTC, so a time read back equals what the caller wrote
// at microsecond precision. Every query that compares with "now" takes it as
// a parameter; when a call gives none, the store reads the database clock
// once per transaction (to the millisecond), so that every row written by
// one call carries the same time, as Postgres's now() does.
//
// Nothing of the driver or the generated code leaves this package: rows are
// converted into db types and driver errors are mapped onto db's sentinel
// errors in one place. The package must not know about the runner, the
// workflow authoring API, the dispatcher or the HTTP API.
package sqlite
