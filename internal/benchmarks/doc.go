// Package benchmarks holds Duraflow's end-to-end benchmarks: real workflow
// code run by a real runner on the real clock against PostgreSQL, measured
// in workflows and steps per second. It has no code of its own; run it with
//
//	make bench
//
// or go test -run '^$' -bench . ./internal/benchmarks. Like the tests, it
// uses the database DURAFLOW_TEST_DATABASE_URL names and skips when Postgres
// is not reachable.
package benchmarks
