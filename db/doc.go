// Package db defines the persistence contract of Duraflow: the Store
// interface, its domain types and its sentinel errors.
//
// Each backend lives in a subpackage (db/postgres, db/sqlite) and keeps
// its generated sqlc code in a nested internal package. Nothing above this
// package ever sees a driver type: backends convert rows into the types here
// and map driver errors onto ErrNotFound, ErrAlreadyExists, ErrTerminal and
// ErrLeaseLost.
//
// db/dburl opens either backend from a database URL.
//
// This package must not import anything else of Duraflow: the workflow
// authoring API, the runner and the HTTP API all sit above it.
package db
