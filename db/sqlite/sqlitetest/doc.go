// Package sqlitetest gives tests anywhere in the repository a migrated SQLite
// store of their own.
//
// NewStore returns a store on a fresh in-memory database, NewFileStore one on
// a fresh file in the test's temporary directory; both are migrated and
// closed when the test ends, so tests run in parallel without seeing each
// other's rows. Neither needs a server, so nothing is ever skipped.
//
// It is for tests only and must not be imported by production code; it knows
// the sqlite backend and nothing above the db layer.
package sqlitetest
