// Package durability holds only the crash tests: a real host, run in a
// subprocess on an SQLite file and on a Postgres schema, is killed with
// SIGKILL while an instance sleeps, while a step runs, inside a saga's
// compensation, and between an Invoke step's start of its child and the
// parent's record of it. It is started again and must end every instance as
// it should: the right output or error, one child per Invoke step, each
// compensation once and in reverse order, and no step that had completed
// before the kill run twice.
//
// The package has no code of its own; the test re-executes its own binary
// as the host process. Run it with
//
//	go test -race ./internal/durability/
//
// The Postgres cases need DURAFLOW_TEST_DATABASE_URL (see db/postgres/pgtest)
// and skip without a server unless DURAFLOW_REQUIRE_POSTGRES=1. The tests
// are not built on Windows, which has no SIGKILL.
package durability
