// Package bench measures Duraflow end to end: named workloads (empty,
// steps10, wake, create, soak) run by real runners against a real database,
// with the statistics, progress bar, table and JSON report of the
// `duraflow bench` command, and an optional ceiling run of the SQL shapes
// the engine uses (with pgbench on Postgres, through database/sql on
// SQLite), so that throughput reads as a fraction of what the database
// itself can do on the same machine in the same minute.
//
// Every run gets a database of its own: a fresh schema (dropped afterwards)
// on Postgres, a fresh file on SQLite. Runners live in this process, in
// worker processes (see RunWorker and Config.WorkerCommand), or both.
//
// The package wires concrete backends, as a command does; nothing below it
// may import it. It measures through public APIs only (client, runner,
// dispatcher and the stores), and reads the figures it reports from the
// database (created_at, started_at and completed_at of each instance), so
// they hold whichever process ran the work.
package bench
