// Package chaos holds only the chaos suite (`make chaos`): runner processes
// on one database are killed with SIGKILL at random points, stopped with
// SIGSTOP past their lease and resumed, the Postgres server is restarted in
// immediate mode under load and the runners' LISTEN connections are
// terminated, while the test creates instances and sends them events. After
// the chaos stops and the instances settle, the suite checks from the
// database and an external side-effect ledger that no instance was lost,
// none completed twice, no step was recorded twice, no completed step ran
// again and a stale (stopped, then resumed) runner wrote nothing; it prints
// a summary table of what it did and measured (kills, stops, restarts,
// re-executed side effects, stall after a database restart).
//
// The package has no code of its own. Its test files carry the build tag
// chaos, so `go test ./...` skips them; the worker processes are the test
// binary re-executed as a host (a runner with the chaos workflows). Postgres
// runs on a private cluster the suite creates with initdb and pg_ctl (found
// under /usr/lib/postgresql/*/bin or DURAFLOW_CHAOS_PG_BIN), on a free
// loopback port, and removes at the end; the shared test server is never
// touched. Without those binaries the Postgres half is skipped, or fails
// when CI=true. Run it with
//
//	make chaos
//	go test -count=1 -tags chaos -timeout 30m -v -run TestChaos ./internal/chaos/
//
// Knobs (environment):
//
//	DURAFLOW_CHAOS_SEED       seed of every random choice (or -chaos.seed); logged as "seed N"
//	DURAFLOW_CHAOS_DURATION   chaos time per backend (default 1m; the full run is 10m)
//	DURAFLOW_CHAOS_BACKENDS   comma-separated: sqlite,postgres (default both)
//	DURAFLOW_CHAOS_WORKERS    runner processes (default 3)
//	DURAFLOW_CHAOS_RATE       instances created per second (default 4)
//	DURAFLOW_CHAOS_LEASE      the runners' lease (default 10s)
//	DURAFLOW_CHAOS_MAX_STALL  longest allowed stall after a database restart (default 3s)
//	DURAFLOW_CHAOS_CRASHLOOP  0 leaves out the crash-looping instance (default 1)
//	DURAFLOW_CHAOS_REPORT     file the summary table is also written to
//
// The full version, whose numbers docs/reliability.md reports, is
//
//	make chaos CHAOS_DURATION=10m
//
// It needs SIGKILL and SIGSTOP and runs only on Linux and other Unix systems.
package chaos
