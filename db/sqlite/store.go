package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/duraflow/duraflow/db"
	"github.com/duraflow/duraflow/db/sqlite/internal/litesqlc"
)

// driverName is the database/sql driver modernc.org/sqlite registers.
const driverName = "sqlite"

// Store implements db.Store over an SQLite database. It is safe for
// concurrent use: writes queue for the single write connection, reads use a
// pool of their own.
type Store struct {
	// write is the one connection every write transaction runs on.
	write *sql.DB
	// read is the pool of read-only connections; for an in-memory database
	// it is write itself.
	read    *sql.DB
	queries *litesqlc.Queries
	memory  bool

	// prepared holds the queries prepared on write and on read (see
	// preparedQueries); nil until the schema they need exists.
	prepared  atomic.Pointer[preparedQueries]
	prepareMu sync.Mutex
	// prepareAfter is the earliest time another attempt is made after one
	// failed (before Migrate has created the tables).
	prepareAfter time.Time
	// txBound is set once BindTx was called: until then no call looks for
	// a caller's transaction in its context.
	txBound atomic.Bool
	// lifecycleOff is set while the lifecycle event log is off
	// (LifecycleLogSet).
	lifecycleOff atomic.Bool
}

// preparedQueries are the store's queries prepared on each pool, so that
// SQLite parses each statement once per connection rather than on every
// call (database/sql keeps a statement per connection, and a transaction
// reuses its connection's). Parsing was the largest cost of a checkpoint.
type preparedQueries struct {
	write, read *litesqlc.Queries
}

// prepareRetry is how long the store runs its queries unprepared after a
// failed attempt to prepare them, typically because the database is not
// migrated yet.
const prepareRetry = time.Second

// queriesFor returns the prepared queries of the write or read pool, or the
// unprepared ones while they cannot be prepared. It must not be called while
// the caller holds a connection of an in-memory store (its one connection
// would be needed to prepare).
func (s *Store) queriesFor(ctx context.Context, write bool) *litesqlc.Queries {
	if tx := s.callerTx(ctx); tx != nil {
		return s.queries.WithTx(tx)
	}
	p := s.prepared.Load()
	if p == nil {
		p = s.prepare(ctx)
	}
	switch {
	case p == nil:
		return s.queries
	case write:
		return p.write
	default:
		return p.read
	}
}

func (s *Store) prepare(ctx context.Context) *preparedQueries {
	s.prepareMu.Lock()
	defer s.prepareMu.Unlock()
	if p := s.prepared.Load(); p != nil {
		return p
	}
	if time.Now().Before(s.prepareAfter) {
		return nil
	}
	w, err := litesqlc.Prepare(ctx, s.write)
	if err != nil {
		s.prepareAfter = time.Now().Add(prepareRetry)
		return nil
	}
	r := w
	if s.read != s.write {
		if r, err = litesqlc.Prepare(ctx, s.read); err != nil {
			_ = w.Close()
			s.prepareAfter = time.Now().Add(prepareRetry)
			return nil
		}
	}
	p := &preparedQueries{write: w, read: r}
	s.prepared.Store(p)
	return p
}

var (
	_ db.Store             = (*Store)(nil)
	_ db.BatchCheckpointer = (*Store)(nil)
)

// Open opens the SQLite database the DSN names and returns a Store that owns
// its connections. The DSN is a file path ("duraflow.db"), ":memory:" for a
// database that lives as long as the store, or a "file:" URI
// ("file:/var/lib/duraflow.db?_pragma=synchronous(FULL)"); a path containing
// '?' must be written as a URI with the '?' escaped. Query parameters of
// modernc.org/sqlite and of SQLite URIs are passed through, and the pragmas
// the package documentation lists are added unless the DSN sets them.
//
// Open creates the file when it does not exist but does not migrate; call
// Migrate before using the store.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return open(ctx, dsn, driverName)
}

