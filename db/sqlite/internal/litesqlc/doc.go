// Package litesqlc is the sqlc output for the SQLite backend: query methods
// and row types generated from db/queries/sqlite and the schema in
// db/migrations/sqlite. Regenerate with `make generate`; never edit the
// generated files.
//
// Only db/sqlite imports it. Its row types carry storage-level
// representations (times as Unix microseconds, JSON as text, booleans as
// integers, pointers for NULL) and must not leave that package.
package litesqlc
