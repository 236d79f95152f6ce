// Package pgtest gives tests anywhere in the repository a migrated PostgreSQL
// store of their own.
//
// Every NewStore or NewPool call creates a fresh schema with a random name in
// the database DURAFLOW_TEST_DATABASE_URL names (a local trust-auth Postgres by
// default), points a pool's search_path at it, migrates it, and drops it when
// the test ends, so tests run in parallel without seeing each other's rows.
// Notifications are database-wide, so NewStore also gives each store a wake
// channel named after its schema: a test that LISTENs on
// store.WakeChannel() hears its own store only.
// When Postgres is not reachable the test is skipped, or fails when
// DURAFLOW_REQUIRE_POSTGRES=1 (as in CI).
//
// WithPgBouncer reaches the schema through a PgBouncer in transaction
// mode instead (internal/pgbouncertest starts one), as a login role of its
// own whose search_path is the schema, and LISTENs on a direct connection;
// DURAFLOW_TEST_PGBOUNCER=1 does so for every pool of the test binary,
// through one private PgBouncer.
//
// It is for tests only and must not be imported by production code; it knows
// the postgres backend and nothing above the db layer.
package pgtest
