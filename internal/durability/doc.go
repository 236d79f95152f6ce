// Package durability holds only the crash test of the embedded default: a
// real host on an SQLite file, run in a subprocess, is killed with SIGKILL
// while an instance sleeps and while a step runs, started again, and must
// finish every instance with the right output without running a completed
// step twice.
//
// The package has no code of its own; the test re-executes its own binary
// as the host process. Run it with
//
//	go test -race ./internal/durability/
//
// It needs no database server and is skipped on Windows, which has no
// SIGKILL.
package durability
