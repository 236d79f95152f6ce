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
// re-executed side effects, stall after a database restart), and below it
// again every failure found, so a log cut to its tail still says why.
//
// What it checks beyond that: two crash-looping instances, whose step kills
// its runner on every attempt, must end errored with "lost its runner"
// after at most 5 lost leases: one on a worker of its own (the bound alone),
// one on the chaos workers beside the ordinary instances. The runner's
// quarantine (one suspect task at a time) must keep the shared one from
// taking them down with it: the ledger shows which ordinary instances had
// an attempt die in a worker the crash loop killed; none may die beside more
// than 2 crash-loop attempts in a row (with no step of it finishing
// between), nor end by the crash-loop bound after the crash loop gave it
// more than 2 of the lease losses that bound counted (the workers write a
// ledger line per claim with the task's lease losses in a row, so a claim
// the next one finds a loss further lost its lease, one handed back by the
// quarantine did not, and a lost claim is the crash loop's when its worker
// died in a crash-loop attempt before the next claim). Random kills alone may end an
// instance by the bound: every instance the bound ends must have had at
// least 5 claims in workers that died since it last made progress.
// Every self-crash must be counted and its worker replaced, not taken for a
// test kill. And after each 2.5 s Postgres restart, every instance that was
// running on a live runner, its lease current, must make progress within
// DURAFLOW_CHAOS_MAX_STALL of the database's return, not a lease later
// (instances whose worker crashed in the crash loop meanwhile are left out).
//
// The package has no code of its own. Its test files carry the build tags
// chaos and linux, so `go test ./...` skips them; the worker processes are
// the test binary re-executed as a host (a runner with the chaos workflows,
// and on Postgres a LISTEN wake listener). SQLite runs several worker
// processes on one file (WAL, busy_timeout), as the store supports. Postgres
// runs on a private cluster the suite creates with initdb and pg_ctl (found
// under /usr/lib/postgresql/*/bin or DURAFLOW_CHAOS_PG_BIN; as root they run
// as the OS user postgres), on a free loopback port with fsync on, and
// removes at the end; the shared test server is never touched. Without those
// binaries the Postgres half is skipped, or fails when CI=true. Run it with
//
//	make chaos
//	go test -count=1 -tags chaos -timeout 30m -v -run '^TestChaos$' ./internal/chaos/
//
// Knobs (environment):
//
//	DURAFLOW_CHAOS_SEED       seed of every random choice (or -chaos.seed), logged as "seed N":
//	                          a replay makes the same choices, though timing still varies
//	DURAFLOW_CHAOS_DURATION   chaos time per backend (default 1m; the full run is 10m)
//	DURAFLOW_CHAOS_BACKENDS   comma-separated: sqlite,postgres (default both)
//	DURAFLOW_CHAOS_WORKERS    runner processes (default 3)
//	DURAFLOW_CHAOS_RATE       instances created per second (default 4)
//	DURAFLOW_CHAOS_LEASE      the runners' lease (default 10s)
//	DURAFLOW_CHAOS_MAX_STALL  longest allowed stall after a database restart (default 3s)
//	DURAFLOW_CHAOS_CRASHLOOP  0 leaves out the crash-looping instances (default 1)
//	DURAFLOW_CHAOS_REPORT     file the summary table is also written to
//
// The CI version is the default, a minute of chaos per backend; the full
// version, whose numbers docs/reliability.md reports, is
//
//	make chaos CHAOS_DURATION=10m CHAOS_TIMEOUT=60m
//
// TestChaosPgBouncer (`make chaos-pgbouncer`, pgbouncer_test.go) is the
// "PgBouncer restarted" scenario: the runners reach the private Postgres
// through a private PgBouncer in transaction mode and LISTEN on direct
// connections, PgBouncer is restarted under load and runners are killed,
// and the same checks follow (DURAFLOW_CHAOS_PGBOUNCER_DURATION, 40s).
//
// It runs only on Linux (SIGSTOP, /proc, runuser).
package chaos
