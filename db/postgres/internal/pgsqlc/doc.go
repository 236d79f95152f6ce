// Package pgsqlc is the sqlc output for the PostgreSQL backend: query
// methods and row types generated from db/queries/postgres and the schema in
// db/migrations/postgres. Regenerate with `make generate`; never edit the
// generated files.
//
// Only db/postgres imports it. Its row types carry driver-level nullability
// (pointers, raw JSON bytes) and must not leave that package.
package pgsqlc
