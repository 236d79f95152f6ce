// Package dburl opens a Duraflow store from a database URL, so that every
// place a database is configured (the command line, the examples, tests)
// accepts the same forms:
//
//	postgres://user@host:5432/db?sslmode=disable   PostgreSQL (also postgresql://)
//	sqlite:path/to/duraflow.db                     an SQLite file (created when missing)
//	path/to/duraflow.db                            the same, as a bare path
//	sqlite::memory:                                an SQLite database in memory
//
// It is the one place above the backends that knows them all; the engine
// itself only sees db.Store.
package dburl
