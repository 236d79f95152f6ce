// Package outagetest gives a test a database it can take away and give
// back, on each backend, so that it can check what a part of Duraflow does
// while its database is unavailable and after it returns:
//
//   - SQLite: a file whose write lock another connection takes and holds
//     (sqlitetest.LockWrites), as another process's long write transaction
//     would. The store's writes fail with SQLITE_BUSY after a short busy
//     timeout; its reads go on, since the file is in WAL mode.
//   - Postgres: a private server (internal/pgcluster) stopped in immediate
//     mode and started again, so every call fails, the connections the stop
//     cut included, and the shared test server is never touched.
//
// Either way the store's calls fail with db.ErrUnavailable while the
// database is down. It is for tests only.
package outagetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/postgres"
	"github.com/duraflow/duraflow/db/sqlite/sqlitetest"
	"github.com/duraflow/duraflow/internal/pgcluster"
)

// BusyTimeout is the busy timeout of the SQLite stores: how long a write
// waits for the lock before it fails.
const BusyTimeout = 20 * time.Millisecond

// DB is a migrated database a test can take away (Down) and give back
// (Up), and a store on it.
type DB struct {
	// Name is the backend's name: "sqlite" or "postgres".
	Name string
	// Store is a store on the database. Its calls fail with
	// db.ErrUnavailable while the database is down (on SQLite, its writes).
	Store db.Store
	// URL opens another store on the same database (dburl.Open, or the
	// --db of the duraflow binary); the database was migrated.
	URL string
	// ReadsFail says whether reads fail while the database is down: on
	// Postgres they do, on SQLite only writes do.
	ReadsFail bool

	mu       sync.Mutex
	down, up func() error
	isDown   bool
}

// Down takes the database away; it does nothing when it is down already.
func (d *DB) Down(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isDown {
		return
	}
	if err := d.down(); err != nil {
		t.Fatalf("outagetest: taking the %s database down: %v", d.Name, err)
	}
	d.isDown = true
}

// Up gives the database back and returns once it accepts calls again; it
// does nothing when it is up.
func (d *DB) Up(t testing.TB) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.isDown {
		return
	}
	if err := d.up(); err != nil {
		t.Fatalf("outagetest: bringing the %s database back: %v", d.Name, err)
	}
	d.isDown = false
}

// SQLite returns a migrated SQLite file and a store on it whose writes
// fail after BusyTimeout while the database is down.
func SQLite(t testing.TB) *DB {
	t.Helper()
	path := sqlitetest.FilePath(t)
	d := &DB{
		Name:  "sqlite",
		Store: sqlitetest.NewFileStoreAt(t, path, sqlitetest.WithBusyTimeout(BusyTimeout)),
		URL:   "sqlite:" + path,
	}
	var unlock func()
	d.down = func() error { unlock = sqlitetest.LockWrites(t, path); return nil }
	d.up = func() error { unlock(); return nil }
	return d
}

// Postgres returns a private Postgres server, migrated, and a store on it;
// it skips the test as pgcluster.Start does when no server can be started.
func Postgres(t testing.TB) *DB {
	t.Helper()
	cluster := pgcluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store, err := postgres.Open(ctx, cluster.URL())
	if err != nil {
		t.Fatalf("outagetest: opening the private postgres: %v", err)
	}
	// Closed before the cluster is removed (cleanups run last first).
	t.Cleanup(func() { _ = store.Close() })
	if err := postgres.Migrate(ctx, store.Pool()); err != nil {
		t.Fatalf("outagetest: migrating the private postgres: %v", err)
	}
	return &DB{
		Name: "postgres", Store: store, URL: cluster.URL(), ReadsFail: true,
		down: cluster.Stop, up: cluster.Start,
	}
}

// ForEachBackend runs f as a parallel subtest on each backend's database:
// SQLite and Postgres.
func ForEachBackend(t *testing.T, f func(t *testing.T, d *DB)) {
	t.Helper()
	for _, b := range []struct {
		name string
		open func(testing.TB) *DB
	}{{"sqlite", SQLite}, {"postgres", Postgres}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.open(t))
		})
	}
}
