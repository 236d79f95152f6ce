// Package pgbouncertest runs a private PgBouncer for tests: a pgbouncer
// process on a free loopback port, in transaction pooling mode, in front of
// a Postgres server that trusts local connections, with its configuration
// in a temporary directory. Tests use it to run the Postgres backend as
// deployments behind a pooler do: the conformance suite, migrations, the
// runner end to end and the chaos suite's "PgBouncer restarted" scenario.
//
// The pgbouncer binary is found on PATH, under /usr/sbin (Debian's package)
// or at DURAFLOW_TEST_PGBOUNCER_BIN. Without it the tests skip, or fail
// when CI=true or DURAFLOW_TEST_PGBOUNCER=1. PgBouncer refuses to run as
// root: as root it runs as the OS user postgres.
//
// Clients may log in as any role of the server: PgBouncer trusts them and
// looks each role up through auth_user (the upstream URL's user), so a
// test can connect as a role of its own, whose search_path names its
// schema, since PgBouncer 1.18 forwards no search_path startup parameter.
//
// The package must not know about Duraflow's stores: it starts, restarts
// and stops the process and names its address.
package pgbouncertest