// open is Open on the database/sql driver named driver.
func open(ctx context.Context, dsn, driver string) (*Store, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("opening sqlite database: %w", err)
	}
	write, err := openDB(ctx, driver, cfg.write, 1)
	if err != nil {
		return nil, fmt.Errorf("opening sqlite database: %w", err)
	}
	s := &Store{write: write, read: write, memory: cfg.memory}
	if !cfg.memory {
		// Opened after the write connection, which has put the file in WAL
		// mode by now.
		s.read, err = openDB(ctx, driver, cfg.read, max(4, runtime.GOMAXPROCS(0)))
		if err != nil {
			_ = write.Close()
			return nil, fmt.Errorf("opening sqlite read pool: %w", err)
		}
	}
	s.queries = litesqlc.New(s.read)
	return s, nil
}

// OpenWriter opens, for the DSN Open would accept, a *sql.DB of the one
// write connection exactly as Open opens the store's: the same driver, the
// same default pragmas and BEGIN IMMEDIATE transactions. It is for tools
// that measure what the store's connection can do (duraflow bench's SQLite
// ceiling); the caller closes it.
func OpenWriter(ctx context.Context, dsn string) (*sql.DB, error) {
	cfg, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("opening sqlite database: %w", err)
	}
	return openDB(ctx, driverName, cfg.write, 1)
}

// openDB opens a pool of at most conns connections of driver that are
// never closed for age or idleness (an in-memory database would vanish with
// its connection) and opens one connection to surface a bad DSN now.
func openDB(ctx context.Context, driver, dsn string, conns int) (*sql.DB, error) {
	sqlDB, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	return sqlDB, nil
}

// Close closes the store's connections; an in-memory database is gone
// afterwards.
func (s *Store) Close() error {
	var errs []error
	if p := s.prepared.Load(); p != nil {
		errs = append(errs, p.write.Close())
		if p.read != p.write {
			errs = append(errs, p.read.Close())
		}
	}
	if s.read != s.write {
		errs = append(errs, s.read.Close())
	}
	errs = append(errs, s.write.Close())
	return errors.Join(errs...)
}

// Ping checks that the database answers. It asks the read pool, which a long
// write transaction does not hold up, so a health check stays quick while
// writers queue for the write connection (an in-memory database has only the
// one connection).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.read.PingContext(ctx); err != nil {
		return fmt.Errorf("pinging sqlite: %w", interpretError(err))
	}
	return nil
}

// inTx runs fn in one write transaction and commits it when fn returns nil.
// The transaction is BEGIN IMMEDIATE on the single write connection, so it
// holds SQLite's write lock from its first statement: nothing it reads can
// change before it commits. Any error rolls everything back, so a failed
// call changes nothing. Under a context bound to the caller's transaction
// (BindTx) fn runs in a savepoint of it instead, and nothing is committed.
func (s *Store) inTx(ctx context.Context, fn func(q *litesqlc.Queries) error) error {
	if tx := s.callerTx(ctx); tx != nil {
		return s.inCallerTx(ctx, tx, fn)
	}
	q := s.queriesFor(ctx, true)
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(q.WithTx(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

// inReadTx runs fn in one read transaction, so that every query of fn reads
// the same snapshot (under a context bound to the caller's transaction,
// the snapshot of that transaction).
func (s *Store) inReadTx(ctx context.Context, fn func(q *litesqlc.Queries) error) error {
	if tx := s.callerTx(ctx); tx != nil {
		return fn(s.queries.WithTx(tx))
	}
	q := s.queriesFor(ctx, false)
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(q.WithTx(tx)); err != nil {
		return err
	}
	return tx.Commit()
}

// txNow returns the "now" of a write transaction in stored form: t when the
// caller gave one, otherwise the database clock, read once so that every
// statement of the transaction agrees, as Postgres's now() does.
func txNow(ctx context.Context, q *litesqlc.Queries, t *time.Time) (int64, error) {
	if t != nil {
		return micros(*t), nil
	}
	return q.ClockNow(ctx)
}

// isNoRows reports whether err means a query matched no row.
func isNoRows(err error) bool {
	return errors.Is(err, sql.ErrNoRows)
}
