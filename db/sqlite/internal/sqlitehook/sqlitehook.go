// Package sqlitehook lets the sqlite backend's test helpers (package
// sqlitetest) reach what the Store does not export. Package sqlite fills in
// its hooks at init; nothing outside db/sqlite can import it.
package sqlitehook

import (
	"context"
	"database/sql"
)

// WriteDBFunc returns the one write connection of store, a *sqlite.Store.
// sqlitetest copies a migrated image into a fresh in-memory database through
// it instead of migrating each one.
var WriteDBFunc func(store any) *sql.DB

// OpenLazyPrepareFunc is sqlite.Open on a driver whose prepared statements
// are parsed on first use, and returns a *sqlite.Store. sqlitetest opens its
// in-memory stores with it: a test runs a few of the store's hundred
// queries, which it then parses once each instead of all of them.
var OpenLazyPrepareFunc func(ctx context.Context, dsn string) (any, error)
