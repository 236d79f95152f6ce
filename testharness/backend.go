package testharness

import (
	"os"
	"testing"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres/pgtest"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
)

// Backend is a database a test can run on.
type Backend struct {
	// Name is "sqlite" or "postgres".
	Name string
	// NewStore returns a fresh, migrated store for one test. The postgres
	// backend skips the test when Postgres is unreachable (and fails it when
	// DURAFLOW_REQUIRE_POSTGRES=1).
	NewStore func(t testing.TB) db.Store
}

// SQLite is the embedded backend: a fresh database file in the test's
// temporary directory, with the same WAL settings as production.
var SQLite = Backend{Name: "sqlite", NewStore: func(t testing.TB) db.Store { return sqlitetest.NewFileStore(t) }}

// SQLiteMemory is the embedded backend in memory: the fastest, and the
// harness's default.
var SQLiteMemory = Backend{Name: "sqlite-memory", NewStore: func(t testing.TB) db.Store { return sqlitetest.NewStore(t) }}

// Postgres is a fresh schema in the database at DURAFLOW_TEST_DATABASE_URL.
var Postgres = Backend{Name: "postgres", NewStore: func(t testing.TB) db.Store { return pgtest.NewStore(t) }}

// Backends returns every backend Duraflow supports: the tests that must hold
// for all of them run on each.
func Backends() []Backend { return []Backend{SQLite, Postgres} }

// DefaultBackend is the backend New uses without WithBackend or WithStore:
// in-memory SQLite, or the one named by DURAFLOW_TEST_BACKEND ("sqlite",
// "sqlite-memory" or "postgres"), so a suite of workflow tests can be run on
// Postgres without changing code.
func DefaultBackend() Backend {
	switch os.Getenv("DURAFLOW_TEST_BACKEND") {
	case "postgres":
		return Postgres
	case "sqlite":
		return SQLite
	default:
		return SQLiteMemory
	}
}

// ForEachBackend runs f as a parallel subtest on every backend.
func ForEachBackend(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// WithBackend runs the harness on a fresh store of the backend.
func WithBackend(b Backend) Option { return func(o *options) { o.backend = &b } }
