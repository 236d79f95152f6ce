// Package db defines the persistence contract of Duraflow: the Store
// interface, its domain types and its sentinel errors.
//
// Each backend lives in a subpackage (db/postgres, db/sqlite) and keeps
// its generated sqlc code in a nested internal package. Nothing above this
// package ever sees a driver type: backends convert rows into the types here
// and map driver errors onto ErrNotFound, ErrAlreadyExists, ErrTerminal and
// ErrLeaseLost.
//
// db/dburl opens either backend from a database URL, and db/transition
// holds the rules of every instance transition the backends apply.
//
// This package imports only the leaf package workflow (for the one
// instance status type, dftype.InstanceStatus): the runner, the client
// and the HTTP API all sit above it.
package db
