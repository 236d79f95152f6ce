package sqlitetest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/duraflow/duraflow/db/sqlite"
	"github.com/duraflow/duraflow/db/sqlite/internal/sqlitehook"
)

// setupTimeout bounds opening and migrating a test database.
const setupTimeout = 30 * time.Second

// Option changes how NewStore and NewFileStore build their store.
type Option func(*options)

type options struct {
	noMigrations bool
	busyTimeout  time.Duration
}

// WithoutMigrations leaves the fresh database empty, for tests of migrating
// itself.
func WithoutMigrations() Option {
	return func(o *options) { o.noMigrations = true }
}

// WithBusyTimeout sets how long the store's calls wait for a lock that
// another connection holds (SQLite's busy_timeout) before they fail with
// SQLITE_BUSY, which the store reports as db.ErrUnavailable: short, for
// tests of a locked database (LockWrites). It applies to file stores only.
//
// Defaults to the store's 10 seconds.
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
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

// NewFileStoreAt is NewFileStore on the database file at path, created
// when it does not exist (FilePath names a fresh one), so that the test
// can reach the file itself (LockWrites).
func NewFileStoreAt(t testing.TB, path string, opts ...Option) *sqlite.Store {
	t.Helper()
	return open(t, path, opts)
}

// LockWrites takes the write lock of the database file at path on a
// connection of its own and holds it, as another process's long write
// transaction would, until the returned function is called or the test
// ends. Meanwhile every write of a store on the file waits for its busy
// timeout (WithBusyTimeout) and fails with db.ErrUnavailable; reads go on,
// since the file is in WAL mode.
func LockWrites(t testing.TB, path string) (unlock func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	sqlDB, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("sqlitetest: opening %s to lock it: %v", path, err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "BEGIN EXCLUSIVE")
	}
	if err != nil {
		_ = sqlDB.Close()
		t.Fatalf("sqlitetest: locking %s: %v", path, err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			_, err := conn.ExecContext(context.Background(), "ROLLBACK")
			_ = conn.Close()
			_ = sqlDB.Close()
			if err != nil {
				t.Errorf("sqlitetest: unlocking %s: %v", path, err)
			}
		})
	}
	t.Cleanup(unlock)
	return unlock
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
	if o.busyTimeout > 0 && dsn != ":memory:" {
		dsn += fmt.Sprintf("?_pragma=busy_timeout(%d)", o.busyTimeout.Milliseconds())
	}
	store, err := openStore(ctx, dsn)
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
	if dsn == ":memory:" {
		if err := restoreMigrated(ctx, store); err != nil {
			t.Fatalf("sqlitetest: %v", err)
		}
		return store
	}
	if err := sqlite.Migrate(ctx, store); err != nil {
		t.Fatalf("sqlitetest: migrating %s: %v", dsn, err)
	}
	return store
}

// migrated is the image of an in-memory database with every migration
// applied, made once per process: a fresh in-memory store gets a copy of it
// instead of running the migrations again, which was most of the cost of a
// test store (and of a test harness).
var migrated struct {
	once  sync.Once
	image []byte
	err   error
}

// restoreMigrated makes store's in-memory database a copy of the migrated
// image.
func restoreMigrated(ctx context.Context, store *sqlite.Store) error {
	migrated.once.Do(func() { migrated.image, migrated.err = migratedImage(ctx) })
	if migrated.err != nil {
		return migrated.err
	}
	return rawConn(ctx, store, func(c imageConn) error {
		if err := c.Deserialize(migrated.image); err != nil {
			return fmt.Errorf("copying the migrated database: %w", err)
		}
		return nil
	})
}

// migratedImage migrates a fresh in-memory database and returns its image.
func migratedImage(ctx context.Context) ([]byte, error) {
	store, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		return nil, fmt.Errorf("opening the database to migrate: %w", err)
	}
	defer func() { _ = store.Close() }()
	if err := sqlite.Migrate(ctx, store); err != nil {
		return nil, fmt.Errorf("migrating :memory:: %w", err)
	}
	var image []byte
	err = rawConn(ctx, store, func(c imageConn) error {
		var err error
		image, err = c.Serialize()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("serializing the migrated database: %w", err)
	}
	return image, nil
}

// imageConn is what modernc.org/sqlite's connection offers to copy a
// database (sqlite3_serialize and sqlite3_deserialize).
type imageConn interface {
	Serialize() ([]byte, error)
	Deserialize(buf []byte) error
}

// rawConn calls fn with the driver connection of store's write connection.
func rawConn(ctx context.Context, store *sqlite.Store, fn func(imageConn) error) error {
	conn, err := sqlitehook.WriteDBFunc(store).Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(imageConn)
		if !ok {
			return fmt.Errorf("the sqlite driver's connection (%T) cannot serialize", driverConn)
		}
		return fn(c)
	})
}

// openStore opens the store of dsn: an in-memory one on the driver that
// parses each statement on first use (sqlitehook.OpenLazyPrepareFunc).
func openStore(ctx context.Context, dsn string) (*sqlite.Store, error) {
	if dsn != ":memory:" {
		return sqlite.Open(ctx, dsn)
	}
	s, err := sqlitehook.OpenLazyPrepareFunc(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return s.(*sqlite.Store), nil
}
