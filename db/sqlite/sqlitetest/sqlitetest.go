package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/duraflow/duraflow/db/sqlite"
)

// setupTimeout bounds opening and migrating a test database.
const setupTimeout = 30 * time.Second

// Option changes how NewStore and NewFileStore build their store.
type Option func(*options)

type options struct {
	noMigrations bool
}

// WithoutMigrations leaves the fresh database empty, for tests of migrating
// itself.
func WithoutMigrations() Option {
	return func(o *options) { o.noMigrations = true }
}

// NewStore returns a store on a fresh, migrated in-memory database that is
// closed, and so gone, when the test ends.
func NewStore(t testing.TB, opts ...Option) *sqlite.Store {
	t.Helper()
	return open(t, ":memory:", opts)
}

// NewFileStore returns a store on a fresh, migrated database file in the
// test's temporary directory, closed when the test ends. It exercises what
// NewStore cannot: WAL mode, the read pool beside the write connection, and
// reopening.
func NewFileStore(t testing.TB, opts ...Option) *sqlite.Store {
	t.Helper()
	return open(t, FilePath(t), opts)
}

// FilePath returns the path of a database file that does not exist yet, in
// the test's temporary directory.
func FilePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "duraflow.db")
}

func open(t testing.TB, dsn string, opts []Option) *sqlite.Store {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	store, err := sqlite.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("sqlitetest: opening %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("sqlitetest: closing %s: %v", dsn, err)
		}
	})
	if o.noMigrations {
		return store
	}
	if err := sqlite.Migrate(ctx, store); err != nil {
		t.Fatalf("sqlitetest: migrating %s: %v", dsn, err)
	}
	return store
}
